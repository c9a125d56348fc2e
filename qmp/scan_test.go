package qmp

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// recordedLines is every recorded reply line (qmp/testdata and the top
// fixtures beside them).
func recordedLines(t testing.TB) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "qemu-*", "*", "*.json"))
	more, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	out := map[string][]byte{}
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	if len(out) < 40 {
		t.Fatalf("only %d recorded replies", len(out))
	}
	return out
}

// reference is what the validation before scanReply made of a line: gjson's
// verdict, the first of event/error/return as runLocked's walk found it,
// the values gjson's Get finds, and the shape walk's error.
func reference(line []byte, cmd string) (valid bool, first byte, ret, qerr, event string, shape error) {
	if !gjson.ValidBytes(line) {
		return false, 0, "", "", "", nil
	}
	gjson.ParseBytes(line).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "event":
			first = 'v'
		case "error":
			first = 'e'
		case "return":
			first = 'r'
		default:
			return true
		}
		return false
	})
	r := gjson.GetBytes(line, "return")
	if r.Exists() {
		shape = refCheckShape(cmd, r)
	}
	return true, first, r.Raw, gjson.GetBytes(line, "error").Raw, gjson.GetBytes(line, "event").Raw, shape
}

// compare fails t where scanReply and the reference disagree on line.
func compare(t *testing.T, name string, line []byte, cmd string) {
	t.Helper()
	valid, first, ret, qerr, event, shape := reference(line, cmd)
	r, err := scanReply(line, cmd)
	if (err == nil) != valid {
		t.Fatalf("%s as %s: scan err %v, gjson.Valid %v", name, cmd, err, valid)
	}
	if !valid {
		return
	}
	if top := gjson.ParseBytes(line); !top.IsObject() {
		first, ret, qerr, event = 0, "", "", "" // gjson's Get reads into arrays; replies are objects
	}
	got := func(s span) string {
		if !s.ok() {
			return ""
		}
		return string(line[s.start:s.end])
	}
	if r.first != first || got(r.ret) != ret || got(r.err) != qerr || got(r.event) != event {
		t.Errorf("%s as %s: first %q ret %.60q err %.60q event %.60q, want %q %.60q %.60q %.60q",
			name, cmd, r.first, got(r.ret), got(r.err), got(r.event), first, ret, qerr, event)
	}
	if r.first == 'r' && (r.shape == nil) != (shape == nil) || r.shape != nil && shape != nil && r.shape.Error() != shape.Error() {
		t.Errorf("%s as %s: shape %v, want %v", name, cmd, r.shape, shape)
	}
}

// The one scan says what gjson's validation and the shape walk said, for
// every recorded reply read as the reply to every command that has a shape
// (so the real replies exercise the shape errors too), and for lines made
// to hit each rule.
func TestScanMatchesReference(t *testing.T) {
	cmds := []string{""}
	for c := range shapes {
		cmds = append(cmds, c)
	}
	sort.Strings(cmds)
	lines := recordedLines(t)
	shapeErrors := 0
	for p, b := range lines {
		for _, c := range cmds {
			compare(t, p, b, c)
			if r, _ := scanReply(b, c); r.shape != nil {
				shapeErrors++
			}
		}
	}
	if shapeErrors < 100 {
		t.Errorf("only %d shape errors from the recorded replies read as other commands'", shapeErrors)
	}
	for _, l := range []string{
		`{"return": {}}`, `{"return": []}`, ` {"return": 1} `, "{\"return\": 1}\r\n",
		`{"event": "RESUME", "return": 1}`, `{"a": {"return": 1}, "error": {"class": "X", "desc": "y"}}`,
		`{"return": 1, "return": 2}`, `{"\u0072eturn": [7]}`, `{"return": [{"qd\u0065v": 5}]}`,
		`[1, 2]`, `"return"`, `42`, `null`, `true`, `{}`, `[]`,
		`{"return": [{"qdev": "a", "inserted": {"cache": {"direct": "yes"}}}]}`,
		`{"return": [{"qdev": "a", "inserted": []}]}`, `{"return": [{"qdev": "a", "inserted": 3}]}`,
		`{"return": [{"stats": {"wr_bytes": 1}}, {"stats": {"wr_bytes": "1"}}]}`,
		`{"return": [{}, 7]}`, `{"return": [{}, [{"qdev": 1}]]}`, `{"return": {"a": [{"qdev": 1}]}}`,
		`{"return": [{"qdev": "x", "qdev": 1}]}`, `{"return": [{"ro": false, "ro": null}]}`,
		`{"return": [{"x": {"qdev": 1}, "qdev": 2}]}`,
		`{"return": -0.5e+10}`, `{"return": 1.}`, `{"return": 01}`, `{"return": -}`, `{"return": 1e}`, `{"return": .5}`,
		`{"return": "\u00e9\n\"\\\/\b\f\r\t"}`, `{"return": "\x"}`, `{"return": "\u12"}`, "{\"return\": \"a\x01\"}",
		`{"return": tru}`, `{"return": nul}`, `{"return": falsey}`, `{"return": [1,]}`, `{"return": [,1]}`,
		`{"return": {"a" 1}}`, `{"return": {"a": 1,}}`, `{"return": {1: 1}}`, `{"return": 1} {}`, `{"return": 1}}`,
		`{"return": [1}`, `{"return": {"a": 1]}`, `{"return"`, `{`, `[`, ``, ` `, `"`, `{"a":}`, `{"a"}`,
		"{\"return\": \"\xff\xfe\"}",
	} {
		for _, c := range cmds {
			compare(t, l, []byte(l), c)
		}
	}
}

// The bounds: exactly MaxDepth levels and MaxMembers members pass, one more
// is refused, wherever it is; the refusal comes at the first byte past the
// bound, without reading the rest.
func TestScanBounds(t *testing.T) {
	nest := func(open, close string, levels int) string {
		return strings.Repeat(open, levels) + strings.Repeat(close, levels)
	}
	members := func(n int, item string) string {
		return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
	}
	for _, c := range []struct {
		name, line string
		refused    bool
	}{
		{"arrays at the limit", nest("[", "]", MaxDepth), false},
		{"arrays past it", nest("[", "]", MaxDepth+1), true},
		{"objects at the limit", `{"return": ` + strings.Repeat(`{"a": `, MaxDepth-1) + "1" + strings.Repeat("}", MaxDepth), false},
		{"objects past it", `{"return": ` + strings.Repeat(`{"a": `, MaxDepth) + "1" + strings.Repeat("}", MaxDepth+1), true},
		{"inside a return of its shape", `{"return": [{"stats": ` + nest("[", "]", MaxDepth-3) + `}]}`, false},
		{"inside a return of its shape, past", `{"return": [{"stats": ` + nest("[", "]", MaxDepth-2) + `}]}`, true},
		{"an array of MaxMembers", `{"return": [` + members(MaxMembers, "{}") + `]}`, false},
		{"an array of one more", `{"return": [` + members(MaxMembers+1, "{}") + `]}`, true},
		{"an object of MaxMembers", `{"return": {` + members(MaxMembers, `"a": 1`) + `}}`, false},
		{"an object of one more", `{"return": {` + members(MaxMembers+1, `"a": 1`) + `}}`, true},
		{"a top level of one more", `{` + members(MaxMembers+1, `"a": 1`) + `}`, true},
	} {
		r, err := scanReply([]byte(c.line), "query-blockstats")
		if got := errors.Is(err, ErrHostileReply); got != c.refused {
			t.Errorf("%s: err %v, want refused %v", c.name, err, c.refused)
		}
		if !c.refused && (err != nil || r.first != 'r' && strings.HasPrefix(c.line, "{")) {
			t.Errorf("%s: err %v, first %q", c.name, err, r.first)
		}
	}
	// Refused at once: what follows the bound is never read (here it is
	// not even JSON).
	deep := []byte(strings.Repeat("[", MaxDepth+1) + "this is not JSON")
	if _, err := scanReply(deep, ""); !errors.Is(err, ErrHostileReply) || !strings.Contains(err.Error(), "nested deeper than 1024 levels") {
		t.Errorf("err %v", err)
	}
}

// The scan of a normal reply allocates nothing (the return value's copy is
// made after it), and a hostile one no more than its error, whatever its
// size.
func TestScanAllocations(t *testing.T) {
	stats := recordedLines(t)[filepath.Join("testdata", "qemu-7.2.22", "blockdev", "query-blockstats.json")]
	allocs := func(line []byte, cmd string) float64 {
		return testing.AllocsPerRun(5, func() { _, _ = scanReply(line, cmd) })
	}
	if n := allocs(stats, "query-blockstats"); n != 0 {
		t.Errorf("query-blockstats: %.0f allocations per scan", n)
	}
	small := allocs([]byte(strings.Repeat("[", MaxDepth+1)), "query-block")
	if n := allocs([]byte(strings.Repeat("[", 24<<20)), "query-block"); n != small || n > 3 {
		t.Errorf("24 MiB of [: %.0f allocations per scan, %.0f for %d bytes", n, small, MaxDepth+1)
	}
}

// BenchmarkReply: the one scan against what it replaced (gjson.Valid, the
// walk over the top-level keys, the Get of "return" and the shape walk) on
// the largest recorded reply top reads every second.
func BenchmarkReply(b *testing.B) {
	line := recordedLines(b)[filepath.Join("testdata", "qemu-7.2.22", "blockdev", "query-blockstats.json")]
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for i := 0; i < b.N; i++ {
			r, err := scanReply(line, "query-blockstats")
			if err != nil || r.shape != nil {
				b.Fatal(err, r.shape)
			}
			_ = r.value(r.ret)
		}
	})
	b.Run("validate-then-walk", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for i := 0; i < b.N; i++ {
			valid, first, _, _, _, shape := reference(line, "query-blockstats")
			if !valid || first != 'r' || shape != nil {
				b.Fatal(valid, first, shape)
			}
		}
	})
}

// deepSeeds are the hostile shapes of issue 21, small enough for a seed
// corpus: past the nesting bound as arrays, as objects and inside a return
// of the right shape, and just inside it.
func deepSeeds() [][]byte {
	var out [][]byte
	for _, levels := range []int{MaxDepth, MaxDepth + 1, 4 * MaxDepth} {
		out = append(out,
			[]byte(strings.Repeat("[", levels)),
			[]byte(strings.Repeat("[", levels)+strings.Repeat("]", levels)),
			[]byte(`{"return": `+strings.Repeat(`{"a": `, levels)+"1"+strings.Repeat("}", levels+1)),
			[]byte(`{"return": [{"qdev": "scsi0", "inserted": `+strings.Repeat("[", levels)+strings.Repeat("]", levels)+`}]}`),
			[]byte("\xff"+strings.Repeat(`{"return": `, levels)+"\n"))
	}
	return out
}

// FuzzScanReply: for any line the scan agrees with gjson's validation, the
// top-level walk and the shape walk it replaced (TestScanMatchesReference),
// unless it refused the line, which only a bound exceeded may cause.
func FuzzScanReply(f *testing.F) {
	for _, b := range recordedLines(f) {
		f.Add(b, "query-blockstats")
	}
	for _, b := range deepSeeds() {
		f.Add(b, "query-block")
	}
	f.Add([]byte(`{"return": [{"qdev": "a", "inserted": {"cache": {"direct": "yes"}}}]}`), "query-block")
	f.Add([]byte(`{"event": "RESUME", "return": 1}`), "query-status")
	f.Fuzz(func(t *testing.T, line []byte, cmd string) {
		_, err := scanReply(line, cmd)
		if errors.Is(err, ErrHostileReply) {
			// A container of more than MaxMembers takes two bytes a member.
			if d := nesting(line); d <= MaxDepth && len(line) <= 2*MaxMembers {
				t.Fatalf("refused at depth %d, %d bytes: %v", d, len(line), err)
			}
			return
		}
		compare(t, "fuzz", line, cmd)
	})
}

// nesting is the deepest nesting in line, strings skipped, whether or not
// the line is JSON.
func nesting(line []byte) (deepest int) {
	depth, inString, esc := 0, false, false
	for _, c := range line {
		switch {
		case esc:
			esc = false
		case inString && c == '\\':
			esc = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
