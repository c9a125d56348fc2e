package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// GuestType is the "type" of a .vmlist entry.
type GuestType string

// Guest types pmxcfs writes (status.c, vminfo_type_to_string).
const (
	QEMU GuestType = "qemu"
	LXC  GuestType = "lxc"
)

// Guest is one entry of /etc/pve/.vmlist: which node a guest belongs to.
type Guest struct {
	VMID int
	Node string
	Type GuestType
}

// VMList is /etc/pve/.vmlist: every guest of the cluster by VMID.
type VMList map[int]Guest

// ErrVMList is a .vmlist file this tool cannot read.
var ErrVMList = exitcode.New(exitcode.Unreachable, "cannot read /etc/pve/.vmlist")

// rawVMList is the JSON pmxcfs writes (pve-cluster src/pmxcfs/status.c,
// cfs_create_vmlist_msg): "ids" is missing when the cluster has no guest.
type rawVMList struct {
	Version *uint64 `json:"version"`
	IDs     map[string]struct {
		Node    string    `json:"node"`
		Type    GuestType `json:"type"`
		Version uint64    `json:"version"`
	} `json:"ids"`
}

// ParseVMList reads the contents of /etc/pve/.vmlist. A VMID or node name
// that Proxmox could not have written makes the whole file unreadable.
func ParseVMList(b []byte) (VMList, error) {
	var raw rawVMList
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrVMList, jsonErrLine(b, err), err)
	}
	if raw.Version == nil {
		return nil, fmt.Errorf("%w: no version", ErrVMList)
	}
	out := VMList{}
	for id, g := range raw.IDs {
		at := lineOf(b, bytes.Index(b, []byte(`"ids"`)), strconv.Quote(id))
		vmid, err := qemuserver.ParseVMID(id)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrVMList, at, err)
		}
		if err := ValidateNodeName(g.Node); err != nil {
			return nil, fmt.Errorf("%w: line %d: VM %d: %v", ErrVMList, lineOf(b, offsetOfLine(b, at), `"node"`), vmid, err)
		}
		out[vmid] = Guest{VMID: vmid, Node: g.Node, Type: g.Type}
	}
	return out, nil
}

// OnNode lists the VMIDs of the QEMU guests of a node, ascending.
func (l VMList) OnNode(node string) []int {
	var ids []int
	for id, g := range l {
		if g.Node == node && g.Type == QEMU {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// String names a guest for messages: "VM 370 on pve2".
func (g Guest) String() string {
	kind := "VM"
	if g.Type != QEMU {
		kind = "guest (" + string(g.Type) + ")"
	}
	return kind + " " + strconv.Itoa(g.VMID) + " on " + g.Node
}
