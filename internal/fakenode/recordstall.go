package fakenode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// RecordStall writes what the stall package's unit tests replay of a VM
// caught stalling: its config and storage.cfg, its command line,
// query-blockstats, query-iothreads, query-block, query-block-jobs and
// query-cpus-fast, and below proc/PID every thread's stat, wchan and
// syscall as procfs gives them; for each thread in state D whose system
// call works on a descriptor (a pool worker in fallocate), that
// descriptor's link (proc/PID/fd/N) and QEMU's root (proc/PID/root), each
// a line "PATH<tab>TARGET" of the file links, never a symlink in the
// repository: a link to / or to the chroot would take any tool that
// follows links (cp, a copy of the module) through the whole machine.
// Only those descriptors: the others say nothing of a stall. The node's
// scratch root is written as /ROOT throughout.
func RecordStall(t testing.TB, dir string, n *Node, v *VM) {
	t.Helper()
	exec := func(cmd string) []byte {
		var out []byte
		err := qmp.Do(context.Background(), n.Paths.QMPSocket(v.VMID), 5*time.Second, func(s qmp.Session) error {
			r, err := s.Exec(cmd, nil)
			out = []byte(r.Raw)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	fix := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), n.Root, "/ROOT")) }
	write := func(p string, b []byte) {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var links []string
	link := func(p, target string) { links = append(links, p+"\t"+string(fix([]byte(target)))+"\n") }
	for src, dst := range map[string]string{n.Paths.VMConfig(v.VMID): strconv.Itoa(v.VMID) + ".conf", n.Paths.StorageCfg(): "storage.cfg"} {
		if b, err := os.ReadFile(src); err == nil {
			write(dst, fix(b))
		}
	}
	proc := filepath.Join("/proc", strconv.Itoa(v.Pid))
	raw, _ := os.ReadFile(filepath.Join(proc, "cmdline"))
	write("cmdline", fix(raw))
	write("query-blockstats.json", fix(exec("query-blockstats")))
	write("query-iothreads.json", exec("query-iothreads"))
	write("query-block.json", fix(exec("query-block")))
	write("query-block-jobs.json", exec("query-block-jobs"))
	write("query-cpus-fast.json", exec("query-cpus-fast"))
	rel := filepath.Join("proc", strconv.Itoa(v.Pid))
	tasks, _ := os.ReadDir(filepath.Join(proc, "task"))
	rootDone := false
	for _, task := range tasks {
		files := map[string][]byte{}
		for _, f := range []string{"stat", "wchan", "syscall"} {
			if b, err := os.ReadFile(filepath.Join(proc, "task", task.Name(), f)); err == nil {
				files[f] = b
				write(filepath.Join(rel, "task", task.Name(), f), b)
			}
		}
		st := string(files["stat"])
		if i := strings.LastIndexByte(st, ')'); i < 0 || !strings.HasPrefix(st[i+1:], " D ") {
			continue
		}
		f := strings.Fields(string(files["syscall"]))
		if len(f) < 2 || f[0] == "-1" || f[0] == "running" {
			continue
		}
		fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 31)
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join(proc, "fd", strconv.FormatUint(fd, 10))); err == nil {
			link(filepath.Join(rel, "fd", strconv.FormatUint(fd, 10)), target)
		}
		if !rootDone {
			if target, err := os.Readlink(filepath.Join(proc, "root")); err == nil {
				link(filepath.Join(rel, "root"), target)
				rootDone = true
			}
		}
	}
	write("links", []byte(strings.Join(links, "")))
}
