package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// QMPError says what went wrong talking to VM vmid's QEMU, as an exit 3
// error (the socket busy, missing, or QEMU answering wrong).
func QMPError(vmid int, err error) error {
	switch {
	case errors.Is(err, qmp.ErrBusy):
		return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d", vmid), err)
	case errors.Is(err, qmp.ErrNoSocket):
		return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d", vmid), fmt.Errorf("%w (is the VM running?)", err))
	}
	return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: QMP", vmid), err)
}

// SocketGone explains err, from an exchange with the VM's QEMU, when the
// process is alive (Alive) and yet dialling its QMP socket found nobody
// (qmp.ErrNoSocket): the socket is missing, is not a socket, or nothing
// listens on it. It is not a copied tree then, but a QEMU that cannot be
// asked. Any other err is returned as it is.
func (v *VM) SocketGone(err error) error {
	if !v.Alive || !errors.Is(err, qmp.ErrNoSocket) {
		return err
	}
	path := v.QMPSocket()
	state := "refuses connections (nothing listens on it)"
	switch fi, serr := os.Stat(path); {
	case errors.Is(serr, os.ErrNotExist):
		state = "is missing"
	case serr != nil:
		state = "cannot be read (" + serr.Error() + ")"
	case fi.Mode()&os.ModeSocket == 0:
		state = "is not a socket (" + fileKind(fi.Mode()) + ")"
	}
	return fmt.Errorf("QEMU (pid %d) runs, but its QMP socket %s %s: %w", v.Pid, path, state, err)
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	}
	return m.Type().String()
}

// WhyGone says why the VM's QEMU stopped answering mid-window, for the line
// that reports a cut window: the process exited (gone from procfs, or a
// zombie not yet reaped), or what its socket said (err).
func (v *VM) WhyGone(err error) string {
	if v.Pid > 0 && exited(filepath.Join(v.paths.ProcPid(v.Pid), "stat")) {
		return fmt.Sprintf("QEMU (pid %d) exited", v.Pid)
	}
	return err.Error()
}

// exited reads a /proc/<pid>/stat: absent, or in state Z or X.
func exited(stat string) bool {
	b, err := os.ReadFile(stat)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}
