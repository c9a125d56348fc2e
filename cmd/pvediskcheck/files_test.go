package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// (issue 21) A VM config (or storage.cfg) that is a symlink to a FIFO used
// to hang check, check --all and cache for good, deaf to SIGINT and
// SIGTERM; one linked to /dev/zero grew memory without limit; one linked
// to a file outside --root was read as root and a line of it echoed; a 5
// MB line printed "0 finding(s)" and a raw "bufio.Scanner: token too
// long". Each is now one line naming the file, exit 2, at once, and
// check --all still checks the other VMs.
func TestHostileConfigFiles(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "etc/pve/nodes/pve1/qemu-server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nodes/pve1/qemu-server", filepath.Join(root, "etc/pve/qemu-server")); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(target, name string) {
		t.Helper()
		os.Remove(name)
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(root, "etc/pve/fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "shadow")
	write(secret, "root:$y$j9T$secret:19000:0:99999:7:::\n")
	write(filepath.Join(root, "etc/pve/storage.cfg"), "dir: local\n\tpath /var/lib/vz\n\tcontent images\n")
	write(filepath.Join(dir, "100.conf"), "memory: 512\nscsi0: local:100/vm-100-disk-0.raw,cache=unsafe,size=1G\n")
	conf := func(vmid string) string { return filepath.Join(root, "etc/pve/qemu-server", vmid+".conf") }
	symlink(fifo, filepath.Join(dir, "101.conf"))
	symlink("/dev/zero", filepath.Join(dir, "102.conf"))
	symlink(secret, filepath.Join(dir, "103.conf"))
	write(filepath.Join(dir, "104.conf"), "memory: 512\nname: "+strings.Repeat("x", 5<<20)+"\n")
	why := map[string]string{
		"101": conf("101") + ": is a FIFO, not a regular file",
		"102": conf("102") + ": leads to /dev/zero, outside " + filepath.Join(root, "etc/pve") + ": refused",
		"103": conf("103") + ": leads to " + secret + ", outside " + filepath.Join(root, "etc/pve") + ": refused",
		"104": conf("104") + " line 2: longer than 4 MiB: not a file Proxmox wrote",
	}
	timed := func(args ...string) (string, string, int) {
		t.Helper()
		t0 := time.Now()
		out, errs, code := runCLI(t, append([]string{"--root", root}, args...)...)
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: took %s", args, d)
		}
		if strings.Contains(out+errs, "secret") || strings.Contains(out+errs, "token too long") {
			t.Errorf("%s: echoed what it must not:\n%s%s", args, out, errs)
		}
		return out, errs, code
	}
	for _, vmid := range []string{"101", "102", "103", "104"} {
		for _, cmd := range []string{"check", "cache"} {
			out, errs, code := timed(cmd, vmid)
			if code != 2 || errs != "pvediskcheck: VM "+vmid+": "+why[vmid]+"\n" {
				t.Errorf("%s %s: exit %d\n%s%s", cmd, vmid, code, out, errs)
			}
			if cmd == "check" && !strings.HasPrefix(out, "VM "+vmid+": not checked: "+why[vmid]+"\n") {
				t.Errorf("check %s:\n%s", vmid, out)
			}
		}
	}
	// --all: VM 100 is checked (its finding reported), each bad one is its
	// line, exit 2.
	out, errs, code := timed("check", "--all")
	if code != 2 || !strings.Contains(out, "VM 100 (stopped): 1 finding(s)\n  ERROR cache-unsafe scsi0") || strings.Count(errs, "\n") != 1 {
		t.Errorf("check --all: exit %d\n%s%s", code, out, errs)
	}
	if !strings.HasPrefix(errs, "pvediskcheck: VM 101: "+why["101"]+"; VM 102: ") {
		t.Errorf("check --all: %s", errs)
	}
	for vmid, w := range why {
		if !strings.Contains(out, "VM "+vmid+": not checked: "+w+"\n") {
			t.Errorf("check --all, VM %s:\n%s%s", vmid, out, errs)
		}
	}
	// storage.cfg behind a FIFO: every VM needs it; one line naming it.
	symlink(fifo, filepath.Join(root, "etc/pve/storage.cfg"))
	_, errs, code = timed("cache", "100")
	if code != 2 || errs != "pvediskcheck: "+filepath.Join(root, "etc/pve/storage.cfg")+": is a FIFO, not a regular file\n" {
		t.Errorf("storage.cfg a FIFO: exit %d %s", code, errs)
	}
}

// (issue 21) A VM of another node, with pmxcfs's files unreadable: a
// .vmlist with one bad node name used to say "no such VM on this node"
// (exit 2), a .members with one bad IP "pve2 is offline"; both are now exit
// 3 naming the file and the line.
func TestClusterFilesUnreadable(t *testing.T) {
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "cluster", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		members, vmlist, want string
	}{
		{fixture("members-3nodes.json"), strings.Replace(fixture("vmlist.json"), `"380": { "node": "pve2"`, `"380": { "node": "pve2 x"`, 1),
			"pvediskcheck: VM 380: no config on this node, and which node has it is unknown: cannot read /etc/pve/.vmlist: line 6: VM 380: "},
		{strings.Replace(fixture("members-3nodes.json"), `"192.168.1.12"`, `"192.168.1.300"`, 1), fixture("vmlist.json"),
			`pvediskcheck: VM 380 on pve2: how to reach pve2 is unknown: cannot read /etc/pve/.members: line 6: node pve2: ip "192.168.1.300" is not an IP address` + "\n"},
	} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc/pve/qemu-server"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range map[string]string{".members": c.members, ".vmlist": c.vmlist} {
			if err := os.WriteFile(filepath.Join(root, "etc/pve", name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, cmd := range []string{"cache", "check", "top"} {
			out, errs, code := runCLI(t, "--root", root, cmd, "380")
			if code != 3 || !strings.HasPrefix(errs, c.want) || strings.Count(errs, "\n") != 1 || out != "" {
				t.Errorf("%s: exit %d %q, want %q", cmd, code, errs, c.want)
			}
		}
	}
}
