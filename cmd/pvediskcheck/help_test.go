package main

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every help file is some command's help (cluster mode's sections within
// the wired commands'), and no mark is left unreplaced.
func TestHelpFilesAllUsed(t *testing.T) {
	app := newApp(nil, nil)
	all := app.Description
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			all += "\x00" + c.Description
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
	cmds, _ := newCommands()
	walk(cmds) // as each file builds them, before cluster mode
	if strings.Contains(all, "{{") {
		t.Errorf("a description holds an unreplaced mark")
	}
	names, err := fs.Glob(helpFiles, "help/*.txt")
	if err != nil || len(names) == 0 {
		t.Fatalf("no help files: %v", err)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "help/"), ".txt")
		if text := helpText(name); text == "" || !strings.Contains(all, text) {
			t.Errorf("%s is no command's help", n)
		}
	}
}
