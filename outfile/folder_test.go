package outfile

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// The campaign's capture cases (issue 31): --capture, stall --out.
func TestCheckParentRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	write(t, file, "x")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"", `--capture "": no directory named (name a DIR, or leave --capture out)`},
		{file, "--capture " + file + ": is a regular file, not a directory"},
		{fifo, "--capture " + fifo + ": is a FIFO, not a directory"},
		{link, "--capture " + link + ": is a symbolic link: refused (name the directory itself)"},
		{filepath.Join(dir, "none"), "--capture " + filepath.Join(dir, "none") + ": no such directory"},
		{"/proc", "--capture /proc: cannot make a folder in it: "},
	} {
		p, err := CheckParent("capture", c.path)
		if p != nil || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(exitcode.Message(err), c.want) {
			t.Errorf("CheckParent(%q) = %v, exit %d %q\nwant exit 2 %q", c.path, p, exitcode.Of(err), exitcode.Message(err), c.want)
		}
	}
	if got := entries(t, other); len(got) != 0 {
		t.Errorf("wrote through the link: %v", got)
	}
	if got := entries(t, dir); strings.Join(got, " ") != "fifo file link" {
		t.Errorf("left %v", got)
	}
}

// New never uses a folder someone made: 4,000 folders of the names the
// tool used to make, each with settings.json linked to a root-only file,
// are left as they are and the link's target is untouched; the folder is
// 0700 and its files 0600 whatever the umask, each a new file.
func TestNewFolder(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "root-only")
	write(t, secret, "secret\n")
	now := time.Now().UTC()
	for i := 0; i < 4000; i++ {
		d := filepath.Join(dir, fmt.Sprintf("stall-100-%s", now.Add(time.Duration(i)*time.Millisecond).Format("20060102T150405.000Z")))
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(d, "settings.json")); err != nil {
			t.Fatal(err)
		}
	}
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	p, err := CheckParent("capture", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f, err := p.New("stall-100-" + now.Format("20060102T150405.000Z"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !regexp.MustCompile(`/stall-100-\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{16}$`).MatchString(f.Path) {
		t.Errorf("folder %s", f.Path)
	}
	for _, rel := range []string{"settings.json", "threads/2452/stack", "threads/2452/stat", "threads/2453/stack"} {
		if err := f.WriteFile(rel, []byte("x\n")); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	if read(t, secret) != "secret\n" {
		t.Error("the root-only file was written")
	}
	filepath.Walk(f.Path, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = os.ModeDir | 0o700
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
		return nil
	})
	// A file that is there already (a link put in the folder) is refused,
	// as are names outside it.
	if err := os.Symlink(secret, filepath.Join(f.Path, "planted")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"planted", "settings.json", "../escape", "/etc/x", "threads/../../x", ""} {
		if err := f.WriteFile(rel, []byte("y\n")); err == nil {
			t.Errorf("WriteFile(%q) wrote", rel)
		}
	}
	if read(t, secret) != "secret\n" || read(t, filepath.Join(f.Path, "settings.json")) != "x\n" {
		t.Error("a file was written over")
	}
	if _, err := os.Lstat(filepath.Join(dir, "escape")); err == nil {
		t.Error("wrote outside the folder")
	}
}

// bench --out DIR: a folder of the admin's name, made by the run; one
// that exists (whoever made it) is refused.
func TestCheckNew(t *testing.T) {
	dir := t.TempDir()
	pre := filepath.Join(dir, "pre")
	if err := os.Mkdir(pre, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	write(t, file, "x")
	for _, c := range []struct{ path, want string }{
		{"", `--out "": no folder named (name a DIR that does not exist, or leave --out out)`},
		{pre, "--out " + pre + ": exists (a directory): the results go to a new folder: name one that does not exist"},
		{file, "--out " + file + ": exists (a regular file)"},
		{filepath.Join(dir, "no/r"), "--out " + filepath.Join(dir, "no/r") + ": no directory " + filepath.Join(dir, "no") + " to make it in"},
		{filepath.Join(file, "r"), "--out " + filepath.Join(file, "r") + ": " + file + " is a regular file, not a directory"},
		{"/proc/r", "--out /proc/r: cannot make a folder in /proc: "},
	} {
		n, err := CheckNew("out", c.path)
		if n != nil || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(exitcode.Message(err), c.want) {
			t.Errorf("CheckNew(%q) = %v, exit %d %q\nwant exit 2 %q", c.path, n, exitcode.Of(err), exitcode.Message(err), c.want)
		}
	}
	path := filepath.Join(dir, "results")
	n, err := CheckNew("out", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); strings.Join(got, " ") != "file pre" {
		t.Errorf("CheckNew left %v", got)
	}
	f, err := n.Create()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("a.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, _ := os.Stat(path); st.Mode() != os.ModeDir|0o700 {
		t.Errorf("mode %v", st.Mode())
	}
	// Made by someone else between the check and the run.
	path2 := filepath.Join(dir, "results2")
	n, err = CheckNew("out", path2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path2, 0o777); err != nil {
		t.Fatal(err)
	}
	if f, err := n.Create(); f != nil || exitcode.Of(err) != exitcode.Usage {
		t.Errorf("Create of a folder made meanwhile: %v %v", f, err)
	}
}

// Prune keeps the newest within the count and the size, the oldest
// removed first; what is not ours is left alone.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	p, err := CheckParent("capture", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var made []string
	for i := 0; i < 6; i++ {
		f, err := p.New("stall-100")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WriteFile("a", make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		at := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(f.Path, at, at)
		made = append(made, f.Path)
	}
	// Not ours: another shape of name, a link of our shape, a file.
	write(t, filepath.Join(dir, "stall-100-0123456789abcdef.txt"), "x")
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "stall-100-00000000000000aa")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "stall-100-20260101T000000.000Z"), 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "stall-100-00000000000000bb")
	if os.Geteuid() == 0 {
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(foreign, 65534, 65534)
		old := time.Now().Add(-time.Hour)
		os.Chtimes(foreign, old, old)
	}
	removed, err := p.Prune("stall-100", 4, 1<<20, made[5])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, " ") != made[1]+" "+made[0] {
		t.Errorf("count: removed %v, want the two oldest", removed)
	}
	removed, err = p.Prune("stall-100", 10, 2500, made[5])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, " ") != made[3]+" "+made[2] {
		t.Errorf("size: removed %v, want all but the two newest", removed)
	}
	// The one just made is kept even when alone it is over the size.
	removed, _ = p.Prune("stall-100", 10, 10, made[5])
	if strings.Join(removed, " ") != made[4] {
		t.Errorf("keep: removed %v", removed)
	}
	want := []string{"stall-100-0123456789abcdef.txt", "stall-100-00000000000000aa", "stall-100-20260101T000000.000Z", filepath.Base(made[5])}
	if os.Geteuid() == 0 {
		want = append(want, "stall-100-00000000000000bb")
	}
	sort.Strings(want)
	if got := strings.Join(entries(t, dir), " "); got != strings.Join(want, " ") {
		t.Errorf("left %s\nwant %s", got, want)
	}
}
