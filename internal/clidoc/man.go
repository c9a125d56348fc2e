// Package clidoc renders a urfave/cli App's own help text as a man page and a
// bash completion script, so that --help, the man page and the completion
// never disagree: all three come from the same Usage, ArgsUsage, Description
// and Flags fields.
package clidoc

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// ManOptions are the parts of a man page that are not in the App.
type ManOptions struct {
	Section string    // "8" for a system administration command
	Date    time.Time // the page's date; from SOURCE_DATE_EPOCH for reproducible builds
	Manual  string    // centre header, e.g. "System Administration"
	SeeAlso []string  // e.g. "qm(1)"
	// GlobalOptions is the sentence that opens GLOBAL OPTIONS; default:
	// "Global options go before the command name." (urfave/cli's rule).
	GlobalOptions string
}

// Man writes app's manual page in man(7) roff: NAME, SYNOPSIS, DESCRIPTION
// (the App's Description), GLOBAL OPTIONS, COMMANDS (one line each), then a
// section per command and subcommand with its Description and OPTIONS, and
// SEE ALSO. Hidden commands and flags are left out, as --help leaves them out.
func Man(w io.Writer, app *cli.App, o ManOptions) error {
	name := app.Name
	r := &roff{prog: name}
	r.printf(".\\\" Generated from %s's --help text by %s gen-man; do not edit.\n", name, name)
	r.printf(".TH %s %s %s %s %s\n", quote(strings.ToUpper(name)), o.Section,
		quote(o.Date.UTC().Format("2006-01-02")), quote(name+" "+app.Version), quote(o.Manual))
	// Left-aligned and unhyphenated: option names and codes (aio-native-needs-direct)
	// must not be split or stretched.
	r.line(".ad l")
	r.line(".nh")

	r.sh("NAME")
	r.printf("%s \\- %s\n", escape(name), escape(app.Usage))

	r.sh("SYNOPSIS")
	cmds := visibleCommands(app.Commands, nil)
	r.synopsis(name, []string{"GLOBAL OPTIONS"}, "COMMAND", "COMMAND OPTIONS", "ARGUMENTS...")
	for _, c := range cmds {
		r.synopsis(name, nil, strings.Join(c.path, " "), "OPTIONS", argsOf(c.cmd))
	}

	if app.Description != "" {
		r.sh("DESCRIPTION")
		r.text(app.Description)
	}

	if groups := flagGroups(app.VisibleFlagCategories(), app.VisibleFlags()); len(groups) > 0 {
		r.sh("GLOBAL OPTIONS")
		note := o.GlobalOptions
		if note == "" {
			note = "Global options go before the command name."
		}
		r.line(escape(note))
		for _, g := range groups {
			if g.name != "" {
				r.ss(g.name)
			}
			r.flags(g.flags)
		}
	}

	if len(cmds) > 0 {
		r.sh("COMMANDS")
		r.line("Each command has a section of its own below.")
		for _, c := range cmds {
			r.line(".TP")
			r.printf("\\fB%s\\fR\n", escape(strings.Join(c.path, " ")))
			r.line(escape(c.cmd.Usage))
		}
	}

	for _, c := range cmds {
		cmd := c.cmd
		r.sh(strings.ToUpper(strings.Join(c.path, " ")))
		r.synopsisIn(name, c.path, argsOf(cmd), len(cmd.VisibleFlags()) > 0)
		if cmd.Usage != "" {
			r.line(".PP")
			r.line(escape(sentence(cmd.Usage)))
		}
		if len(cmd.Aliases) > 0 {
			r.line(".PP")
			r.line("Also called: " + escape(strings.Join(cmd.Aliases, ", ")) + ".")
		}
		if cmd.Description != "" {
			r.line(".PP")
			r.text(cmd.Description)
		}
		for i, g := range flagGroups(cmd.VisibleFlagCategories(), cmd.VisibleFlags()) {
			switch {
			case g.name != "":
				r.ss(g.name)
			case i == 0:
				r.ss("OPTIONS")
			}
			r.flags(g.flags)
		}
	}

	if len(o.SeeAlso) > 0 {
		r.sh("SEE ALSO")
		refs := make([]string, len(o.SeeAlso))
		for i, s := range o.SeeAlso {
			if m := manRef.FindStringSubmatch(s); m != nil {
				refs[i] = "\\fB" + escape(m[1]) + "\\fR(" + m[2] + ")"
			} else {
				refs[i] = escape(s)
			}
		}
		r.line(strings.Join(refs, ",\n"))
	}
	_, err := io.WriteString(w, r.b.String())
	return err
}

// plainHyphen finds a hyphen that escape left a hyphen (inside a word).
var plainHyphen = regexp.MustCompile(`(^|[^\\])-`)

var manRef = regexp.MustCompile(`^([^()]+)\(([0-9a-z]+)\)$`)

// command is a visible command with its full name below the App.
type command struct {
	path []string // e.g. ["limit", "clear"]
	cmd  *cli.Command
}

func visibleCommands(cs []*cli.Command, parent []string) []command {
	var out []command
	for _, c := range cs {
		if c.Hidden {
			continue
		}
		path := append(append([]string{}, parent...), c.Name)
		out = append(out, command{path, c})
		out = append(out, visibleCommands(c.Subcommands, path)...)
	}
	return out
}

// argsOf is the command's ArgsUsage, or COMMAND for one that only groups
// subcommands.
func argsOf(c *cli.Command) string {
	if c.ArgsUsage == "" && len(c.VisibleCommands()) > 0 {
		return "COMMAND"
	}
	return c.ArgsUsage
}

type roff struct {
	b    strings.Builder
	prog string // the program's name: indented lines starting with it are command lines
}

func (r *roff) printf(format string, a ...any) { fmt.Fprintf(&r.b, format, a...) }
func (r *roff) line(s string)                  { r.b.WriteString(s + "\n") }
func (r *roff) sh(title string)                { r.line(".SH " + quote(escape(title))) }
func (r *roff) ss(title string)                { r.line(".SS " + quote(escape(title))) }

// synopsis writes one synopsis line: the program in bold, the rest italic.
func (r *roff) synopsis(name string, before []string, cmd, opts, args string) {
	r.line(".PP")
	var b strings.Builder
	b.WriteString("\\fB" + escape(name) + "\\fR")
	for _, x := range before {
		b.WriteString(" [\\fI" + escape(x) + "\\fR]")
	}
	if cmd == "COMMAND" {
		b.WriteString(" \\fICOMMAND\\fR")
	} else {
		b.WriteString(" \\fB" + escape(cmd) + "\\fR")
	}
	b.WriteString(" [\\fI" + escape(opts) + "\\fR]")
	if args != "" {
		b.WriteString(" " + argsUsage(args))
	}
	r.line(b.String())
}

func (r *roff) synopsisIn(name string, path []string, args string, hasFlags bool) {
	var b strings.Builder
	b.WriteString("\\fB" + escape(name+" "+strings.Join(path, " ")) + "\\fR")
	if hasFlags {
		b.WriteString(" [\\fIOPTIONS\\fR]")
	}
	if args != "" {
		b.WriteString(" " + argsUsage(args))
	}
	r.line(b.String())
}

// argsUsage sets the metasyntactic words of ArgsUsage (VMID, DISK...) in
// italics and keeps brackets and literals roman.
func argsUsage(s string) string {
	return metaWord.ReplaceAllStringFunc(escape(s), func(w string) string { return "\\fI" + w + "\\fR" })
}

var metaWord = regexp.MustCompile(`[A-Z][A-Z0-9_]+`)

type flagGroup struct {
	name  string // "" for flags without a category
	flags []cli.Flag
}

// flagGroups orders flags as --help does: when any flag has a category, the
// uncategorised ones first, then one group per category, each sorted by
// name (cli.VisibleFlagCategories); otherwise all of them as declared.
func flagGroups(cats []cli.VisibleFlagCategory, flat []cli.Flag) []flagGroup {
	if len(cats) == 0 {
		if len(flat) == 0 {
			return nil
		}
		return []flagGroup{{flags: flat}}
	}
	var out []flagGroup
	for _, c := range cats {
		g := flagGroup{name: c.Name()}
		for _, f := range c.Flags() {
			g.flags = append(g.flags, f)
		}
		out = append(out, g)
	}
	return out
}

// flags writes one tagged paragraph per flag, with exactly the text --help
// prints for it (cli.FlagStringer), the names in bold.
func (r *roff) flags(flags []cli.Flag) {
	for _, f := range flags {
		tag, body, _ := strings.Cut(cli.FlagStringer(f), "\t")
		r.line(".TP")
		r.line(flagTag(tag))
		r.line(escape(strings.TrimSpace(body)))
	}
}

// flagTag turns "--for value" or "--help, -h" into roff: names bold, the
// value placeholder italic.
func flagTag(tag string) string {
	words := strings.Fields(tag)
	for i, w := range words {
		name, comma := strings.CutSuffix(w, ",")
		s := escape(name)
		if strings.HasPrefix(name, "-") {
			s = "\\fB" + s + "\\fR"
		} else {
			s = "\\fI" + s + "\\fR"
		}
		if comma {
			s += ","
		}
		words[i] = s
	}
	return strings.Join(words, " ")
}

var (
	// A heading inside a Description: a line in capitals, e.g. "EXAMPLES".
	headingLine = regexp.MustCompile(`^[A-Z][A-Z0-9 /()-]*[A-Z)]$`)
	// A definition: an indented term of a few words, two or more spaces, its
	// text ("   0  ran and ...", "   dir, nfs, cifs   raw: ...").
	definitionLine = regexp.MustCompile(`^(\s+)(\S+(?: \S+)*?)(\s{2,})(\S.*)$`)
)

// maxTerm is the longest definition term; a longer run of words before two
// spaces is a sentence, not a term.
const maxTerm = 24

func definition(line string) []string {
	m := definitionLine.FindStringSubmatch(line)
	if m == nil || len(m[2]) > maxTerm {
		return nil
	}
	return m
}

// text renders a help text written for a terminal:
//   - unindented lines are filled paragraphs, a blank line separates them;
//   - an unindented line in capitals (EXAMPLES) is a subsection heading;
//   - indented lines under a heading containing EXAMPLE, or starting with
//     the program's name, are command lines, kept verbatim;
//   - indented "term  text" lines are tagged paragraphs aligned as in
//     --help, and a line indented to a definition's text continues it;
//   - other indented lines are an indented filled paragraph.
func (r *roff) text(s string) {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	const (
		none = iota
		para
		ipara
		verbatim
		defs
	)
	state := none
	heading := ""
	defCol := -1 // column where the current definition's text starts
	closeBlock := func() {
		switch state {
		case verbatim:
			r.line(".fi")
			r.line(".RE")
		case defs:
			r.line(".PD")
			r.line(".RE")
		case ipara:
			r.line(".RE")
		}
		state = none
		defCol = -1
	}
	open := func(st int, macros ...string) {
		if state == st {
			return
		}
		closeBlock()
		for _, m := range macros {
			r.line(m)
		}
		state = st
	}
	started := false
	for i := 0; i < len(lines); i++ {
		ln := strings.TrimRight(lines[i], " \t")
		trimmed := strings.TrimLeft(ln, " \t")
		indent := len(ln) - len(trimmed)
		firstWord, _, _ := strings.Cut(trimmed, " ")
		switch {
		case trimmed == "":
			closeBlock()
			started = true
		case indent == 0 && headingLine.MatchString(trimmed) && len(trimmed) > 2:
			closeBlock()
			r.ss(trimmed)
			heading = trimmed
			started = false
		case indent > 0 && (strings.Contains(heading, "EXAMPLE") || firstWord == r.prog):
			open(verbatim, ".RS 3", ".nf")
			r.line(escapeVerbatim(trimmed))
		case state == defs && indent == defCol:
			r.line(escape(trimmed)) // a definition's text wrapped onto the next line
		case indent > 0 && definition(ln) != nil:
			m := definition(ln)
			open(defs, ".RS 3", ".PD 0")
			defCol = len(m[1]) + len(m[2]) + len(m[3])
			r.line(".TP " + fmt.Sprint(defWidth(lines, i)) + "n")
			r.line("\\fB" + escape(m[2]) + "\\fR")
			r.line(escape(m[4]))
		case indent > 0:
			open(ipara, ".RS 3")
			r.line(escape(trimmed))
		default:
			if state != para {
				closeBlock()
				if started {
					r.line(".PP")
				}
				state = para
			}
			r.line(escape(trimmed))
			started = true
		}
	}
	closeBlock()
}

// defWidth is the tag width for the run of definitions around line i (up to
// a blank or unindented line): the longest term plus two, so that the texts
// line up as they do in --help.
func defWidth(lines []string, i int) int {
	for i > 0 && strings.HasPrefix(lines[i-1], " ") && strings.TrimSpace(lines[i-1]) != "" {
		i--
	}
	w := 0
	for ; i < len(lines) && strings.HasPrefix(lines[i], " ") && strings.TrimSpace(lines[i]) != ""; i++ {
		if m := definition(strings.TrimRight(lines[i], " \t")); m != nil {
			w = max(w, len(m[2]))
		}
	}
	return w + 2
}

// sentence capitalises a one-line usage and ends it with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// escape makes text safe for roff: backslashes, a leading dot or quote, and
// hyphens that start an option or a command-line word (so --json prints as
// two ASCII minus signs and can be copied), while hyphens inside words
// (write-cache) stay hyphens, where the line is not broken.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	var b strings.Builder
	prevDash := false
	for i, c := range s {
		if c == '-' {
			startOfWord := i == 0 || strings.ContainsRune(" \t[(=,|'\"", rune(s[i-1]))
			if startOfWord || prevDash {
				b.WriteString(`\-`)
				prevDash = true
				continue
			}
		}
		prevDash = false
		b.WriteRune(c)
	}
	// \% keeps a word with a hyphen inside (write-cache, --force-share,
	// aio-native-needs-direct) on one line: groff would break it there.
	words := strings.Split(b.String(), " ")
	for i, w := range words {
		if plainHyphen.MatchString(w) {
			words[i] = `\%` + w
		}
	}
	out := strings.Join(words, " ")
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

// escapeVerbatim is escape for example lines: every hyphen is a minus sign,
// since these lines are meant to be copied into a shell.
func escapeVerbatim(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\e`), "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// quote makes a roff macro argument of s.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\(dq`) + `"` }
