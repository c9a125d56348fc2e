package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree lists every path below dir with its mode (what a refused run must
// leave as it was).
func tree(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		b := ""
		if info.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			b = string(c)
		}
		out = append(out, p+" "+info.Mode().String()+" "+b)
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// The campaign's output cases (issue 31, groups report and stall
// capture): every output path of every command is checked before anything
// is measured or read: a file that is not a report of ours (a stand-in for
// /etc/passwd), a FIFO (bench hung on it past SIGINT), a directory, an
// unwritable path (found after minutes of writes), a link, a missing
// directory, an empty name (taken as "no report" before), a regular file
// as a folder, a folder that exists as bench --out. Each is one line
// naming the flag and the path, exit 2, at once, nothing written.
func TestOutputPathsRefused(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/pve/qemu-server"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), []byte("dir: local\n\tpath /var/lib/vz\n\tcontent images\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(passwd, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	subLink := filepath.Join(dir, "sublink")
	if err := os.Symlink(sub, subLink); err != nil {
		t.Fatal(err)
	}
	// A textfile directory whose pvediskcheck.prom is not ours, one where
	// it is a link, one where it is a FIFO.
	prom := map[string]string{}
	for _, k := range []string{"foreign", "link", "fifo"} {
		d := filepath.Join(dir, "prom-"+k)
		os.Mkdir(d, 0o755)
		p := filepath.Join(d, "pvediskcheck.prom")
		switch k {
		case "foreign":
			os.WriteFile(p, []byte("node_foo 1\n"), 0o644)
		case "link":
			os.Symlink(passwd, p)
		case "fifo":
			syscall.Mkfifo(p, 0o644)
		}
		prom[k] = d
	}
	lab37 := filepath.Join(fioLab, "lab37")
	compare := func(report string) []string {
		return []string{"fio", "compare", "--dir", lab37, "--report", report, "scsi", "sata"}
	}
	bench := func(flags ...string) []string {
		return append([]string{"--root", root, "bench", "370", "scsi1"}, flags...)
	}
	before := tree(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		// report
		{compare(passwd), "--report " + passwd + ": exists and is not a file pvediskcheck wrote: refused"},
		{compare(fifo), "--report " + fifo + ": is a FIFO, not a file: refused"},
		{compare(sub), "--report " + sub + ": is a directory, not a file: refused"},
		{compare("/proc/r.html"), "--report /proc/r.html: cannot write in /proc: "},
		{compare(link), "--report " + link + ": is a symbolic link: refused"},
		{compare(filepath.Join(dir, "none", "r.html")), "--report " + filepath.Join(dir, "none", "r.html") + ": no directory " + filepath.Join(dir, "none") + " to write it in"},
		{compare(""), `--report "": no file named`},
		{bench("--report", passwd), "--report " + passwd + ": exists and is not a file pvediskcheck wrote: refused"},
		{bench("--report", fifo), "--report " + fifo + ": is a FIFO, not a file: refused"},
		{bench("--report", "/proc/r.html"), "--report /proc/r.html: cannot write in /proc: "},
		{bench("--report", ""), `--report "": no file named`},
		// bench --out
		{bench("--out", ""), `--out "": no folder named`},
		{bench("--out", sub), "--out " + sub + ": exists (a directory): the results go to a new folder: name one that does not exist"},
		{bench("--out", passwd), "--out " + passwd + ": exists (a regular file)"},
		{bench("--out", "/proc/results"), "--out /proc/results: cannot make a folder in /proc: "},
		{bench("--out", filepath.Join(passwd, "r")), "--out " + filepath.Join(passwd, "r") + ": " + passwd + " is a regular file, not a directory"},
		// stall capture
		{[]string{"--root", root, "stall", "370", "--out", passwd}, "--out " + passwd + ": is a regular file, not a directory"},
		{[]string{"--root", root, "stall", "370", "--out", ""}, `--out "": no directory named`},
		{[]string{"--root", root, "stall", "370", "--out", subLink}, "--out " + subLink + ": is a symbolic link: refused"},
		{[]string{"--root", root, "stall", "370", "--out", "/proc"}, "--out /proc: cannot make a folder in it: "},
		{[]string{"--root", root, "top", "--count", "1", "--capture", passwd}, "--capture " + passwd + ": is a regular file, not a directory"},
		{[]string{"--root", root, "top", "--count", "1", "--capture", ""}, `--capture "": no directory named`},
		{[]string{"--root", root, "top", "--count", "1", "--capture", fifo}, "--capture " + fifo + ": is a FIFO, not a directory"},
		{[]string{"--root", root, "metrics", "--capture", passwd}, "--capture " + passwd + ": is a regular file, not a directory"},
		{[]string{"--root", root, "metrics", "--capture", filepath.Join(dir, "none")}, "--capture " + filepath.Join(dir, "none") + ": no such directory"},
		// metrics --textfile
		{[]string{"--root", root, "metrics", "--textfile", passwd}, "--textfile " + passwd + ": is a regular file, not a directory"},
		{[]string{"--root", root, "metrics", "--textfile", subLink}, "--textfile " + subLink + ": is a symbolic link: refused"},
		{[]string{"--root", root, "metrics", "--textfile", prom["foreign"]}, "--textfile " + prom["foreign"] + "/pvediskcheck.prom: exists and is not a file pvediskcheck wrote: refused"},
		{[]string{"--root", root, "metrics", "--textfile", prom["link"]}, "--textfile " + prom["link"] + "/pvediskcheck.prom: is a symbolic link: refused"},
		{[]string{"--root", root, "metrics", "--textfile", prom["fifo"]}, "--textfile " + prom["fifo"] + "/pvediskcheck.prom: is a FIFO, not a file: refused"},
		{[]string{"--root", root, "metrics", "--textfile", "/proc"}, "--textfile /proc/pvediskcheck.prom: cannot write in /proc: "},
	} {
		start := time.Now()
		out, errs, code := runCLI(t, c.args...)
		if code != 2 || !strings.HasPrefix(errs, "pvediskcheck: "+c.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%q: exit %d\n%s%s\nwant exit 2: pvediskcheck: %s", c.args, code, out, errs, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q took %s", c.args, d)
		}
		if after := tree(t, dir); after != before {
			t.Errorf("%q changed %s:\n%s\nwas\n%s", c.args, dir, after, before)
		}
	}
}

// fio compare --report writes over a report of its own, and only that: a
// second run replaces the first page (mode 0644, nothing left beside it).
func TestReportReplacesOurs(t *testing.T) {
	lab37 := filepath.Join(fioLab, "lab37")
	dir := t.TempDir()
	f := filepath.Join(dir, "cmp.html")
	for i := 0; i < 2; i++ {
		if _, errs, code := runCLI(t, "fio", "compare", "--dir", lab37, "--report", f, "scsi", "sata"); code != 1 || errs != "" {
			t.Fatalf("run %d: exit %d %s", i, code, errs)
		}
	}
	ents, _ := os.ReadDir(dir)
	st, err := os.Stat(f)
	if err != nil || len(ents) != 1 || st.Mode().Perm() != 0o644 {
		t.Errorf("%v %v %v", ents, st, err)
	}
}
