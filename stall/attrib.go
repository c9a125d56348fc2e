package stall

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Which disk a blocked thread works for, where its name does not say: the
// system call it sleeps in (/proc/PID/task/TID/syscall) and, when that is
// one of the calls QEMU's block layer makes on a descriptor, the file the
// descriptor names (/proc/PID/fd/N, as QEMU sees it: below its own root).
//
// That is how QEMU's thread-pool workers ("worker") are placed on their
// disk. The pool runs every request of an aio=threads disk, and for every
// aio mode, io_uring and native included, the requests file-posix hands it
// whatever the mode: the zero writes detect-zeroes makes of a guest's
// writes of zeroes (Proxmox's default detect-zeroes=on: fallocate
// ZERO_RANGE on an image, BLKZEROOUT on a device), discards (fallocate
// PUNCH_HOLE, BLKDISCARD), flushes (fdatasync) and truncation. Measured on
// QEMU 7.2 and 11.1.3 with the image's filesystem frozen: the zero write
// waits in one worker in state D, in fallocate on the image's descriptor,
// while the io_uring disk's own workers sleep (TestStallGuestZeroes in
// cmd/pvediskcheck, stall/testdata/zeroes-*).
//
// Both files need ptrace access to QEMU (root, or QEMU's own user with
// ptrace allowed); where either cannot be read the worker's disk is not
// known and the older rule stands: a pool worker counts for the
// aio=threads disks, which share the pool (serving).

// fdCalls are the system calls whose first argument is the descriptor
// they work on, by the node's architecture (the syscall file gives the
// number): those QEMU's block layer runs on a disk (file-posix's
// handle_aiocb_* in the pool, lseek for block status, read/write for the
// odd synchronous path). Only these place a thread on a file.
var fdCalls = map[string]map[int]string{
	"amd64": {0: "read", 1: "write", 8: "lseek", 16: "ioctl", 17: "pread64", 18: "pwrite64", 74: "fsync", 75: "fdatasync",
		77: "ftruncate", 277: "sync_file_range", 285: "fallocate", 295: "preadv", 296: "pwritev", 326: "copy_file_range",
		327: "preadv2", 328: "pwritev2"},
	// asm-generic/unistd.h
	"arm64": {29: "ioctl", 46: "ftruncate", 47: "fallocate", 62: "lseek", 63: "read", 64: "write", 67: "pread64",
		68: "pwrite64", 69: "preadv", 70: "pwritev", 82: "fsync", 83: "fdatasync", 84: "sync_file_range",
		285: "copy_file_range", 286: "preadv2", 287: "pwritev2"},
}

// arch is the architecture whose system call numbers the syscall files
// hold: the node's (the tool runs on it). The fixtures' tests set the one
// they were recorded on.
var arch = runtime.GOARCH

// poolComm is the name QEMU gives its thread pool's threads (with
// -name ...,debug-threads=on, which qemu-server passes before QEMU 11,
// and always from QEMU 11 on).
const poolComm = "worker"

// syscallCall reads a syscall file's line (proc(5)): the number of the
// call the thread is in, then its six arguments in hex, the stack and the
// instruction pointer; "-1 SP PC" blocked outside a call (a page fault);
// "running". It returns the call's name and its descriptor when the call
// is one of fdCalls, else why the line places the thread on no file.
func syscallCall(line, arch string) (call string, fd int, why string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", 0, "empty syscall file"
	}
	if f[0] == "running" {
		return "", 0, "running"
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return "", 0, fmt.Sprintf("syscall file %q not understood", clip(line))
	}
	if nr < 0 {
		return "", 0, "blocked outside a system call"
	}
	name, ok := fdCalls[arch][nr]
	if !ok {
		return "", 0, fmt.Sprintf("in system call %d, not one on a disk's descriptor", nr)
	}
	if len(f) < 2 {
		return "", 0, fmt.Sprintf("syscall file %q has no arguments", clip(line))
	}
	a, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil || a > 1<<31-1 {
		return "", 0, fmt.Sprintf("%s's descriptor %q not understood", name, f[1])
	}
	return name, int(a), ""
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// qemuView is a descriptor's link text as QEMU names the file: the link
// is resolved against the reader's root, so a QEMU in a chroot (the test
// tier's QEMU 11.1) shows its root in front; a deleted file's " (deleted)"
// is dropped.
func qemuView(root, link string) string {
	link = strings.TrimSuffix(link, " (deleted)")
	if root != "/" && strings.HasPrefix(link, root+"/") {
		link = link[len(root):]
	}
	return filepath.Clean(link)
}

// place reads what each blocked thread but io_uring's workers (named
// after the thread they serve) works on: its syscall line, the call and
// descriptor, the descriptor's file. QEMU's root is read once, when a
// descriptor is to be read.
func place(ctx context.Context, n node.Node, pid int, task node.ProcDir, ts []Thread) {
	var buf [maxStat]byte
	root, rootErr := "", error(nil)
	for i := range ts {
		t := &ts[i]
		if strings.HasPrefix(t.Comm, "iou-wrk-") {
			continue
		}
		m, err := task.ReadSmall(ctx, strconv.Itoa(t.TID)+"/syscall", buf[:])
		if err != nil {
			t.Unread = "syscall: " + errText(err)
			continue
		}
		t.Syscall = strings.TrimSpace(string(buf[:m]))
		call, fd, why := syscallCall(t.Syscall, arch)
		if why != "" {
			t.Unread = why
			continue
		}
		t.Call, t.FD = call, &fd
		if root == "" && rootErr == nil {
			if root, rootErr = n.Readlink(ctx, filepath.Join(n.Paths.ProcPid(pid), "root")); rootErr == nil && root == "" {
				root = "/"
			}
		}
		if rootErr != nil {
			t.Unread = "QEMU's root: " + errText(rootErr)
			continue
		}
		link, err := n.Readlink(ctx, filepath.Join(n.Paths.ProcPid(pid), "fd", strconv.Itoa(fd)))
		if err != nil {
			t.Unread = fmt.Sprintf("fd %d: %s", fd, errText(err))
			continue
		}
		t.File = qemuView(root, link)
	}
}

// names says whether file (a descriptor's, as QEMU sees it) is the disk's
// image or device: the path QEMU opened, or the node device under it (a
// device path QEMU opened through a link, /dev/pve/vm-100-disk-0, is
// named by the device it leads to, /dev/dm-3).
func (d Disk) names(file string) bool {
	return file != "" && (d.Path != "" && file == filepath.Clean(d.Path) || d.Dev != "" && file == "/dev/"+d.Dev)
}
