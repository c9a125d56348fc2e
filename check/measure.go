package check

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/backupcfg"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Input is what the rules read of one VM: its resolved disks (package disk)
// and everything measured for it before any rule runs (measure), each
// measurement bounded as it is made (node.Within, the node's Runner and its
// timeout). A rule reads an Input and writes findings and notes: it opens,
// stats, runs and asks nothing.
type Input struct {
	set *disk.Set
	v   *vm.VM
	// next is the config as the next start applies it; defaults, ostype
	// and scsihw follow from it.
	next     map[string]string
	defaults qemuserver.VMDefaults
	ostype   string
	scsihw   string
	// macOS is the evidence that the guest is macOS ("" when none): the
	// config's args giving QEMU an Apple SMC.
	macOS string
	// here is this node's name (node.Paths.NodeName), "" when unknown;
	// vmConfig is the VM's config file below the node's root.
	here, vmConfig string
	// os is what the guest agent says the guest runs (nil: not asked, or
	// no answer).
	os *guestOS
	// pol is the VM's policy judgement (nil without --policy).
	pol *policyRun
	// lines are the lines the disk rules judge, by disk id (measureLine).
	lines map[string]*line
	// pools are the thin pools under the VM's disks by storage id, read
	// through the run's cache; nil without one.
	pools map[string]poolRead
	// fs are the filesystems under the disks io-error names, by disk id
	// (storageUse's statfs).
	fs map[string]fsRead
	// freeze is the guest's freeze state (vm.VM.AskFreeze).
	freeze *vm.Freeze
	// qemu is the binary a running VM's QEMU runs (readBinary), judged
	// against advisories (advisory.Known).
	qemu       *advisory.Binary
	advisories advisory.Table
	// stalled: disk-stalled was looked at (--stall-after on a running VM);
	// verdicts are stall.Detect's.
	stalled  bool
	verdicts []stall.Verdict
	// backups is the backup configuration (vzdump.conf, jobs.cfg),
	// backupsErr why it could not be read.
	backups    backupcfg.Config
	backupsErr error
	// showcmd is `qm showcmd VMID --pretty` with --next-start; nil without.
	showcmd *cmdOut
}

// line is a disk's line as the next start uses it, what the disk rules
// that declare Line judge: the pending line where [PENDING] changes the
// disk, else the config's, and a config line Proxmox refuses for its ssd=
// or its limits as its fix repairs it.
type line struct {
	drv      *qemuserver.Drive // nil: Proxmox ignores the line (ignored)
	settings qemuserver.DiskSettings
	stor     *qemuserver.Storage
	path     string // the volume of settings as this process opens it
	// ignored: the config's line does not parse, and no repair of its
	// ssd= or limits makes it one Proxmox takes.
	ignored bool
	// ssd: Proxmox drops the config's line for its ssd= (VirtIO Block has
	// none); drv is the line without it.
	ssd bool
	// image is the stat of path where discard-ignored-on-thin needs it;
	// nil elsewhere.
	image *imageStat
}

// imageStat is a raw image's stat (storage.StatImage): err, or whether it
// is a regular file and sparse.
type imageStat struct {
	err             error
	regular, sparse bool
}

type poolRead struct {
	p   *thinpool.Pool
	err error
}

type fsRead struct {
	total, free int64
	err         error
}

type cmdOut struct {
	raw []byte
	err error
}

// measure reads, for the VM of set, everything its rules need, in the
// order the checks used to read it themselves: the stall look right after
// the exchange that read the counters, the QEMU binary, the policy's
// user.cfg, the guest's OS; the judged lines (a repaired line's block
// device test, a raw image's sparse test), the storage use of the disks
// an I/O error flags, the thin pools; the guest's freeze state, the zvols'
// properties, the backup configuration and, with --next-start, qm showcmd.
// What a measurement says of the VM itself (a policy it could not read, an
// agent answer not asked for) goes to out as it did.
func measure(ctx context.Context, n node.Node, set *disk.Set, o Options, pools *thinpool.Cache, out *VMResult) *Input {
	v := set.VM
	next := v.Config.Next()
	in := &Input{set: set, v: v, next: next, defaults: qemuserver.VMDefaultsFor(next), ostype: next["ostype"],
		scsihw: qemuserver.SCSIHW(next), macOS: macOSEvidence(next["args"]), here: n.Paths.NodeName(), vmConfig: n.Paths.VMConfig(v.VMID),
		lines: map[string]*line{}, fs: map[string]fsRead{}}
	if in.stalled = o.StallAfter > 0 && v.Running; in.stalled {
		in.verdicts = detectStalls(ctx, n, set, o.StallAfter)
	}
	in.qemu = readBinary(ctx, n, v)
	out.QEMU = in.qemu
	in.pol = judgePolicy(ctx, n, v, o, out)
	var skip *vm.AgentSkip
	in.os, skip = askGuestOS(ctx, n, v)
	out.skipped(skip)
	for _, d := range set.Disks {
		if l := measureLine(in, d); l != nil {
			if l.drv != nil && l.judgesImage(v) {
				st, err := storage.StatImage(l.path)
				l.image = &imageStat{err: err}
				if err == nil {
					l.image.regular, l.image.sparse = st.Mode().IsRegular(), storage.Sparse(st)
				}
			}
			in.lines[d.ID] = l
		}
	}
	for _, d := range flagged(set) {
		if _, path := useSource(d, pools != nil); path != "" {
			total, free, err := statfs(ctx, path)
			in.fs[d.ID] = fsRead{total, free, err}
		}
	}
	if used := poolStorages(set); pools != nil {
		in.pools = map[string]poolRead{}
		for _, id := range qemuserver.SortedKeys(used) {
			p, err := pools.Pool(ctx, used[id])
			in.pools[id] = poolRead{p, err}
		}
	}
	in.freeze = v.AskFreeze(ctx, n, n.Timeout)
	out.GuestFreeze = in.freeze
	out.skipped(in.freeze.Skip())
	in.advisories = advisory.Known()
	set.Fill(ctx, n, disk.ZFS, disk.Options{})
	in.backups, in.backupsErr = backupcfg.Read(ctx, n)
	if o.NextStart {
		raw, err := n.Runner.Run(ctx, "qm", "showcmd", strconv.Itoa(v.VMID), "--pretty")
		in.showcmd = &cmdOut{raw, err}
	}
	return in
}

// measureLine picks the line the next start uses and its predicted
// settings; nil when there is none to judge (a disk going away, or only
// running). A config line that does not parse is judged as its fix
// repairs it where that fix is the removal of ssd= (VirtIO Block) or of a
// limit combination Proxmox refuses; else it is ignored. Predicting the
// repaired line stats its path (vm.VM.IsBlockDevice, bounded).
func measureLine(in *Input, d *disk.Disk) *line {
	v := in.v
	if d.ParseError != nil {
		text := v.Config.Main[d.ID]
		if bus, _, _ := qemuserver.SplitDiskKey(d.ID); bus == "virtio" && strings.Contains(","+text, ",ssd=") {
			if drv, err := qemuserver.ParseDrive(d.ID, removeOpt(text, "ssd")); err == nil {
				if s, err := qemuserver.Predict(drv, v.Storages, in.defaults, v.IsBlockDevice); err == nil {
					l := repaired(in.set, d, drv, s)
					l.ssd = true
					return l
				}
			}
		}
		// Refused only for its limit combination: limit-invalid fixes
		// it, and the other rules still apply to the line.
		drv, err := qemuserver.ParseDriveSchema(d.ID, text)
		if err != nil || len(drv.LimitProblems()) == 0 || d.PendingDrive != nil {
			return &line{ignored: true}
		}
		s, err := qemuserver.Predict(drv, v.Storages, in.defaults, v.IsBlockDevice)
		if err != nil {
			return &line{ignored: true}
		}
		return repaired(in.set, d, drv, s)
	}
	switch {
	case d.PendingDelete:
		return nil
	case d.PendingDrive != nil && d.Pending != nil:
		return &line{drv: d.PendingDrive, settings: *d.Pending, stor: d.PendingStorage, path: d.NextPath}
	case d.Drive != nil && d.Configured != nil:
		return &line{drv: d.Drive, settings: *d.Configured, stor: d.Storage, path: d.NextPath}
	}
	return nil
}

// repaired is a line Proxmox refuses as drv, the line repaired, with the
// settings predicted for it, resolved as the VM's disks are.
func repaired(set *disk.Set, d *disk.Disk, drv *qemuserver.Drive, s qemuserver.DiskSettings) *line {
	rd := set.Resolved(&vm.Disk{ID: d.ID, Drive: drv, Configured: &s})
	return &line{drv: drv, settings: s, stor: rd.Storage, path: rd.NextPath}
}

// judgesImage: discard-ignored-on-thin reads the image's stat, a raw
// image of a writable disk with discard off on a storage whose space
// comes back per image (a sparse file gives it back, a full one does not),
// where iso-without-media has not ended the disk's judgement.
func (l *line) judgesImage(v *vm.VM) bool {
	if l.drv.Kind() != qemuserver.KindDisk || l.settings.ReadOnly || l.drv.Opts["discard"] == "on" ||
		l.stor == nil || l.stor.Facts().Discard != storagetype.DiscardPerImage || l.settings.Format == "qcow2" {
		return false
	}
	return !v.Storages.IsISO(l.drv.Volume) || l.drv.Opts["media"] != ""
}

// flagged are the disks whose io-status io-error names: a running VM's
// disks QEMU reports failed or nospace.
func flagged(set *disk.Set) []*disk.Disk {
	v := set.VM
	if !v.Running || v.Status == "" {
		return nil
	}
	var out []*disk.Disk
	for _, d := range set.Disks {
		if d.Live != nil && (d.Live.IOStatus == ioStatusFailed || d.Live.IOStatus == ioStatusNoSpace) {
			out = append(out, d)
		}
	}
	return out
}

// useSource is where a disk's storage use is read: its thin pool (through
// the run's cache, when there is one), else a statfs of its path for a
// running file volume; neither for the rest.
func useSource(d *disk.Disk, cache bool) (pool *qemuserver.Storage, statfsPath string) {
	_, s := d.Now()
	if thinpool.IsPool(s) && cache {
		return s, ""
	}
	if d.Running != nil && (s != nil && s.Facts().Layout == storagetype.LayoutFiles || s == nil && d.Running.Driver == "file") {
		return nil, d.Path
	}
	return nil, ""
}

// poolStorages are the thin pool storages of the VM's disks (the main
// section's and [PENDING]'s), by id.
func poolStorages(set *disk.Set) map[string]*qemuserver.Storage {
	used := map[string]*qemuserver.Storage{}
	for _, d := range set.Disks {
		for _, s := range []*qemuserver.Storage{d.Storage, d.PendingStorage} {
			if thinpool.IsPool(s) {
				used[s.ID] = s
			}
		}
	}
	return used
}

// statfsTimeout bounds statfs on a storage path: an NFS or CIFS mount that
// stalls must not hang the run (STYLE: calls that can hang are bounded).
const statfsTimeout = 2 * time.Second

// statfs reads a filesystem's size and the space an unprivileged writer
// can still use, within statfsTimeout.
func statfs(ctx context.Context, path string) (total, free int64, err error) {
	st, err := node.Within(ctx, statfsTimeout, func() (st unix.Statfs_t, err error) {
		err = unix.Statfs(path, &st)
		return st, err
	})
	switch {
	case node.GaveUp(err):
		return 0, 0, fmt.Errorf("no answer within %s", statfsTimeout)
	case err != nil:
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, nil
}
