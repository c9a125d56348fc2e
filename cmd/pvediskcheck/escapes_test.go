package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/top"
)

// hostile is what the campaign put in names (issue 31): a window title
// (OSC), a screen clear, a colour, a bell, a C1 CSI and DEL.
const hostile = "x\x1b]0;pwned\x07\x1b[2J\x1b[31m\u009b1m\x7f"

// hostileShown is hostile as text output prints it.
const hostileShown = `x\x1b]0;pwned\a\x1b[2J\x1b[31m\u009b1m\x7f`

// controls reports a character a terminal acts on (newlines aside).
func controls(s string) bool {
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return true
		}
	}
	return false
}

// top's text, from a VM named by its config, the guest agent's device and
// mount point, a storage name and a finding quoting them: every one
// printed escaped, the columns still aligned; a colour the tool paints
// reaches the terminal as a colour.
func TestEscapesTop(t *testing.T) {
	dev, ms := "/dev/sd"+hostile, 12.5
	s := top.Sample{Time: time.Unix(0, 0), IntervalS: 1,
		Disks:    []top.Disk{{VMID: 100, Name: hostile, Disk: "scsi0", Storage: "st" + hostile, GuestDevice: &dev, GuestMounts: []string{"/mnt/" + hostile}, ReadLatencyMs: ms}},
		VMs:      []top.VM{{VMID: 100, Name: hostile, Status: top.OK}},
		Findings: []top.Finding{{Code: "disk-busy", Message: "VM 100 (" + hostile + ") is busy"}}}
	var b bytes.Buffer
	e := &env{out: newTextOut(&b), color: true}
	b.WriteString(strings.Join(topLines(e, s, top.SortBusy, 0), "\n"))
	raw := b.String()
	b.Reset()
	e.out.Write([]byte(strings.Join(topLines(e, s, top.SortBusy, 0), "\n") + "\n"))
	out := b.String()
	if !controls(raw) {
		t.Fatal("the sample holds no control character: the test tests nothing")
	}
	if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(out, yellow, ""), reset, ""), "\x1b") || controls(strings.NewReplacer(yellow, "", reset, "").Replace(out)) {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	for _, want := range []string{hostileShown, "/dev/sd" + hostileShown + " /mnt/" + hostileShown, "st" + hostileShown, "VM 100 (" + hostileShown + ") is busy", yellow + "disk-busy" + reset} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// The header and the row line up: the escaped name is measured.
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || strings.Index(lines[1], "DISK") != strings.Index(lines[2], "scsi0") {
		t.Errorf("columns shifted:\n%s\n%s", lines[1], lines[2])
	}
}

// fio summary and fio compare name fio's jobs as the job file named them:
// a job named with escapes is printed escaped (its JSON keeps it).
func TestEscapesFioJobNames(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"io_uring-rr4k-1.json", "io_uring-rr4k-2.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "fio", "testdata", "real", "lab19", f))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(`"jobname" : "rr4k"`), []byte(`"jobname" : "rr4k\u001b]0;pwned\u0007\u001b[2J"`))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, code := runCLI(t, "fio", "summary", dir)
	if code != 0 || controls(out+errs) || !strings.Contains(out, `rr4k\x1b]0;pwned\a\x1b[2J`) {
		t.Errorf("fio summary: exit %d\n%q\n%s", code, out, errs)
	}
	out, _, _ = runCLI(t, "--json", "fio", "summary", dir)
	if !strings.Contains(out, `rr4k\u001b]0;pwned\u0007\u001b[2J`) {
		t.Errorf("fio summary --json lost the name:\n%.2000s", out)
	}
}

// A forwarded command prints what the VM's node printed: a node whose
// output holds escapes (a hostile or broken node, a login script) is
// printed escaped; JSON is read as JSON.
func TestEscapesRemoteStdout(t *testing.T) {
	fc := newFakeCluster(t)
	t.Setenv(hostEnv("127.0.0.2"), "!hostile-stdout")
	out, errs, code := fc.run(t, "cache", "380")
	if controls(out+errs) || !strings.Contains(out, "VM 380: "+hostileShown+"\n") || code != exitOK {
		t.Errorf("exit %d\n%q\n%q", code, out, errs)
	}
}
