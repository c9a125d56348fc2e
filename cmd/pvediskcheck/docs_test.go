package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// manSections splits the generated page into its .SH sections by title.
func manSections(t *testing.T) (string, map[string]string) {
	t.Helper()
	out, errs, code := runCLI(t, "gen-man")
	if code != 0 {
		t.Fatalf("gen-man: exit %d: %s", code, errs)
	}
	secs := map[string]string{}
	// \% (no break inside a hyphenated word) is not part of the text.
	for _, part := range strings.Split(strings.ReplaceAll(out, `\%`, ""), "\n.SH ")[1:] {
		title, body, _ := strings.Cut(part, "\n")
		secs[strings.Trim(title, `"`)] = body
	}
	return out, secs
}

func roffFlag(name string) string {
	if len(name) == 1 {
		return `\fB\-` + name + `\fR`
	}
	return `\fB\-\-` + name + `\fR`
}

// The man page documents every command, every subcommand and every flag,
// each in the section of its command.
func TestManMentionsEveryCommandAndFlag(t *testing.T) {
	_, secs := manSections(t)
	app := newApp(nil, nil)
	app.Setup()
	for _, f := range app.VisibleFlags() {
		for _, n := range f.Names() {
			if !strings.Contains(secs["GLOBAL OPTIONS"], roffFlag(n)) {
				t.Errorf("GLOBAL OPTIONS does not document %s", roffFlag(n))
			}
		}
	}
	var walk func(path []string, cs []*cli.Command)
	walk = func(path []string, cs []*cli.Command) {
		for _, c := range cs {
			if c.Hidden {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			title := strings.ToUpper(strings.Join(p, " "))
			body, ok := secs[title]
			if !ok {
				t.Errorf("no section %q for command %q", title, strings.Join(p, " "))
				continue
			}
			if !strings.Contains(secs["COMMANDS"], `\fB`+strings.Join(p, " ")+`\fR`) {
				t.Errorf("COMMANDS does not list %q", strings.Join(p, " "))
			}
			if !strings.Contains(body, `\fBpvediskcheck `+strings.Join(p, " ")+`\fR`) {
				t.Errorf("section %s has no synopsis", title)
			}
			for _, f := range c.VisibleFlags() {
				for _, n := range f.Names() {
					if !strings.Contains(body, roffFlag(n)) {
						t.Errorf("section %s does not document %s", title, roffFlag(n))
					}
				}
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	for _, hidden := range []string{"GEN-MAN", "GEN-BASH-COMPLETION"} {
		if _, ok := secs[hidden]; ok {
			t.Errorf("hidden command %s has a section", hidden)
		}
	}
}

// groff renders the page without a warning, as lintian's man check does.
func TestManRendersCleanly(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff not installed")
	}
	page, _ := manSections(t)
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-rLL=80n")
	cmd.Stdin = strings.NewReader(page)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	text := stdout.String()
	for _, want := range []string{"pvediskcheck cache [OPTIONS] VMID [DISK...]", "--json", "EXIT CODES"} {
		if !strings.Contains(stripOverstrike(text), want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
}

// stripOverstrike removes grotty's bold/underline overstrikes (x\bx, _\bx).
func stripOverstrike(s string) string {
	b := []rune(s)
	var out []rune
	for i := 0; i < len(b); i++ {
		if i+1 < len(b) && b[i+1] == '\b' {
			i++
			continue
		}
		out = append(out, b[i])
	}
	return string(out)
}

// complete runs the generated bash completion for a command line (the
// cursor at its end) and returns the candidates.
func complete(t *testing.T, script, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var q []string
	for _, w := range words {
		q = append(q, "'"+w+"'")
	}
	prog := script + "\nCOMP_WORDS=(" + strings.Join(q, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) +
		"\n_pvediskcheck\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script, errs, code := runCLI(t, "gen-bash-completion")
	if code != 0 {
		t.Fatalf("gen-bash-completion: exit %d: %s", code, errs)
	}
	root := t.TempDir()
	conf := filepath.Join(root, "etc/pve/qemu-server")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-370-disk-0\nscsi1: local-lvm:vm-370-disk-1\nvirtio1: local-lvm:vm-370-disk-2\nsata1: local-lvm:vm-370-disk-3\nnet0: virtio=00:11:22:33:44:55\n\n[snap1]\nscsi7: local-lvm:vm-370-disk-9\n"
	storage := "dir: local\n\tpath /var/lib/vz\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"
	for _, f := range []struct{ name, text string }{{"370.conf", cfg}, {"101.conf", "memory: 512\n"}, {"../storage.cfg", storage}} {
		if err := os.WriteFile(filepath.Join(conf, f.name), []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type testCase struct {
		line string
		want []string
		not  []string
	}
	var visible []string
	var groups []testCase // commands with subcommands complete them
	for _, c := range newApp(nil, nil).Commands {
		if c.Hidden {
			continue
		}
		visible = append(visible, c.Name)
		if subs := c.VisibleCommands(); len(subs) > 0 {
			tc := testCase{line: "pvediskcheck " + c.Name + " "}
			for _, s := range subs {
				tc.want = append(tc.want, s.Name)
			}
			groups = append(groups, tc)
		}
	}
	cases := []testCase{
		{"pvediskcheck ", visible, []string{"gen-man"}},
		{"pvediskcheck --j", []string{"--json"}, nil},
		{"pvediskcheck --root " + root + " cache ", []string{"101", "370"}, nil},
		{"pvediskcheck --root " + root + " --json cache 370 ", []string{"scsi0", "scsi1", "virtio1", "sata1"}, []string{"scsi7", "net0"}},
		{"pvediskcheck --root " + root + " cache --verify 370 scsi1 s", []string{"scsi0", "sata1"}, []string{"virtio1"}},
		{"pvediskcheck cache --v", []string{"--verify"}, []string{"--json"}},
		{"pvediskcheck cache 370 --j", []string{"--json"}, nil}, // global options may follow the command
		{"pvediskcheck --root " + root + " cache 370 --root " + root[:len(root)-1], []string{root}, nil},
	}
	// Commands whose arguments are storage IDs complete them from storage.cfg.
	for _, c := range newApp(nil, nil).Commands {
		if !c.Hidden && strings.HasPrefix(strings.Trim(c.ArgsUsage, "["), "STORAGE") {
			cases = append(cases, testCase{"pvediskcheck --root " + root + " " + c.Name + " ", []string{"local", "local-lvm"}, []string{"pve"}})
		}
	}
	cases = append(cases, groups...)
	for _, c := range cases {
		got := complete(t, script, c.line)
		set := map[string]bool{}
		for _, g := range got {
			set[g] = true
		}
		for _, w := range c.want {
			if !set[w] {
				t.Errorf("%q: completions %v lack %q", c.line, got, w)
			}
		}
		for _, w := range c.not {
			if set[w] {
				t.Errorf("%q: completions %v include %q", c.line, got, w)
			}
		}
	}
}
