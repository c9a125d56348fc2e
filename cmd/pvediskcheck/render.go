package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pvediskcheck/pvediskcheck/latency"
)

// table prints aligned columns (plain text: a colour is added by the
// caller, to a cell, where the command colours one).
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")) }
func (t *table) flush()             { t.tw.Flush() }

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
	return color + s + reset
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

// histogramsLeft says, in text, each latency histogram a killed run left
// on a disk (latency.Leftover) and how to clear it; --json has them as
// histograms_left.
func (e *env) histogramsLeft(ls []latency.Leftover) {
	for _, l := range ls {
		fmt.Fprintf(e.out, "note: VM %d: %s\n", l.VMID, l.Message())
	}
}
