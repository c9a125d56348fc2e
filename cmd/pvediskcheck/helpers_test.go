package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// runCLI runs the command in-process and returns stdout, stderr and the exit code.
func runCLI(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"pvediskcheck"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// runJSON runs a command with --json against the node and decodes stdout.
func runJSON(t testing.TB, n *fakenode.Node, v any, args ...string) (string, int) {
	t.Helper()
	out, errs, code := runCLI(t, append([]string{"--root", n.Root, "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("pvediskcheck %s: exit %d, stdout is not JSON: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, err, out, errs)
	}
	return errs, code
}

// lab370 is Lab 37's VM 370: a system disk plus scsi1 (VirtIO SCSI single,
// iothread), virtio1 (VirtIO Block, iothread) and sata1, on local-lvm.
func lab370(t testing.TB, n *fakenode.Node, extra string) {
	t.Helper()
	if err := n.CreateLab370(extra); err != nil {
		t.Fatal(err)
	}
}

func qemuName(t testing.TB) string {
	v, err := fakenode.QEMUVersion(fakenode.QEMUBinary())
	if err != nil {
		t.Fatalf("QEMU version: %v", err)
	}
	return "qemu-" + v
}

func sf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// sha1hex is qemu-server's config digest: sha1_hex of the file's bytes.
func sha1hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// gjsonFloat reads a number from a JSON document that may have non-JSON
// lines before it (fio prints notes first).
func gjsonFloat(doc, path string) float64 {
	if i := strings.Index(doc, "{"); i > 0 {
		doc = doc[i:]
	}
	return gjson.Get(doc, path).Float()
}

// Exit codes as the tests compare them.
const (
	exitOK          = int(exitcode.OK)
	exitProblem     = int(exitcode.Problem)
	exitUsage       = int(exitcode.Usage)
	exitUnreachable = int(exitcode.Unreachable)
)
