//go:build integration

package fakenode

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// TestQueuesRefusalRealQEMU: check's queues-invalid rests on
// qemuserver.QueuesRefusal; the QEMU under test must start a virtio-scsi
// controller with exactly the num_queues it says start, and refuse the
// others with exactly its message. Started means QEMU answered a QMP
// command, which its main loop does only after -device is realized;
// refused means it exited before that, its reason on stderr.
func TestQueuesRefusalRealQEMU(t *testing.T) {
	qemu := QEMUBinary()
	for _, q := range []string{"2", "1022", "1023", "4096", "4294967294", "4294967295", "4294967296", "18446744073709551615", "99999999999999999999"} {
		t.Run(q, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, qemu, "-nodefaults", "-display", "none", "-machine", "pc", "-S",
				"-device", "virtio-scsi-pci,num_queues="+q, "-qmp", "stdio")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The greeting may come before -device is realized; the answer
			// to a command only from the main loop, after it.
			r := bufio.NewReader(stdout)
			r.ReadString('\n')
			stdin.Write([]byte(`{"execute":"qmp_capabilities"}` + "\n"))
			line, _ := r.ReadString('\n')
			started := strings.Contains(line, `"return"`)
			cmd.Process.Kill()
			cmd.Wait()
			want := qemuserver.QueuesRefusal(q)
			switch {
			case started && want != "":
				t.Errorf("QEMU started with num_queues=%s; QueuesRefusal says %q", q, want)
			case !started && want == "":
				t.Errorf("QEMU refused num_queues=%s (%s); QueuesRefusal says it starts", q, strings.TrimSpace(stderr.String()))
			case !started && !strings.Contains(stderr.String(), want):
				t.Errorf("QEMU refused num_queues=%s with %q, QueuesRefusal says %q", q, strings.TrimSpace(stderr.String()), want)
			}
		})
	}
}
