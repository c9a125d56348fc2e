package qmp

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// Bounds on the structure of one reply line, on top of its size. A guest
// agent's replies are written by the guest, and QMP's by whatever holds the
// socket. A validator that recurses once per nesting level (gjson's does)
// dies of Go's stack limit on megabytes of "[", a fatal error that no
// recover catches; a reply of millions of tiny members costs tens of bytes
// of heap per byte once read as an array or a map. The bounds are those
// QEMU puts on the JSON it reads itself (qobject/json-streamer.c:
// MAX_NESTING 1 << 10); the replies this tool reads are far inside them:
// the recorded ones (qmp/testdata, QEMU 7.2 and 11.1) nest at most 7
// levels, a backing chain adds one level per image (query-block's
// backing-image, query-blockstats' backing), and the largest containers
// hold one entry per device, block node, guest filesystem or counter.
const (
	// MaxDepth is the deepest nesting a reply may have.
	MaxDepth = 1 << 10
	// MaxMembers is the most members one object or array may hold.
	MaxMembers = 1 << 16
)

// ErrHostileReply is a reply nested deeper than MaxDepth or with a
// container of more than MaxMembers members: refused at the first byte
// past the bound.
var ErrHostileReply = errors.New("reply refused")

// errMalformed is a line that is not one JSON value.
var errMalformed = errors.New("not JSON")

// reply is one reply line as its one scan found it: valid JSON within the
// bounds, where the values of its first top-level "return", "error" and
// "event" members lie, which of the three came first, and the first place
// where its "return" value differs from the shape its command returns.
type reply struct {
	line            []byte
	ret, err, event span
	first           byte // 'r' return, 'e' error, 'v' event, 0 none of them
	shape           error
}

// span is a value's bytes in the line; end 0 means absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// span is the member k names ('r', 'e', 'v' as first), nil for 0.
func (r *reply) span(k byte) *span {
	switch k {
	case 'r':
		return &r.ret
	case 'e':
		return &r.err
	case 'v':
		return &r.event
	}
	return nil
}

// value is the span's value as gjson reads it: a copy, so that the line's
// buffer is not kept.
func (r *reply) value(s span) gjson.Result {
	if !s.ok() {
		return gjson.Result{}
	}
	return gjson.Parse(string(r.line[s.start:s.end]))
}

// shapeDepth bounds the levels that carry a shape frame: every shape's
// fields lie within.
const shapeDepth = 8

// scanner is scanReply's state. One bit per level says whether it is an
// object or an array; the shape check keeps a frame for the levels shapes
// reach.
type scanner struct {
	line    []byte
	cmd     string
	sh      shape
	checked bool // cmd has a shape
	r       reply

	depth   int // containers open
	objects [MaxDepth / 64]uint64
	members [MaxDepth]uint32 // per open container
	frames  [shapeDepth]frame

	keySpan span // the last key read
	keyEsc  bool // it has escapes
	slot    byte // the top-level member being read: 'r', 'e', 'v' as reply.first, 0 another

	bad struct { // the first value of the wrong shape, until it ends
		depth int // the depth it lives at; 0: none
		start int
		msg   func(raw string) string
	}
}

// frame is what the shape check knows of an open container.
type frame struct {
	tree    *fieldTree // an object whose fields are checked against tree
	entries *fieldTree // the return array: each entry an object checked against entries
	entry   int        // the entry it belongs to
}

// scanReply reads line in one pass, without recursion and without
// allocating per byte: JSON as gjson.Valid accepts it (RFC 8259 without a
// UTF-8 check), nested at most MaxDepth deep with at most MaxMembers per
// container and, when cmd has a shape, a "return" value of that shape
// (reply.shape). It indexes the top-level members on the way. A line that
// is not JSON is errMalformed; a bound exceeded is ErrHostileReply, at once.
func scanReply(line []byte, cmd string) (reply, error) {
	s := scanner{line: line, cmd: cmd}
	s.sh, s.checked = shapes[cmd]
	s.r.line = line
	err := s.run()
	return s.r, err
}

// What the scanner expects next.
type expect uint8

const (
	wantValue     expect = iota // a value
	wantFirstElem               // a value or ']', after '['
	wantFirstKey                // a key or '}', after '{'
	wantKey                     // a key, after ',' in an object
	wantColon
	wantNext // ',' or the container's end
	wantEnd  // nothing but space
)

func (s *scanner) isObject(level int) bool { return s.objects[level/64]&(1<<(level%64)) != 0 }

func (s *scanner) run() error {
	line := s.line
	state := wantValue
	for i := 0; i < len(line); {
		c := line[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		switch state {
		case wantEnd:
			return errMalformed
		case wantColon:
			if c != ':' {
				return errMalformed
			}
			i++
			state = wantValue
			continue
		case wantNext:
			obj := s.isObject(s.depth - 1)
			switch {
			case c == ',' && obj:
				state = wantKey
			case c == ',':
				state = wantValue
			case c == '}' && obj, c == ']' && !obj:
				s.depth--
				state = s.ended(i + 1)
			default:
				return errMalformed
			}
			i++
			continue
		case wantFirstKey, wantKey:
			if c == '}' && state == wantFirstKey {
				s.depth--
				i++
				state = s.ended(i)
				continue
			}
			if c != '"' {
				return errMalformed
			}
			end, esc, ok := scanString(line, i+1)
			if !ok {
				return errMalformed
			}
			s.keySpan, s.keyEsc = span{i, end}, esc
			i = end
			state = wantColon
			continue
		case wantFirstElem:
			if c == ']' {
				s.depth--
				i++
				state = s.ended(i)
				continue
			}
		}
		// A value starts at i.
		if err := s.begin(c, i); err != nil {
			return err
		}
		switch c {
		case '{', '[':
			if s.depth == MaxDepth {
				return fmt.Errorf("%w: nested deeper than %d levels", ErrHostileReply, MaxDepth)
			}
			bit := uint64(1) << (s.depth % 64)
			if c == '{' {
				s.objects[s.depth/64] |= bit
				state = wantFirstKey
			} else {
				s.objects[s.depth/64] &^= bit
				state = wantFirstElem
			}
			s.members[s.depth] = 0
			s.depth++
			i++
			continue
		case '"':
			end, _, ok := scanString(line, i+1)
			if !ok {
				return errMalformed
			}
			i = end
		case 't':
			if !literal(line[i:], "true") {
				return errMalformed
			}
			i += 4
		case 'f':
			if !literal(line[i:], "false") {
				return errMalformed
			}
			i += 5
		case 'n':
			if !literal(line[i:], "null") {
				return errMalformed
			}
			i += 4
		default:
			end, ok := scanNumber(line, i)
			if !ok {
				return errMalformed
			}
			i = end
		}
		state = s.ended(i)
	}
	if state != wantEnd {
		return errMalformed
	}
	return nil
}

// begin is called at the first byte of each value: it counts the value in
// its container, indexes the top level and checks the shape.
func (s *scanner) begin(c byte, at int) error {
	d := s.depth // the value lives at depth d, inside container d-1
	var push frame
	if d > 0 {
		s.members[d-1]++
		if s.members[d-1] > MaxMembers {
			return fmt.Errorf("%w: more than %d members in one object or array", ErrHostileReply, MaxMembers)
		}
	}
	checking := s.checked && s.bad.depth == 0 && s.r.shape == nil
	switch {
	case d == 1 && s.isObject(0):
		s.slot = 0
		cmd := s.cmd
		switch string(s.key()) {
		case "return":
			if s.r.ret.start == 0 {
				s.slot = 'r'
				s.first('r')
				if checking {
					if valueType(c) != s.sh.ret || s.sh.array != (c == '[') {
						want := "an object"
						if s.sh.array {
							want = "an array"
						}
						s.fail(d, at, func(raw string) string {
							return fmt.Sprintf("QMP %s: the reply is %s, not %s", cmd, units.Clip(raw, 40), want)
						})
					} else if s.sh.array {
						push.entries = trees[s.cmd]
					}
				}
			}
		case "error":
			if s.r.err.start == 0 {
				s.slot = 'e'
				s.first('e')
			}
		case "event":
			if s.r.event.start == 0 {
				s.slot = 'v'
				s.first('v')
			}
		}
		if sp := s.r.span(s.slot); sp != nil {
			sp.start = at
		}
	case checking && d >= 2 && d <= shapeDepth:
		f, cmd := &s.frames[d-1], s.cmd
		switch {
		case f.entries != nil:
			entry := int(s.members[d-1]) - 1
			if c != '{' {
				s.fail(d, at, func(raw string) string {
					return fmt.Sprintf("QMP %s: entry %d is %s, not an object", cmd, entry, units.Clip(raw, 40))
				})
			} else {
				push = frame{tree: f.entries, entry: entry}
			}
		case f.tree != nil:
			ch := f.tree.sub[string(s.key())]
			if ch == nil {
				break
			}
			if typ := valueType(c); ch.leaf && !sameType(typ, ch.typ) {
				entry := f.entry
				s.fail(d, at, func(raw string) string {
					return fmt.Sprintf("QMP %s: entry %d's %s is %s, not %s", cmd, entry, ch.path, units.Clip(raw, 40), typeName(ch.typ))
				})
			} else if len(ch.sub) > 0 && c == '{' {
				push = frame{tree: ch, entry: f.entry}
			}
		}
	}
	if (c == '{' || c == '[') && d < shapeDepth {
		s.frames[d] = push
	}
	return nil
}

func (s *scanner) first(k byte) {
	if s.r.first == 0 {
		s.r.first = k
	}
}

// fail records the first value of the wrong shape; its message is made
// when the value ends (it quotes the value).
func (s *scanner) fail(depth, at int, msg func(raw string) string) {
	s.bad.depth, s.bad.start = depth, at
	s.bad.msg = msg
}

// ended is called when a value that began at the current depth has ended
// at end; it returns the state that follows.
func (s *scanner) ended(end int) expect {
	d := s.depth
	if s.bad.depth == d && s.bad.msg != nil {
		s.r.shape = &ShapeError{s.cmd, s.bad.msg(string(s.line[s.bad.start:end]))}
		s.bad.depth, s.bad.msg = 0, nil
	}
	if sp := s.r.span(s.slot); d == 1 && sp != nil {
		sp.end = end
		s.slot = 0
	}
	if d == 0 {
		return wantEnd
	}
	return wantNext
}

// key is the last key read, unescaped when it has escapes; without them
// it is the line's own bytes (a switch or map index on string(key) does not
// allocate).
func (s *scanner) key() []byte {
	if s.keyEsc {
		return []byte(gjson.Parse(string(s.line[s.keySpan.start:s.keySpan.end])).Str)
	}
	return s.line[s.keySpan.start+1 : s.keySpan.end-1]
}

// valueType is the gjson type of the value starting with c (true for both
// booleans: sameType compares booleans so).
func valueType(c byte) gjson.Type {
	switch c {
	case '{', '[':
		return gjson.JSON
	case '"':
		return gjson.String
	case 't':
		return gjson.True
	case 'f':
		return gjson.False
	case 'n':
		return gjson.Null
	}
	return gjson.Number
}

func literal(b []byte, word string) bool {
	return len(b) >= len(word) && string(b[:len(word)]) == word
}

// scanString reads a string whose opening quote is before i: it returns
// the index after the closing quote and whether it had escapes.
func scanString(b []byte, i int) (end int, esc, ok bool) {
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, true
		case c < ' ':
			return i, esc, false
		case c == '\\':
			esc = true
			i++
			if i == len(b) {
				return i, esc, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, esc, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, esc, false
					}
				}
				i += 4
			default:
				return i, esc, false
			}
		}
	}
	return i, esc, false
}

// scanNumber reads a JSON number starting at i and returns the index after
// it.
func scanNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i == len(b):
		return i, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}
