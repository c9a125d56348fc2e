// Package exitcode is the one exit-code contract of pvediskcheck: every error
// carries the code it ends the process with, from wherever it is raised, and
// Of maps an error to 0/1/2/3 in this one place.
//
//	0  ran and found nothing wrong
//	1  ran and found a problem (a failed check or verification)
//	2  bad input or usage
//	3  could not reach what it needs (VM not running, socket busy, timeout,
//	   permission)
package exitcode

import (
	"errors"
	"fmt"
)

// Code is a process exit status.
type Code int

// The four exit codes (docs/json.md, "Exit codes").
const (
	OK          Code = 0
	Problem     Code = 1
	Usage       Code = 2
	Unreachable Code = 3
)

// Help is the EXIT CODES block every command's help ends with.
const Help = `EXIT CODES
   0  ran and found nothing wrong
   1  ran and found a problem (a failed check or verification)
   2  bad input or usage
   3  could not reach what it needs (VM not running, socket busy, timeout, permission)`

// Coder is implemented by errors that know their exit code. Packages declare
// their sentinel errors with New so that wrapping keeps the code.
type Coder interface {
	error
	ExitCode() Code
}

// Error is an error with an exit code. Msg "" with a nil Err prints nothing
// (a command that found a problem and has already said so).
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "" && e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return ""
}

// Unwrap keeps errors.Is/As working through the code.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode implements Coder.
func (e *Error) ExitCode() Code { return e.Code }

// New returns a sentinel error with a fixed code, for errors.Is comparisons.
func New(code Code, msg string) error { return &Error{Code: code, Msg: msg} }

// Usagef is bad input or usage (exit 2).
func Usagef(format string, a ...any) error {
	return &Error{Code: Usage, Msg: fmt.Sprintf(format, a...)}
}

// Unreachablef is something the tool could not reach (exit 3).
func Unreachablef(format string, a ...any) error {
	return &Error{Code: Unreachable, Msg: fmt.Sprintf(format, a...)}
}

// Problemf is a problem found and worth a line of its own (exit 1).
func Problemf(format string, a ...any) error {
	return &Error{Code: Problem, Msg: fmt.Sprintf(format, a...)}
}

// ErrProblem ends a command that found a problem and has printed it (exit 1,
// no further message).
var ErrProblem error = &Error{Code: Problem}

// Wrap gives err a code; msg, when not "", is put in front of err's text.
func Wrap(code Code, msg string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Msg: msg, Err: err}
}

// Of is the exit code for err: the outermost code in its chain; an
// interrupted run and every error without a code are exit 3 (something could
// not be reached or did not finish).
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return Unreachable
}

// Message is the text to print for err: "" for a silent problem.
func Message(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
