package vm

import (
	"errors"
	"fmt"

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
