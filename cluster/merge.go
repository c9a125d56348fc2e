package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// NodeReport is one node's entry under "nodes" in a merged document.
type NodeReport struct {
	Node    string  `json:"node"`
	IP      string  `json:"ip,omitempty"`
	Status  Status  `json:"status"`
	Version string  `json:"version,omitempty"` // its pvediskcheck version, when known
	Exit    *int    `json:"exit"`              // its exit code; null when it did not answer
	Error   string  `json:"error,omitempty"`   // why it did not take part
	Elapsed float64 `json:"elapsed_s"`
	// VersionDiffers: the node runs another pvediskcheck version than this one.
	VersionDiffers bool `json:"version_differs,omitempty"`
	// ConfigOnly: the node did not answer and its VMs were checked from
	// their configs in pmxcfs by this node.
	ConfigOnly bool `json:"config_only,omitempty"`
}

// Reports lists every node's status; own is this node's pvediskcheck version.
func Reports(answers []Answer, own string) []NodeReport {
	out := make([]NodeReport, 0, len(answers))
	for _, a := range answers {
		r := NodeReport{Node: a.Node.Name, IP: a.Node.IP, Status: a.Status, Elapsed: units.Round(a.Elapsed.Seconds(), 3), ConfigOnly: a.ConfigOnly != nil}
		if a.Reply != nil {
			exit := a.Reply.Exit
			r.Exit, r.Version = &exit, a.Reply.Version
		}
		if a.Err != nil {
			r.Error = a.Err.Msg
			if r.Version == "" {
				r.Version = a.Err.Version
			}
		}
		r.VersionDiffers = r.Version != "" && r.Version != own
		out = append(out, r)
	}
	return out
}

// Merge builds one document from the JSON documents the nodes answered
// with, node by node in the order of answers, and adds "nodes" (Reports):
//   - a list of objects (check's "vms", thin's "pools") is concatenated and
//     every object carries "node" as its first key, and "config_only": true
//     when it was judged from the node's configs only (ConfigOnly);
//   - a list of strings (notes) is concatenated, each prefixed with its node;
//   - an object whose values are all numbers (check's "summary") is summed;
//   - any other value is the first node's.
//
// A node that answered with something that is not a JSON object becomes
// BadReply: an error for that node only. Merge changes answers accordingly;
// compute Exit after it.
func Merge(answers []Answer, own string) *Object {
	out := &Object{}
	counts := make([]*Object, len(answers)) // each node's own objects of numbers
	for i := range answers {
		a := &answers[i]
		reply, configOnly := a.Reply, false
		switch {
		case a.Status == Answered:
		case a.ConfigOnly != nil:
			reply, configOnly = a.ConfigOnly, true
		default:
			continue
		}
		doc, err := ParseObject([]byte(reply.Stdout))
		if err != nil {
			if configOnly {
				a.ConfigOnly = nil
				continue
			}
			a.fail(&NodeError{Node: a.Node.Name, Status: BadReply, Msg: "printed JSON that cannot be read (" + err.Error() + "): " + units.Clip(reply.Stdout, maxEcho), Version: reply.Version})
			continue
		}
		counts[i] = &Object{}
		for _, k := range doc.Keys() {
			v, _ := doc.Get(k)
			cur, have := out.Get(k)
			out.put(k, combine(cur, have, v, a.Node.Name, configOnly), false)
			if isCounts(v) {
				counts[i].put(k, v, false)
			}
		}
	}
	nodes := make([]*Object, len(answers))
	for i, r := range Reports(answers, own) {
		b, _ := json.Marshal(r)
		nodes[i], _ = ParseObject(b)
		if a := answers[i]; counts[i] != nil && (a.Status == Answered || a.ConfigOnly != nil) {
			for _, k := range counts[i].Keys() {
				v, _ := counts[i].Get(k)
				nodes[i].put(k, v, false)
			}
		}
	}
	out.Set("nodes", nodes, false)
	return out
}

// isCounts reports whether v is an object whose values are all numbers.
func isCounts(v json.RawMessage) bool {
	o, err := ParseObject(v)
	if err != nil || kind(v) != '{' {
		return false
	}
	for _, k := range o.Keys() {
		if x, _ := o.Get(k); kind(x) != '0' {
			return false
		}
	}
	return true
}

// combine merges node's value v of a key into cur (have: cur exists).
func combine(cur json.RawMessage, have bool, v json.RawMessage, node string, configOnly bool) json.RawMessage {
	switch kind(v) {
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			break
		}
		for i, it := range items {
			items[i] = tag(it, node, configOnly)
		}
		prev := []json.RawMessage{}
		if have && (kind(cur) != '[' || json.Unmarshal(cur, &prev) != nil) {
			return cur
		}
		b, _ := json.Marshal(append(prev, items...))
		return b
	case '{':
		if have {
			if sum, ok := sumNumbers(cur, v); ok {
				return sum
			}
		}
	}
	if have {
		return cur
	}
	return v
}

// tag marks one list item with its node.
func tag(it json.RawMessage, node string, configOnly bool) json.RawMessage {
	switch kind(it) {
	case '{':
		o, err := ParseObject(it)
		if err != nil {
			return it
		}
		if configOnly {
			o.Set("config_only", true, true)
		}
		o.Set("node", node, true)
		b, _ := json.Marshal(o)
		return b
	case '"':
		var s string
		if json.Unmarshal(it, &s) == nil {
			b, _ := json.Marshal(node + ": " + s)
			return b
		}
	}
	return it
}

// sumNumbers adds two objects whose values are all numbers, key by key.
func sumNumbers(a, b json.RawMessage) (json.RawMessage, bool) {
	oa, err1 := ParseObject(a)
	ob, err2 := ParseObject(b)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	sum := &Object{}
	for _, o := range []*Object{oa, ob} {
		for _, k := range o.Keys() {
			v, _ := o.Get(k)
			cur, have := sum.Get(k)
			if !have {
				cur = json.RawMessage("0")
			}
			n, ok := add(cur, v)
			if !ok {
				return nil, false
			}
			sum.put(k, n, false)
		}
	}
	out, _ := json.Marshal(sum)
	return out, true
}

// add adds two JSON numbers, as integers when both are.
func add(a, b json.RawMessage) (json.RawMessage, bool) {
	if kind(a) != '0' || kind(b) != '0' {
		return nil, false
	}
	ia, e1 := strconv.ParseInt(string(a), 10, 64)
	ib, e2 := strconv.ParseInt(string(b), 10, 64)
	if e1 == nil && e2 == nil {
		return json.RawMessage(strconv.FormatInt(ia+ib, 10)), true
	}
	fa, e3 := strconv.ParseFloat(string(a), 64)
	fb, e4 := strconv.ParseFloat(string(b), 64)
	if e3 != nil || e4 != nil {
		return nil, false
	}
	return json.RawMessage(strconv.FormatFloat(fa+fb, 'g', -1, 64)), true
}

// kind is a JSON value's first character: '{', '[', '"', '0' for a number,
// 0 for anything else (true, false, null).
func kind(v json.RawMessage) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; {
	case c == '{' || c == '[' || c == '"':
		return c
	case c == '-' || c >= '0' && c <= '9':
		return '0'
	}
	return 0
}

func itoa(n int) string { return strconv.Itoa(n) }

// TagDocument marks a node's whole answer (a forwarded command's JSON
// document): an object gets "node" as its first key, a list gets it in
// every object it holds. nodeVersion, when not "", is added as
// "node_version" next to it (the node runs another pvediskcheck version).
func TagDocument(b []byte, node, nodeVersion string) (json.RawMessage, error) {
	tagOne := func(o *Object) {
		if nodeVersion != "" {
			o.Set("node_version", nodeVersion, true)
		}
		o.Set("node", node, true)
	}
	switch kind(b) {
	case '{':
		o, err := ParseObject(b)
		if err != nil {
			return nil, err
		}
		tagOne(o)
		return json.Marshal(o)
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(b, &items); err != nil {
			return nil, err
		}
		for i, it := range items {
			o, err := ParseObject(it)
			if err != nil {
				return nil, err
			}
			tagOne(o)
			items[i], _ = json.Marshal(o)
		}
		return json.Marshal(items)
	}
	return nil, errors.New("not a JSON object or list")
}

// Decode reads a merged document back into v, the shape a text view needs:
// its lists as []Tagged[T] of the nodes' own result types, "nodes" as
// NodeReport with the objects of numbers each node answered with.
func Decode(doc *Object, v any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Tagged is one object of a merged list read back (check's vms[], thin's
// pools[]): the node's own object as T, and what Merge marked it with.
type Tagged[T any] struct {
	Node       string
	ConfigOnly bool // judged from the node's configs by this node
	Item       T
}

// UnmarshalJSON reads "node" and "config_only" into the tag and the whole
// object into Item.
func (t *Tagged[T]) UnmarshalJSON(b []byte) error {
	var tag struct {
		Node       string `json:"node"`
		ConfigOnly bool   `json:"config_only"`
	}
	if err := json.Unmarshal(b, &tag); err != nil {
		return err
	}
	t.Node, t.ConfigOnly = tag.Node, tag.ConfigOnly
	return json.Unmarshal(b, &t.Item)
}
