package main

import (
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/internal/clidoc"
)

// The man page and the bash completion are generated at build time from the
// same App that prints --help, so the three never disagree (Makefile `man`,
// `completion`; debian/rules). The commands are hidden: not part of the tool.
func init() {
	local := clusterRole{Local: "prints this program's own documentation"}
	commands = append(commands, command{new: genManCommand, cluster: local}, command{new: genBashCompletionCommand, cluster: local})
}

func genManCommand() *cli.Command {
	return &cli.Command{
		Name:   "gen-man",
		Usage:  "write the pvediskcheck(8) man page (roff) to stdout",
		Hidden: true,
		Action: func(c *cli.Context) error {
			return clidoc.Man(c.App.Writer, c.App, clidoc.ManOptions{
				Section: "8",
				Date:    buildDate(),
				Manual:  "System Administration",
				SeeAlso: []string{"qm(1)", "pvesm(1)", "lvs(8)", "qemu-system-x86_64(1)"},
				// args.go moves global options written after the command.
				GlobalOptions: "Global options may be given before or after the command: pvediskcheck --json cache 370 and pvediskcheck cache 370 --json are the same.",
			})
		},
	}
}

func genBashCompletionCommand() *cli.Command {
	return &cli.Command{
		Name:   "gen-bash-completion",
		Usage:  "write the bash completion script to stdout",
		Hidden: true,
		Action: func(c *cli.Context) error {
			return clidoc.Bash(c.App.Writer, c.App, clidoc.BashOptions{RootFlag: "root", RootEnv: "PVEDISKCHECK_ROOT", GlobalAfterCommand: true})
		},
	}
}

// buildDate is SOURCE_DATE_EPOCH (set by dpkg-buildpackage from the
// changelog, so the page is reproducible), else today.
func buildDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0)
		}
	}
	return time.Now()
}
