package exitcode

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	sentinel := New(Usage, "bad VMID")
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, OK},
		{"problem", Problemf("flushes ignored on %s", "scsi1"), Problem},
		{"usage", Usagef("bad %s", "x"), Usage},
		{"unreachable", Unreachablef("socket busy"), Unreachable},
		{"silent problem", ErrProblem, Problem},
		{"plain error is unreachable", errors.New("boom"), Unreachable},
		{"context canceled is unreachable", context.Canceled, Unreachable},
		{"wrapped by fmt keeps the code", fmt.Errorf("vm 370: %w", sentinel), Usage},
		{"outermost code wins", Wrap(Unreachable, "qmp", Usagef("inner")), Unreachable},
		{"wrap of plain error gets the code", Wrap(Problem, "", errors.New("x")), Problem},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestWrapNil(t *testing.T) {
	if err := Wrap(Usage, "msg", nil); err != nil {
		t.Fatalf("Wrap(nil) = %v, want nil", err)
	}
}

func TestErrorText(t *testing.T) {
	inner := errors.New("connection refused")
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Code: Unreachable, Msg: "QMP /run/qemu-server/370.qmp", Err: inner}, "QMP /run/qemu-server/370.qmp: connection refused"},
		{&Error{Code: Usage, Msg: "bad input"}, "bad input"},
		{&Error{Code: Unreachable, Err: inner}, "connection refused"},
		{&Error{Code: Problem}, ""},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	if Message(nil) != "" || Message(ErrProblem) != "" {
		t.Error("Message of nil or ErrProblem must be empty (nothing printed)")
	}
	if got := Message(Usagef("x %d", 1)); got != "x 1" {
		t.Errorf("Message = %q", got)
	}
}

func TestUnwrap(t *testing.T) {
	inner := errors.New("inner")
	err := Wrap(Unreachable, "outer", inner)
	if !errors.Is(err, inner) {
		t.Error("errors.Is through Wrap failed")
	}
	sentinel := New(Unreachable, "busy")
	if !errors.Is(fmt.Errorf("a: %w", sentinel), sentinel) {
		t.Error("errors.Is on a sentinel failed")
	}
	var c Coder
	if !errors.As(fmt.Errorf("a: %w", Problemf("p")), &c) || c.ExitCode() != Problem {
		t.Error("errors.As to Coder failed")
	}
}
