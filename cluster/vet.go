package cluster

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// MaxCount bounds each number a node answers in an object of counts
// (check's summary: VMs, errors, warnings, infos), the numbers Merge adds
// up across nodes: a node of this many VMs with as many findings is beyond
// any Proxmox node (pve-vmid allows 10^9 VMIDs; a node runs hundreds). A
// node that answered -3 or 10^18 made the cluster's summary what it said.
const MaxCount = 1_000_000

// Vet checks what each node answered before Merge believes it: every
// object it lists with a "vmid" (check's vms[]) must be a QEMU VM that
// .vmlist places on that node, listed once, and one it was asked about when
// it was asked about some (asked: the VMIDs each node was sent, none for
// all of its own; nil when the command's arguments are no VMIDs); every
// number in an object of
// numbers (check's summary) must be a whole number from 0 to MaxCount. A
// node's answer that fails is not believed at all: it becomes BadReply,
// naming the first thing wrong, and the node counts as not answering
// (its VMs judged from their configs where the command does that). local
// is this node, whose answer is this process's own and is not vetted;
// vms nil (.vmlist unreadable) refuses every other node's VMs: nothing says
// which are its own.
func Vet(answers []Answer, local string, vms VMList, asked func(node string) []string) {
	for i := range answers {
		a := &answers[i]
		if a.Status != Answered || a.Node.Name == local || a.Reply == nil {
			continue
		}
		var want map[int]bool
		if asked != nil && len(asked(a.Node.Name)) > 0 {
			want = map[int]bool{}
			for _, s := range asked(a.Node.Name) {
				if id, err := strconv.Atoi(s); err == nil {
					want[id] = true
				}
			}
		}
		if why := vetDocument(a.Reply.Stdout, a.Node.Name, vms, want); why != "" {
			a.fail(&NodeError{Node: a.Node.Name, Status: BadReply, Msg: "answered what cannot be believed: " + why, Version: a.Reply.Version})
		}
	}
}

// vetDocument is why a node's JSON document cannot be believed, "" when it
// can (a document that does not parse is Merge's to refuse).
func vetDocument(stdout, node string, vms VMList, want map[int]bool) string {
	doc, err := ParseObject([]byte(stdout))
	if err != nil {
		return ""
	}
	seen := map[int]bool{}
	for _, k := range doc.Keys() {
		v, _ := doc.Get(k)
		switch kind(v) {
		case '[':
			var items []json.RawMessage
			if json.Unmarshal(v, &items) != nil {
				continue
			}
			for _, it := range items {
				if why := vetItem(it, k, node, vms, want, seen); why != "" {
					return why
				}
			}
		case '{':
			if !isCounts(v) {
				continue
			}
			o, _ := ParseObject(v)
			for _, c := range o.Keys() {
				n, _ := o.Get(c)
				if x, err := strconv.ParseInt(string(n), 10, 64); err != nil || x < 0 || x > MaxCount {
					return fmt.Sprintf("%s.%s is %s, not a count from 0 to %d", k, c, number(n), MaxCount)
				}
			}
		}
	}
	return ""
}

// vetItem checks one object of a list that names a VM.
func vetItem(it json.RawMessage, list, node string, vms VMList, want, seen map[int]bool) string {
	if kind(it) != '{' {
		return ""
	}
	o, err := ParseObject(it)
	if err != nil {
		return ""
	}
	raw, ok := o.Get("vmid")
	if !ok {
		return ""
	}
	id, err := strconv.Atoi(string(raw))
	if err != nil {
		return fmt.Sprintf("%s[] has vmid %s, not a VMID", list, units.Clip(string(raw), 30))
	}
	g, listed := vms[id]
	switch {
	case vms == nil:
		return fmt.Sprintf("VM %d, and there is no %s here to say which VMs are %s's", id, VMListFile, node)
	case !listed:
		return fmt.Sprintf("VM %d, which %s does not list", id, VMListFile)
	case g.Node != node:
		return fmt.Sprintf("VM %d, which %s places on %s", id, VMListFile, g.Node)
	case g.Type != QEMU:
		return fmt.Sprintf("VM %d, which %s lists as a %s guest", id, VMListFile, g.Type)
	case want != nil && !want[id]:
		return fmt.Sprintf("VM %d, which it was not asked about", id)
	case seen[id]:
		return fmt.Sprintf("VM %d twice", id)
	}
	seen[id] = true
	return ""
}

// number is a JSON number as a message quotes it: its text (digits,
// sign, point, exponent: nothing a terminal acts on), cut when long.
func number(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if kind(raw) != '0' {
		return units.Clip(s, 30)
	}
	if len(s) > 30 {
		return s[:30] + "..."
	}
	return s
}

// VetForwarded checks a forwarded command's JSON document against the VM
// it was asked about: an object (or each object of a list) that carries a
// "vmid" must carry that VM's (the caller reports the node as BadReply).
func VetForwarded(b []byte, g Guest) error {
	var items []json.RawMessage
	switch kind(b) {
	case '{':
		items = []json.RawMessage{b}
	case '[':
		if json.Unmarshal(b, &items) != nil {
			return nil
		}
	}
	for _, it := range items {
		o, err := ParseObject(it)
		if err != nil {
			continue
		}
		if raw, ok := o.Get("vmid"); ok && strings.TrimSpace(string(raw)) != strconv.Itoa(g.VMID) {
			return fmt.Errorf("answered for VM %s when asked about VM %d: not believed", number(raw), g.VMID)
		}
	}
	return nil
}
