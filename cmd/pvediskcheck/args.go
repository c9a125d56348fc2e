package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// interspersed lets flags follow positional arguments, as operators type
// them (`pvediskcheck limit 370 scsi1 --mbps-wr 20`): urfave/cli v2 stops
// parsing flags at the first argument, so flags found after a command's
// arguments are moved in front of them. "--" ends flag parsing as usual.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	i := 1
	// Global flags, then the command name.
	flags := app.Flags
	var cmd *cli.Command
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" && a != "--" {
			out = append(out, a)
			if takesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			i++
			continue
		}
		break
	}
	cmds := app.Commands
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		cmd = c
		out = append(out, args[i])
		i++
		cmds = c.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	if cmd == nil {
		return append(out, args[i:]...)
	}
	var fl, pos, global []string
	for i < len(args) {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			// A global flag written after the command (`check --all --json`)
			// goes back in front of the command name.
			dst := &fl
			if !hasFlag(cmd.Flags, a) && hasFlag(app.Flags, a) {
				dst = &global
			}
			*dst = append(*dst, a)
			if takesValue(append(cmd.Flags, app.Flags...), a) && i+1 < len(args) {
				*dst = append(*dst, args[i+1])
				i++
			}
			i++
			continue
		}
		pos = append(pos, a)
		i++
	}
	// out is [prog, global flags..., command names...]: insert the moved
	// global flags before the first command name.
	nCmd := 0
	for j := len(out) - 1; j > 0 && findCommandPath(app, out[j]); j-- {
		nCmd++
	}
	res := append([]string{}, out[:len(out)-nCmd]...)
	res = append(res, global...)
	res = append(res, out[len(out)-nCmd:]...)
	res = append(res, fl...)
	return append(res, pos...)
}

// findCommandPath reports whether name is a command or subcommand name.
func findCommandPath(app *cli.App, name string) bool {
	var walk func([]*cli.Command) bool
	walk = func(cs []*cli.Command) bool {
		for _, c := range cs {
			if c.Name == name || walk(c.Subcommands) {
				return true
			}
		}
		return false
	}
	return walk(app.Commands)
}

func hasFlag(flags []cli.Flag, a string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// takesValue reports whether flag token a (without "=value") needs the next
// argument as its value.
func takesValue(flags []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}

// Every number flag has an upper bound, the capability's constant: a value
// past it is bad input (exit 2) naming the flag, refused as the flags are
// read, before the command runs; the usage says the bound (top --interval
// 1h1000000h was taken and hung; TestNumberFlagsBounded checks every
// flag). Lower bounds stay where the capability checks them.

// maxDuration bounds a duration flag.
func maxDuration(f *cli.DurationFlag, most time.Duration) *cli.DurationFlag {
	f.Usage = withBound(f.Usage, units.Short(most))
	prev := f.Action
	f.Action = func(c *cli.Context, d time.Duration) error {
		if d > most {
			return exitcode.Usagef("--%s %s: at most %s", f.Name, d, units.Short(most))
		}
		if prev != nil {
			return prev(c, d)
		}
		return nil
	}
	return f
}

// maxInt bounds an integer flag.
func maxInt(f *cli.IntFlag, most int) *cli.IntFlag {
	f.Usage = withBound(f.Usage, strconv.Itoa(most))
	prev := f.Action
	f.Action = func(c *cli.Context, n int) error {
		if n > most {
			return exitcode.Usagef("--%s %d: at most %d", f.Name, n, most)
		}
		if prev != nil {
			return prev(c, n)
		}
		return nil
	}
	return f
}

// maxFloat bounds a number flag.
func maxFloat(f *cli.Float64Flag, most float64) *cli.Float64Flag {
	f.Usage = withBound(f.Usage, strconv.FormatFloat(most, 'g', -1, 64))
	prev := f.Action
	f.Action = func(c *cli.Context, x float64) error {
		if !(x <= most) { // NaN too
			return exitcode.Usagef("--%s %s: at most %s", f.Name, strconv.FormatFloat(x, 'g', 6, 64), strconv.FormatFloat(most, 'g', -1, 64))
		}
		if prev != nil {
			return prev(c, x)
		}
		return nil
	}
	return f
}

// withBound adds "at most MOST" to a usage: inside its closing
// parenthesis, or as one.
func withBound(usage, most string) string {
	if strings.HasSuffix(usage, ")") {
		return strings.TrimSuffix(usage, ")") + "; at most " + most + ")"
	}
	return usage + " (at most " + most + ")"
}
