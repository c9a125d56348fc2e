// Package fakerun is the fake node.Runner of the unit tests: a node.Node
// whose Runner is a *Runner answers lvs, zfs, qm, pvesm ... from recorded
// outputs (the testdata files of real runs), and records what was run,
// instead of programs put on PATH.
package fakerun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Runner answers each command from Out and Err, keyed by a pattern: the
// program, then words of the command line in their order, not necessarily
// adjacent ("lvs", "zfs get rpool/data", "qm showcmd"). The matching
// pattern with the most words wins. A command no pattern matches fails as
// node.Exec fails for a program that is not on PATH: a node without that
// tool.
type Runner struct {
	// Out is what a command prints on its standard output.
	Out map[string]string
	// Err is the error a command returns; with an Out as well, it printed
	// that and then failed (lvs printing a partial report, exit 5).
	Err map[string]error
	// Do answers a command with a double that acts on the node as the
	// program would (qm set rewriting the config), given the argv; it
	// wins over Out and Err with as many words.
	Do map[string]func(argv []string) ([]byte, error)

	mu    sync.Mutex
	calls []Call
}

// Call is one command run.
type Call struct {
	Argv []string
	// Timeout is RunTimeout's deadline; 0 for Run (the runner's own).
	Timeout time.Duration
}

// Node is n with r as its runner.
func (r *Runner) Node(n node.Node) node.Node {
	n.Runner = r
	return n
}

// Record sets pattern's output to the content of file, a recorded output
// (the test fails when it cannot be read), and returns r.
func (r *Runner) Record(t testing.TB, pattern, file string) *Runner {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Out == nil {
		r.Out = map[string]string{}
	}
	r.Out[pattern] = string(b)
	return r
}

// Run answers argv.
func (r *Runner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return r.RunTimeout(ctx, 0, argv...)
}

// RunTimeout answers argv and records the deadline it was given.
func (r *Runner) RunTimeout(_ context.Context, timeout time.Duration, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("runner: empty command")
	}
	r.mu.Lock()
	r.calls = append(r.calls, Call{Argv: append([]string(nil), argv...), Timeout: timeout})
	outKey, haveOut := match(r.Out, argv)
	errKey, haveErr := match(r.Err, argv)
	if doKey, ok := match(r.Do, argv); ok && (!haveOut || words(doKey) >= words(outKey)) && (!haveErr || words(doKey) >= words(errKey)) {
		do := r.Do[doKey]
		r.mu.Unlock()
		return do(append([]string(nil), argv...))
	}
	defer r.mu.Unlock()
	switch {
	case haveErr && (!haveOut || words(errKey) >= words(outKey)):
		var out []byte
		if haveOut && outKey == errKey {
			out = []byte(r.Out[outKey])
		}
		return out, r.Err[errKey]
	case haveOut:
		return []byte(r.Out[outKey]), nil
	}
	return nil, fmt.Errorf("%s: %w", argv[0], &exec.Error{Name: argv[0], Err: exec.ErrNotFound})
}

func words(pattern string) int { return len(strings.Fields(pattern)) }

// match is the pattern of m with the most words that argv matches.
func match[V any](m map[string]V, argv []string) (string, bool) {
	best, found := "", false
	for k := range m {
		w := strings.Fields(k)
		if !matches(w, argv) {
			continue
		}
		if n := words(best); !found || len(w) > n || len(w) == n && k < best {
			best, found = k, true
		}
	}
	return best, found
}

// matches: argv runs program w[0] and has the other words in order.
func matches(w, argv []string) bool {
	if len(w) == 0 || w[0] != argv[0] {
		return false
	}
	i := 1
	for _, a := range argv[1:] {
		if i < len(w) && a == w[i] {
			i++
		}
	}
	return i == len(w)
}

// Calls are the commands run so far, in order, each as its words joined by
// spaces.
func (r *Runner) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = strings.Join(c.Argv, " ")
	}
	return out
}

// Recorded are the commands run so far with their deadlines.
func (r *Runner) Recorded() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Count is how many commands run so far match pattern.
func (r *Runner) Count(pattern string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if matches(strings.Fields(pattern), c.Argv) {
			n++
		}
	}
	return n
}

// Zvols answers storage/zfs's one call (zfs get -Hp -o name,property,value
// PROPS DATASET...) as zfs does, from the recorded lines of the zvol named
// from (sync standard): each dataset's lines in the order asked, under its
// own name, with its sync from sync (not named: standard; "gone": zfs fails
// as for a dataset that does not exist).
func Zvols(recorded, from string, sync map[string]string) func([]string) ([]byte, error) {
	return func(argv []string) ([]byte, error) {
		var out strings.Builder
		for _, ds := range argv[6:] {
			s := sync[ds]
			switch s {
			case "":
				s = "standard"
			case "gone":
				return nil, fmt.Errorf("exit status 1: cannot open '%s': dataset does not exist", ds)
			}
			out.WriteString(strings.ReplaceAll(strings.ReplaceAll(recorded, from, ds), "\tstandard", "\t"+s))
		}
		return []byte(out.String()), nil
	}
}
