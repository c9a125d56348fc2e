package outfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func ours(head []byte) bool { return bytes.HasPrefix(head, []byte("<!-- ours -->")) }

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// entries lists a directory's names (what a refused write must not leave).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// The campaign's report cases (issue 31): every path refused at once, one
// line naming the flag and the path, exit 2, nothing written; a FIFO never
// waited on.
func TestCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	write(t, passwd, "root:x:0:0:root:/root:/bin/bash\n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(passwd, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.html")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	write(t, file, "x")
	for _, c := range []struct{ path, want string }{
		{"", `--report "": no file named (name a FILE, or leave --report out)`},
		{passwd, "--report " + passwd + ": exists and is not a file pvediskcheck wrote: refused (move it away, or name another file)"},
		{fifo, "--report " + fifo + ": is a FIFO, not a file: refused"},
		{dir, "--report " + dir + ": is a directory, not a file: refused"},
		{link, "--report " + link + ": is a symbolic link: refused (pvediskcheck never writes through one; name the file itself)"},
		{dangling, "--report " + dangling + ": is a symbolic link: refused (pvediskcheck never writes through one; name the file itself)"},
		{filepath.Join(dir, "no/such/r.html"), "--report " + filepath.Join(dir, "no/such/r.html") + ": no directory " + filepath.Join(dir, "no/such") + " to write it in"},
		{filepath.Join(file, "r.html"), "--report " + filepath.Join(file, "r.html") + ": " + file + " is a regular file, not a directory"},
		{"/proc/r.html", "--report /proc/r.html: cannot write in /proc: "},
		{"/dev/null", "--report /dev/null: is a character device, not a file: refused"},
		{dir + "/\x1b[2J/r.html", `--report "` + dir + `/\x1b[2J/r.html": no directory "` + dir + `/\x1b[2J" to write it in`},
	} {
		start := time.Now()
		before := entries(t, dir)
		f, err := Check("report", c.path, ours, 0o644)
		if f != nil || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(exitcode.Message(err), c.want) || strings.Contains(exitcode.Message(err), "\n") {
			t.Errorf("Check(%q) = %v, exit %d %q\nwant exit 2 %q", c.path, f, exitcode.Of(err), exitcode.Message(err), c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Check(%q) took %s", c.path, d)
		}
		if got := entries(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
			t.Errorf("Check(%q) left %v (had %v)", c.path, got, before)
		}
	}
	if got := read(t, passwd); got != "root:x:0:0:root:/root:/bin/bash\n" {
		t.Errorf("passwd changed: %q", got)
	}
}

// A new file and one of ours are written whole, with the mode asked and
// nothing left beside them; the old file is replaced, not written into.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for i, text := range []string{"<!-- ours --> one", "<!-- ours --> two"} {
		f, err := Check("report", path, ours, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		var held *os.File
		if i == 1 {
			// A reader of the old file keeps reading the old file.
			if held, err = os.Open(path); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.WriteBytes([]byte(text)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); got != text {
			t.Errorf("write %d: %q", i, got)
		}
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o644 {
			t.Errorf("write %d: mode %v, want 0644 whatever the umask", i, st.Mode())
		}
		if held != nil {
			b, _ := io.ReadAll(held)
			held.Close()
			if string(b) != "<!-- ours --> one" {
				t.Errorf("the old file was written into: %q", b)
			}
		}
		if got := entries(t, dir); len(got) != 1 {
			t.Errorf("write %d left %v", i, got)
		}
	}
}

// What changed at the name while the run ran is checked again: a link or
// another file put there is refused (exit 2), its target untouched, and no
// temporary file stays; a failing writer leaves nothing either (exit 3).
func TestWriteChecksAgain(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	write(t, secret, "keep")
	path := filepath.Join(dir, "r.html")
	f, err := Check("report", path, ours, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteBytes([]byte("<!-- ours -->")); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("link planted: %v", err)
	}
	os.Remove(path)
	write(t, path, "someone else's")
	if err := f.WriteBytes([]byte("<!-- ours -->")); exitcode.Of(err) != exitcode.Usage {
		t.Errorf("file planted: %v", err)
	}
	os.Remove(path)
	err = f.Write(func(w io.Writer) error { w.Write([]byte("half")); return errors.New("collection failed") })
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "not written: collection failed") {
		t.Errorf("failing writer: %v", err)
	}
	if got := entries(t, dir); strings.Join(got, " ") != "secret" {
		t.Errorf("left %v", got)
	}
	if read(t, secret) != "keep" {
		t.Error("the link's target was written")
	}
}

func TestKind(t *testing.T) {
	for m, want := range map[os.FileMode]string{
		os.ModeSymlink: "a symbolic link", os.ModeDir: "a directory", os.ModeNamedPipe: "a FIFO", os.ModeSocket: "a socket",
		os.ModeDevice | os.ModeCharDevice: "a character device", os.ModeDevice: "a block device", 0: "a regular file", os.ModeIrregular: "not a file (?---------)",
	} {
		if got := Kind(m); got != want {
			t.Errorf("Kind(%v) = %q, want %q", m, got, want)
		}
	}
}
