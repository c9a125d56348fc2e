//go:build integration

package fio

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	ambiguousRe = regexp.MustCompile(`is ambiguous; possibilities:((?: '--[^']+')+)`)
	handledRe   = regexp.MustCompile(`handle_option=([^,\s]+)`)
)

// fioResolves asks the installed fio what its command line makes of
// --key=1 (engine set first): the option's name, or the names of an
// ambiguous prefix, or neither.
func fioResolves(t *testing.T, fio, key, engine string) (string, []string) {
	t.Helper()
	args := []string{"--parse-only", "--debug=parse", "--name=x", "--filename=/dev/null"}
	if engine != "" {
		args = append(args, "--ioengine="+engine)
	}
	b, _ := exec.Command(fio, append(args, "--"+key+"=1")...).CombinedOutput()
	if m := ambiguousRe.FindSubmatch(b); m != nil {
		var names []string
		for _, f := range strings.Fields(string(m[1])) {
			names = append(names, strings.Trim(f, "'-"))
		}
		return "", names
	}
	if strings.Contains(string(b), "unrecognized option '--"+key+"=") {
		return "", nil
	}
	// handle_option= and __handle_option= name each option parsed, in
	// order (an engine's defaults too, when --ioengine loads it): key's
	// is the last.
	name := ""
	for _, m := range handledRe.FindAllSubmatch(b, -1) {
		name = string(m[1])
	}
	return name, nil
}

// TestOptionTableMatchesFio asks the fio installed here (Debian's 3.33 on
// the test machines, make deps) what its command line makes of every name
// of the table and of prefixes of each: the same option, the same
// ambiguity, or nothing, as Resolve says. fio's own options are not run
// (--server, --daemonize and --trigger act); they show in the
// ambiguities.
func TestOptionTableMatchesFio(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs fio (make deps installs it): %v", err)
		}
		t.Skipf("fio not installed: %v", err)
	}
	if v, _ := exec.Command(fio, "--version").Output(); strings.TrimSpace(string(v)) != "fio-3.33" {
		t.Skipf("the table is fio 3.33's; this is %s", v)
	}
	type probe struct{ key, engine string }
	var probes []probe
	seen := map[probe]bool{}
	add := func(name, engine string) {
		for _, n := range []int{len(name), len(name) - 1} {
			if n < 1 || n > len(name) || seen[probe{name[:n], engine}] {
				continue
			}
			seen[probe{name[:n], engine}] = true
			probes = append(probes, probe{name[:n], engine})
		}
	}
	for _, n := range JobOptions() {
		add(n, "")
	}
	for _, opts := range profileOptions33 {
		for _, o := range opts {
			add(o.name, "")
		}
	}
	for e, opts := range engineOptions33 {
		for _, o := range opts {
			add(o.name, e)
		}
	}
	var checked atomic.Int32
	var wg sync.WaitGroup
	work := make(chan probe)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				engine := p.engine
				if engine == "" {
					engine = "psync" // fio's default on Linux: no engine options
				}
				r := Resolve(p.key, engine)
				if r.Option.Program {
					continue
				}
				name, amb := fioResolves(t, fio, p.key, p.engine)
				checked.Add(1)
				if name != r.Option.Name || !sameSet(amb, strings.Join(r.Ambiguous, " ")) {
					t.Errorf("--%s (engine %s): fio says %q %v, Resolve %+v", p.key, engine, name, amb, r)
				}
			}
		}()
	}
	for _, p := range probes {
		work <- p
	}
	close(work)
	wg.Wait()
	t.Logf("%d names and prefixes asked of %s", checked.Load(), fio)
	// Every option fio's help lists is in the table.
	out, err := exec.Command(fio, "--cmdhelp=all").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if n, _, ok := strings.Cut(l, ":"); ok {
			if n = strings.TrimSpace(n); n != "" && !Resolve(n, "psync").Exact {
				t.Errorf("fio --cmdhelp lists %s; the table has no such name", n)
			}
		}
	}
}
