package qmp

import (
	"strings"

	"github.com/tidwall/gjson"
)

// The reply shapes this tool relies on, per command: the type of the
// "return" value and, for arrays of objects, the types of the fields it
// reads. A reply of another shape is an error naming the command and the
// field, never zeros read from the wrong type.
type shape struct {
	ret    gjson.Type
	array  bool
	fields map[string]gjson.Type // gjson paths inside each array element
}

var (
	object = shape{ret: gjson.JSON}
	list   = func(fields map[string]gjson.Type) shape { return shape{ret: gjson.JSON, array: true, fields: fields} }
)

var counters = func() map[string]gjson.Type {
	m := map[string]gjson.Type{}
	for _, k := range []string{"rd_bytes", "wr_bytes", "rd_operations", "wr_operations", "flush_operations",
		"flush_total_time_ns", "rd_total_time_ns", "wr_total_time_ns", "unmap_operations", "unmap_bytes",
		"failed_rd_operations", "failed_wr_operations", "failed_flush_operations", "failed_unmap_operations"} {
		m["stats."+k] = gjson.Number
	}
	for _, k := range []string{"discard-nb-ok", "discard-nb-failed", "discard-bytes-ok"} {
		m["driver-specific."+k] = gjson.Number
	}
	m["qdev"] = gjson.String
	m["device"] = gjson.String
	m["node-name"] = gjson.String
	return m
}()

var shapes = map[string]shape{
	"query-block": list(map[string]gjson.Type{"qdev": gjson.String, "device": gjson.String, "inserted": gjson.JSON,
		"inserted.node-name": gjson.String, "inserted.cache.direct": gjson.True, "inserted.cache.writeback": gjson.True,
		"inserted.bps_wr": gjson.Number, "inserted.bps_rd": gjson.Number, "inserted.iops_rd": gjson.Number, "inserted.iops_wr": gjson.Number,
		"io-status": gjson.String}),
	"query-named-block-nodes": list(map[string]gjson.Type{"node-name": gjson.String, "drv": gjson.String, "file": gjson.String,
		"cache.direct": gjson.True, "cache.no-flush": gjson.True, "ro": gjson.True}),
	"x-debug-query-block-graph": object,
	"query-blockstats":          list(counters),
	"query-iothreads":           list(map[string]gjson.Type{"id": gjson.String, "thread-id": gjson.Number}),
	"query-cpus-fast":           list(map[string]gjson.Type{"cpu-index": gjson.Number, "thread-id": gjson.Number}),
	"query-pci":                 list(map[string]gjson.Type{"bus": gjson.Number, "devices": gjson.JSON}),
	"query-block-jobs":          list(map[string]gjson.Type{"device": gjson.String, "type": gjson.String}),
	"query-status":              object,
	"query-version":             object,
	"qom-list-get":              list(map[string]gjson.Type{"properties": gjson.JSON}),
}

// ShapeError is a reply whose shape differs from what the command returns:
// not QEMU refusing the command (Error), but a reply the tool cannot read.
type ShapeError struct {
	Command string
	Msg     string
}

func (e *ShapeError) Error() string { return e.Msg }

// trees are the shapes' fields as trees, built once.
var trees = func() map[string]*fieldTree {
	m := map[string]*fieldTree{}
	for cmd, sh := range shapes {
		m[cmd] = sh.tree()
	}
	return m
}()

// fieldTree is a shape's fields by path segment, for scanReply to check
// them while it reads the reply (a gjson Get per field scanned each entry
// once per field and cost a third of an exchange's CPU; a walk after the
// validation was a second pass).
type fieldTree struct {
	typ  gjson.Type // set for a leaf
	leaf bool
	path string // from the entry: "inserted.cache.direct"
	sub  map[string]*fieldTree
}

func (sh shape) tree() *fieldTree {
	root := &fieldTree{sub: map[string]*fieldTree{}}
	for path, typ := range sh.fields {
		n := root
		segs := strings.Split(path, ".")
		for i, seg := range segs {
			if n.sub == nil {
				n.sub = map[string]*fieldTree{}
			}
			c := n.sub[seg]
			if c == nil {
				c = &fieldTree{path: strings.Join(segs[:i+1], ".")}
				n.sub[seg] = c
			}
			n = c
		}
		n.leaf, n.typ = true, typ
	}
	return root
}

func sameType(got, want gjson.Type) bool {
	if want == gjson.True {
		return got == gjson.True || got == gjson.False
	}
	return got == want
}

func typeName(t gjson.Type) string {
	switch t {
	case gjson.Number:
		return "a number"
	case gjson.String:
		return "a string"
	case gjson.True:
		return "a boolean"
	}
	return "an object or array"
}
