package clidoc

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return &cli.App{
		Name:    "tool",
		Usage:   "does things",
		Version: "1.2-3",
		Description: `First paragraph, with --json and a write-cache.

.dotted line and a back\slash

Sources:
   lvm                     lvs: data_percent
   dir, nfs, cifs, btrfs   raw: st_blocks;
                           qcow2: actual-size
   tool run 2 --slow       # a command line, not a definition

EXAMPLES
   tool run 1 --fast            # with a comment

EXIT CODES
   0  fine
   12 not a definition (one space)
   3  could not reach it, a long text that
      wraps onto a second line
   Exit 1 also when a sentence follows,  even one with two spaces inside it.`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "root", Value: "/", EnvVars: []string{"TOOL_ROOT"}, Usage: "root dir"}},
		Commands: []*cli.Command{
			{Name: "run", Usage: "run a thing", ArgsUsage: "VMID [DISK...]", Aliases: []string{"r"},
				Flags:       []cli.Flag{&cli.BoolFlag{Name: "fast", Aliases: []string{"f"}, Usage: "go fast"}, &cli.BoolFlag{Name: "secret", Hidden: true}},
				Subcommands: []*cli.Command{{Name: "sub", Usage: "a subcommand", Description: "Sub text."}}},
			{Name: "internal", Hidden: true, Usage: "not documented"},
		},
	}
}

func TestMan(t *testing.T) {
	var b bytes.Buffer
	if err := Man(&b, testApp(), ManOptions{Section: "8", Date: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC), Manual: "System Administration", SeeAlso: []string{"qm(1)"}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`.TH "TOOL" 8 "2025-01-02" "tool 1.2-3" "System Administration"`,
		"tool \\- does things\n",
		`.SH "RUN"` + "\n" + `\fBtool run\fR [\fIOPTIONS\fR] \fIVMID\fR [\fIDISK\fR...]`,
		`.SH "RUN SUB"`,
		"Sub text.",
		"Also called: r.",
		`\fB\-\-fast\fR, \fB\-f\fR`,
		`\fB\-\-root\fR \fIvalue\fR` + "\nroot dir (default: \"/\") [$TOOL_ROOT]",
		"with \\-\\-json and a \\%write-cache.",
		"\\&.dotted line and a back\\eslash",
		".SS \"EXAMPLES\"\n.RS 3\n.nf\ntool run 1 \\-\\-fast            # with a comment\n.fi\n.RE",
		".TP 23n\n\\fBlvm\\fR\nlvs: data_percent\n.TP 23n\n\\fBdir, nfs, cifs, btrfs\\fR\nraw: st_blocks;\nqcow2: \\%actual-size\n.PD\n.RE\n.RS 3\n.nf\ntool run 2 \\-\\-slow       # a command line, not a definition\n.fi",
		".RS 3\n12 not a definition (one space)\n.RE",
		".RS 3\nExit 1 also when a sentence follows,  even one with two spaces inside it.\n.RE",
		".TP 3n\n\\fB0\\fR\nfine",
		"\\fB3\\fR\ncould not reach it, a long text that\nwraps onto a second line",
		`\fBqm\fR(1)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, not := range []string{"secret", "INTERNAL", "not documented"} {
		if strings.Contains(page, not) {
			t.Errorf("page shows hidden %q", not)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = strings.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff: %v: %s", err, out)
		}
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"--json":              `\-\-json`,
		"use -h or [--x]":     `use \-h or [\-\-x]`,
		"write-cache on":      `\%write-cache on`,
		"--force-share":       `\%\-\-force-share`,
		"'qm set' it":         `\&'qm set' it`,
		"a\\b":                `a\eb`,
		"aio-native-needs-io": `\%aio-native-needs-io`,
		"x=-1":                `x=\-1`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArgKinds(t *testing.T) {
	for in, want := range map[string]string{
		"VMID [DISK...]": "vmid disk...",
		"[VMID...]":      "vmid...",
		"VMID DISK":      "vmid disk",
		"VMID [FILE]":    "vmid -",
		"[STORAGE...]":   "storage...",
		"VMID [DISK] [--mbps-wr N ...] [--clear]": "vmid disk",
		"": "",
	} {
		if got := argKinds(in); got != want {
			t.Errorf("argKinds(%q) = %q, want %q", in, got, want)
		}
	}
}
