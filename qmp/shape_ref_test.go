package qmp

import (
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// The shape check as it was before scanReply did it in its one pass: a
// walk with gjson over the return value after gjson.Valid. Kept as the
// reference the scanner is compared against (TestScanMatchesReference,
// FuzzScanReply): the same verdict and the same message for every reply.

// refCheckShape reports a reply whose shape differs from what the command
// returns. gjson has one type for true and false: gjson.True stands for a
// boolean.
func refCheckShape(cmd string, ret gjson.Result) error {
	sh, ok := shapes[cmd]
	if !ok {
		return nil
	}
	bad := func(what string, got gjson.Result) error {
		return &ShapeError{cmd, fmt.Sprintf("QMP %s: %s is %s, not %s", cmd, what, units.Clip(got.Raw, 40), describe(sh, what))}
	}
	if ret.Type != sh.ret || sh.array != ret.IsArray() {
		return bad("the reply", ret)
	}
	if !sh.array {
		return nil
	}
	tree := trees[cmd]
	var err error
	i := 0
	ret.ForEach(func(_, e gjson.Result) bool {
		if !e.IsObject() {
			err = bad(fmt.Sprintf("entry %d", i), e)
			return false
		}
		err = refCheckFields(cmd, i, "", e, tree)
		i++
		return err == nil
	})
	return err
}

// refCheckFields walks one object against the tree: optional fields may be
// absent; a present one must have its type.
func refCheckFields(cmd string, i int, prefix string, obj gjson.Result, t *fieldTree) error {
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		c := t.sub[k.Str]
		if c == nil {
			return true
		}
		path := prefix + k.Str
		if c.leaf && !sameType(v.Type, c.typ) {
			err = &ShapeError{cmd, fmt.Sprintf("QMP %s: entry %d's %s is %s, not %s", cmd, i, path, units.Clip(v.Raw, 40), typeName(c.typ))}
			return false
		}
		if len(c.sub) > 0 && v.IsObject() {
			err = refCheckFields(cmd, i, path+".", v, c)
		}
		return err == nil
	})
	return err
}

func describe(sh shape, what string) string {
	if what == "the reply" && sh.array {
		return "an array"
	}
	return "an object"
}
