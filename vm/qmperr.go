package vm

import (
	"errors"
	"fmt"
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
