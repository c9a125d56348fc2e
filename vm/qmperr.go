package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// QMPError says what went wrong talking to VM vmid's QEMU, as an exit 3
// error (the socket busy, missing, or QEMU answering wrong), naming QMP
// once: "VM 370: QMP /run/qemu-server/370.qmp: ...", not "VM 370: QMP: QMP
// /run/...".
func QMPError(vmid int, err error) error {
	if errors.Is(err, qmp.ErrNoSocket) {
		err = fmt.Errorf("%w (is the VM running?)", err)
	}
	return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d", vmid), qmpNamed(err))
}

// QMPNote is err as a note's text, naming QMP once, as QMPError does.
func QMPNote(err error) string { return qmpNamed(err).Error() }

// qmpNamed is err, said to come from QMP when it does not say so itself.
// qmp's own errors do ("QMP <socket>: ...", "QMP socket busy ...", "QMP
// query-block: ...", "no QMP socket at ..."); QEMU's error replies
// (*qmp.Error), a context's end and what a caller found wrong in a reply do
// not.
func qmpNamed(err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, "QMP") || errors.Is(err, qmp.ErrNoSocket) {
		return err
	}
	return exitcode.Wrap(exitcode.Unreachable, "QMP", err)
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
