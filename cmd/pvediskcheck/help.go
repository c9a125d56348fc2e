package main

import (
	"embed"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// The commands' long help (their DESCRIPTION in --help, the man page and
// the completion) is text: help/COMMAND.txt, help/COMMAND-SUBCOMMAND.txt,
// help/pvediskcheck.txt for the program, and help/cluster-*.txt for the
// sections cluster mode adds. Each file is the text as --help prints it,
// except exitCodesMark, which stands for exitcode.Help (the exit codes
// every command shares).
//
//go:embed help/*.txt
var helpFiles embed.FS

// exitCodesMark in a help file is replaced by exitcode.Help.
const exitCodesMark = "{{EXIT CODES}}"

// helpText is help/NAME.txt without its final newline, exitCodesMark
// replaced. A file missing from the build is a programming error.
func helpText(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err)
	}
	return strings.Replace(strings.TrimSuffix(string(b), "\n"), exitCodesMark, exitcode.Help, 1)
}
