package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Text output is printed through textOut (newEnv's out and errOut): every
// string a command prints, whatever it came from (a VM name of a config,
// the guest agent's device names and mount points, fio job names, a remote
// node's output over SSH, a file's line in an error), has the characters a
// terminal would act on escaped (units.Text: "\x1b[2J" is printed as
// those seven characters), newlines and tabs aside. The control sequences
// the tool writes on purpose (paint's colours, the progress line, top's
// screen) are written as ctl(seq): bracketed by ctlMark, which textOut
// turns back into the sequence. ctlMark is random per process, so no
// string from outside can hold it.
var ctlMark = func() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "\x00" + hex.EncodeToString(b) + "\x00"
}()

// ctl is a control sequence the tool writes on purpose.
func ctl(seq string) string { return ctlMark + seq + ctlMark }

// textOut escapes what it writes (units.Text) but for ctl's sequences.
// Each Write is escaped on its own (the tool writes whole lines and whole
// formatted strings).
type textOut struct{ w io.Writer }

// newTextOut wraps w (once: a textOut is returned as it is).
func newTextOut(w io.Writer) io.Writer {
	if _, ok := w.(textOut); ok || w == nil {
		return w
	}
	return textOut{w}
}

func (t textOut) Write(p []byte) (int, error) {
	s := string(p)
	var b strings.Builder
	for {
		i := strings.Index(s, ctlMark)
		if i < 0 {
			b.WriteString(units.Text(s))
			break
		}
		b.WriteString(units.Text(s[:i]))
		rest := s[i+len(ctlMark):]
		j := strings.Index(rest, ctlMark)
		if j < 0 {
			b.WriteString(units.Text(rest))
			break
		}
		b.WriteString(rest[:j])
		s = rest[j+len(ctlMark):]
	}
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cutText is line s escaped as textOut escapes it, cut after n characters
// of what shows (ctl's sequences are kept whole and do not count; a colour
// cut short is reset).
func cutText(s string, n int) string {
	var b strings.Builder
	shown, painted := 0, false
	for s != "" && shown < n {
		i := strings.Index(s, ctlMark)
		text := s
		if i >= 0 {
			text = s[:i]
		}
		text = units.Text(text)
		if left := n - shown; len(text) > left {
			text = text[:left]
		}
		b.WriteString(text)
		shown += len(text)
		if i < 0 || shown >= n {
			break
		}
		rest := s[i+len(ctlMark):]
		j := strings.Index(rest, ctlMark)
		if j < 0 {
			break
		}
		b.WriteString(ctl(rest[:j]))
		painted = rest[:j] != reset
		s = rest[j+len(ctlMark):]
	}
	if painted {
		b.WriteString(ctl(reset))
	}
	return b.String()
}

// rawOut is the writer under a textOut: what a terminal check and top's
// screen size look at, and where a data format that has its own escaping
// (the Prometheus exposition of metrics) is written.
func rawOut(w io.Writer) io.Writer {
	if t, ok := w.(textOut); ok {
		return t.w
	}
	return w
}

// table prints aligned columns (plain text: a colour is added by the
// caller, to a cell, where the command colours one). Each cell is
// escaped before the columns are measured (units.Printable), so a cell
// from outside can neither act on the terminal nor shift the columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = units.Printable(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}
func (t *table) flush() { t.tw.Flush() }

const (
	red    = "\x1b[31m"
	yellow = "\x1b[33m"
	green  = "\x1b[32m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// paint colours s on a terminal. tabwriter counts escape bytes, so colour is
// only used on text outside aligned tables or at the end of a row.
func (e *env) paint(color, s string) string {
	if !e.color || s == "" {
		return s
	}
	return ctl(color) + s + ctl(reset)
}

// vmState is a VM's state as check heads it.
func vmState(running bool) string {
	if running {
		return "running"
	}
	return "stopped"
}

// liveState is a VM's state at the head of a report, coloured.
func (e *env) liveState(running bool) string {
	if running {
		return e.paint(green, "running")
	}
	return e.paint(yellow, "not running")
}

// warning prints a warning and, under it, its fix.
func (e *env) warning(indent, text, fix string) {
	fmt.Fprintf(e.out, "%s%s %s\n", indent, e.paint(yellow, "warning:"), text)
	if fix != "" {
		fmt.Fprintf(e.out, "    fix: %s\n", fix)
	}
}

// notes prints a report's notes, one line each.
func (e *env) notes(notes []string) {
	for _, n := range notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}

// agentNotAsked says, in text, each guest agent answer a command did not
// ask for while a backup held the VM (vm.AgentSkip); --json has them as
// agent_not_asked.
func (e *env) agentNotAsked(skips ...*vm.AgentSkip) {
	for _, s := range skips {
		if s != nil {
			fmt.Fprintln(e.out, "note: "+s.String())
		}
	}
}

// histogramsLeft says, in text, each latency histogram a killed run left
// on a disk (latency.Leftover) and how to clear it; --json has them as
// histograms_left.
func (e *env) histogramsLeft(ls []latency.Leftover) {
	for _, l := range ls {
		fmt.Fprintf(e.out, "note: VM %d: %s\n", l.VMID, l.Message())
	}
}
