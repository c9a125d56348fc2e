package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Mode is how a disk is written.
type Mode string

const (
	// Raw writes the guest's block device itself (Lab 19's way): only a
	// blank, unmounted, non-boot device, or one named with --destroy.
	Raw Mode = "raw"
	// File writes a test file on a mounted filesystem of the disk, removed
	// afterwards.
	File Mode = "file"
)

// TestDirName is the folder file mode creates in the mount point (mkdir,
// which fails on anything already there, a symlink too), and TestFileName
// the test file fio writes in it. Only root can add to or swap a 0700
// folder of root's in a mount point only root may rename in, so fio's
// path leads to bench's own file: a name pre-planted as a symlink (to
// another disk's device, say) is never followed.
const (
	TestDirName  = ".pvediskcheck-bench"
	TestFileName = "test.fio"
)

// ProbeTimeout bounds each guest check of a disk (the probe, the first
// MiB's read, the folder check): a guest whose disk hangs blkid is not
// waited for.
const ProbeTimeout = 30 * time.Second

// HeadBytes is how much of a device is read to see that it is blank: past
// the GPT (34 sectors), LVM's label (sector 1), md 1.1/1.2 (0, 4 KiB) and
// every filesystem superblock blkid looks for near the start.
const HeadBytes = 1 << 20

// Target is what fio writes for one disk.
type Target struct {
	Disk   string `json:"disk"`
	Device string `json:"guest_device"`
	Mode   Mode   `json:"mode"`
	Path   string `json:"path"` // the device, or the test file
	Mount  string `json:"mount,omitempty"`
	// Dir is file mode's folder (TestDirName in Mount).
	Dir string `json:"test_dir,omitempty"`
	// Accepted are the probe's lines (ProbeLines) --destroy accepted:
	// each fio run's guard refuses any other (for a blank disk, any).
	Accepted []string `json:"-"`
	// Found is what the checks found on a raw device that --destroy let
	// bench write over anyway.
	Found []string `json:"found_overridden,omitempty"`
}

// Placement is what bench decides a target from.
type Placement struct {
	Disk   string
	Seen   guestdisk.Seen // the guest's device and mounts of the disk
	Boot   bool           // a boot disk of the VM's config
	FileIn []string       // --file-in mount points (any disk's)
	// Destroy: --destroy named this disk.
	Destroy bool
	// FreeBytes is the free space of each mounted filesystem (from
	// guest-get-fsinfo), -1 when the agent did not say.
	FreeBytes map[string]int64
}

// Place decides the target of a disk: file mode on its one mounted
// filesystem (or the --file-in one), else raw after Probe found the device
// blank. Refusals are exit 2 naming the disk and what was found.
func Place(ctx context.Context, a qmp.Agent, p Placement, size int64) (Target, error) {
	t := Target{Disk: p.Disk, Device: p.Seen.Device}
	if t.Device == "" {
		return t, exitcode.Unreachablef("%s: the guest agent did not place this disk on a guest device (guest-get-disks, guest-get-fsinfo): nothing written", p.Disk)
	}
	var in []string
	for _, m := range p.FileIn {
		if slices.Contains(p.Seen.Mounts, m) {
			in = append(in, m)
		}
	}
	switch {
	case len(in) > 1:
		return t, exitcode.Usagef("%s: --file-in names %s, all on this disk: name one", p.Disk, strings.Join(in, " and "))
	case len(in) == 0 && len(p.Seen.Mounts) > 1:
		return t, exitcode.Usagef("%s (%s) has filesystems mounted at %s: name one with --file-in MOUNTPOINT (nothing written)",
			p.Disk, t.Device, strings.Join(p.Seen.Mounts, ", "))
	case len(in) == 0 && len(p.Seen.Mounts) == 1:
		in = p.Seen.Mounts
	}
	if len(in) == 1 {
		if p.Destroy {
			return t, exitcode.Usagef("%s (%s) is mounted at %s: --destroy does not write a mounted device; unmount it first, or drop --destroy to test a file there",
				p.Disk, t.Device, in[0])
		}
		t.Mode, t.Mount, t.Dir = File, in[0], path.Join(in[0], TestDirName)
		t.Path = path.Join(t.Dir, TestFileName)
		free, ok := p.FreeBytes[in[0]]
		switch {
		case !ok || free < 0:
			return t, exitcode.Unreachablef("%s: the guest agent does not say how much of %s is free (guest-get-fsinfo): the test file's %d MiB are not written blind (nothing written)",
				p.Disk, in[0], size>>20)
		case free < size+size/10:
			return t, exitcode.Usagef("%s: %s has %d MiB free, the test file needs %d MiB and a tenth more: give a smaller --size (nothing written)",
				p.Disk, in[0], free>>20, size>>20)
		}
		return t, CheckFolder(ctx, a, t, false)
	}
	t.Mode, t.Path = Raw, t.Device
	found, lines, err := probe(ctx, a, t.Device)
	if err != nil {
		return t, err
	}
	if inUse := InUse(lines); len(inUse) > 0 && p.Destroy {
		return t, exitcode.Usagef("%s (%s in the guest) is in use: %s. --destroy does not write a device in use: unmount it, swapoff it or deactivate what holds it first (nothing written)",
			p.Disk, t.Device, strings.Join(ProbeFindings(strings.Join(inUse, "\n")), "; "))
	}
	t.Accepted = lines
	if p.Boot {
		found = append([]string{"a boot disk of the VM (boot: in the config)"}, found...)
	}
	if len(found) > 0 {
		if !p.Destroy {
			return t, exitcode.Usagef("%s (%s in the guest) is not blank: %s. Nothing was written. fio would overwrite the device: "+
				"use a disk added for the test, or --destroy %s to write over it", p.Disk, t.Device, strings.Join(found, "; "), p.Disk)
		}
		t.Found = found
	}
	return t, nil
}

// probeFn is a shell function reporting, for the device in $1: blkid's
// low-level probe (superblocks and partition tables, not its cache),
// partitions, holders (LVM, dm, md on it), swap and mounts of it or its
// partitions.
const probeFn = `probe() { d=$1; n=${d##*/}
blkid -p -o export "$d"; echo "pvediskcheck-blkid-exit=$?"
for p in /sys/block/$n/$n*; do [ -e "$p/partition" ] && echo "pvediskcheck-partition=${p##*/}"; done
for h in /sys/block/$n/holders/*; do [ -e "$h" ] && echo "pvediskcheck-holder=${h##*/}"; done
while read -r f rest; do case "$f" in "$d"|"$d"[0-9]*|"$d"p[0-9]*) echo "pvediskcheck-swap=$f";; esac; done < /proc/swaps
while read -r f m rest; do case "$f" in "$d"|"$d"[0-9]*|"$d"p[0-9]*) echo "pvediskcheck-mount=$f $m";; esac; done < /proc/mounts
}`

const probeScript = probeFn + "\nprobe \"$1\"; exit 0"

// ProbeArgv is the guest program and arguments that probe dev.
func ProbeArgv(dev string) (string, []string) { return "sh", []string{"-c", probeScript, "sh", dev} }

// Probe reads in the guest what is on a device: ProbeFindings of the
// probe script's output, then, when that found nothing, whether the first
// HeadBytes are all zero (guest-file-read: a short or failed read proves
// nothing and fails). Nothing is written. Each exchange is bounded by
// ProbeTimeout.
func Probe(ctx context.Context, a qmp.Agent, dev string) ([]string, error) {
	found, _, err := probe(ctx, a, dev)
	return found, err
}

func probe(ctx context.Context, a qmp.Agent, dev string) (found, lines []string, err error) {
	path, args := ProbeArgv(dev)
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	st, err := a.Run(pctx, path, args, nil, 100*time.Millisecond)
	if err != nil {
		return nil, nil, exitcode.Wrap(exitcode.Unreachable, "checking "+dev+" in the guest", err)
	}
	if !st.OK() {
		return nil, nil, exitcode.Unreachablef("checking %s in the guest: sh exited %d: %s", dev, st.ExitCode, clip(st.Stderr))
	}
	found, lines = ProbeFindings(string(st.Stdout)), ProbeLines(string(st.Stdout))
	if len(found) > 0 {
		return found, lines, nil
	}
	hctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	head, err := ReadHead(hctx, a, dev, HeadBytes)
	if err != nil {
		return nil, nil, exitcode.Wrap(exitcode.Unreachable, "reading the first MiB of "+dev+" in the guest (guest-file-read): it is not proved blank, nothing written", err)
	}
	if i := bytes.IndexFunc(head, func(r rune) bool { return r != 0 }); i >= 0 {
		return []string{fmt.Sprintf("data in its first MiB (byte %d is not zero) without a signature blkid knows: "+
			"data of an earlier benchmark, or of a tool blkid does not know", i)}, lines, nil
	}
	return nil, lines, nil
}

// ProbeLines are the probe output's lines that say something is on the
// device (blkid's TYPE and PTTYPE, partitions, holders, swap, mounts, a
// blkid that failed): what each fio run's guard compares with.
func ProbeLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "pvediskcheck-blkid-exit=0", l == "pvediskcheck-blkid-exit=2":
		case strings.HasPrefix(l, "TYPE="), strings.HasPrefix(l, "PTTYPE="), strings.HasPrefix(l, "pvediskcheck-"):
			lines = append(lines, l)
		}
	}
	return lines
}

// InUse are the lines of ProbeLines that say the device is in use now
// (mounted, swap, held by LVM, dm or md).
func InUse(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, k := range []string{"pvediskcheck-mount=", "pvediskcheck-swap=", "pvediskcheck-holder="} {
			if strings.HasPrefix(l, k) {
				out = append(out, l)
			}
		}
	}
	return out
}

// ProbeFindings reads the probe script's output: each thing found, as a
// phrase; none for a blank device.
func ProbeFindings(out string) []string {
	var found []string
	vals := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "pvediskcheck-partition":
			found = append(found, "partition "+v)
		case "pvediskcheck-holder":
			found = append(found, "held by "+v+" (LVM, device-mapper or RAID in use on it)")
		case "pvediskcheck-swap":
			found = append(found, "swap in use on "+v)
		case "pvediskcheck-mount":
			found = append(found, "mounted: "+v)
		case "pvediskcheck-blkid-exit":
			switch v {
			case "0", "2": // found something; nothing found
			case "127":
				found = append(found, "blkid is not in the guest (util-linux): signatures cannot be checked")
			default:
				found = append(found, "blkid -p exited "+v+" (ambivalent or failed probe)")
			}
		default:
			vals[k] = v
		}
	}
	var sig []string
	if v := vals["PTTYPE"]; v != "" {
		sig = append(sig, "partition table "+v)
	}
	if v := vals["TYPE"]; v != "" {
		what := map[string]string{"LVM2_member": "LVM physical volume", "linux_raid_member": "RAID member",
			"swap": "swap signature", "crypto_LUKS": "LUKS encryption"}[v]
		if what == "" {
			what = v + " " + strings.ToLower(orDefault(vals["USAGE"], "signature"))
		}
		sig = append(sig, what)
	}
	return append(sig, found...)
}

func orDefault(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// ReadHead reads the first n bytes of a guest file or device
// (guest-file-open, guest-file-read, guest-file-close), one exchange each.
func ReadHead(ctx context.Context, a qmp.Agent, dev string, n int) ([]byte, error) {
	h, err := a.Call(ctx, "guest-file-open", map[string]any{"path": dev, "mode": "r"})
	if err != nil {
		return nil, err
	}
	if h.Type != gjson.Number {
		return nil, fmt.Errorf("guest-file-open answered %s, not a handle", clip([]byte(h.Raw)))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = a.Call(cctx, "guest-file-close", map[string]any{"handle": h.Int()})
	}()
	var out []byte
	for len(out) < n {
		ask := min(n-len(out), 256<<10)
		r, err := a.Call(ctx, "guest-file-read", map[string]any{"handle": h.Int(), "count": ask})
		if err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(r.Get("buf-b64").String())
		if err != nil {
			return nil, fmt.Errorf("guest-file-read: %w", err)
		}
		// qemu-ga reads a whole count (fread) unless the file ends: a
		// shorter answer, or a count that is not the bytes sent, proves
		// nothing of the bytes not sent.
		if c := r.Get("count"); !c.Exists() || c.Int() != int64(len(b)) || len(b) > ask {
			return nil, fmt.Errorf("guest-file-read of %d bytes at %d answered %d bytes (count %s): not a read to trust", ask, len(out), len(b), orDefault(c.Raw, "missing"))
		}
		out = append(out, b...)
		if len(b) < ask {
			return nil, fmt.Errorf("guest-file-read of %d bytes at %d gave %d (eof %v): %s has %d of the %d bytes checked", ask, len(out)-len(b), len(b), r.Get("eof").Bool(), dev, len(out), n)
		}
	}
	return out, nil
}

// BootDisks are the disks the VM's config boots from: boot: order=, else
// the legacy bootdisk:.
func BootDisks(main map[string]string) []string {
	var out []string
	for _, part := range strings.Split(main["boot"], ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "order="); ok {
			for _, dev := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ' ' }) {
				if _, _, ok := qemuserver.SplitDiskKey(dev); ok {
					out = append(out, dev)
				}
			}
			return out
		}
	}
	if d := main["bootdisk"]; d != "" {
		out = append(out, d)
	}
	return out
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
