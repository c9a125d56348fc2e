// Package vm assembles what is known about one VM on this node: its config
// (main section and [PENDING]), what the running QEMU was started with, and
// what QEMU reports live over QMP, per disk.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/pvesm"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ErrNoConfig means the VMID has no config on this node.
var ErrNoConfig = exitcode.New(exitcode.Usage, "no such VM on this node")

// VM is one VM as far as this node can tell.
type VM struct {
	lock *Lock    // the config's lock, read by Load (Lock)
	jobs jobsSeen // the last block jobs an exchange read (BackupHold)
	// InstalledQEMU is the node's pve-qemu-kvm upstream version (10.1.2),
	// read where the config leaves the machine unpinned: the next start
	// runs that version's machine, -drive before QEMU 10 (PVE 8); "" where
	// not read or unknown (then PVE 9's -blockdev is assumed).
	InstalledQEMU string
	// packages is the reader of dpkg's status the VM was loaded with (the
	// command's one: Packages).
	packages *dpkg.Packages
	VMID     int
	Config   *qemuserver.Config
	Storages qemuserver.Storages
	Running  bool
	// Alive: the running process was read from a real procfs, so it runs
	// on this host now and its QMP socket must answer. False in a copied
	// tree (a support bundle), whose proc/ holds copied files.
	Alive   bool
	Pid     int
	Cmdline *qemuserver.Cmdline // nil when not running
	Disks   []*Disk
	// Blockdev is the generation the VM runs (or, stopped, would start) with.
	Blockdev bool
	// Status is QEMU's run state from query-status (running, paused,
	// io-error, ...), read by FetchLive; "" when not read.
	Status string
	// QEMUPackage is the build the running QEMU states in its QMP greeting
	// ("pve-qemu-kvm_11.0.0-1", package advisory reads it), set by every
	// Ask (FetchLive's included); "" before one, or when QEMU states none.
	QEMUPackage string
	// Unused are the config's unusedN volumes: the VM owns them but attaches
	// none, so they are not disks (thin pools count them).
	Unused []Unused
	// Notes say what the model had to take from the node rather than from
	// storage.cfg: volumes of storages it does not model, resolved through
	// `pvesm path`, and those storages' use from `pvesm status`; and the
	// config lines Proxmox skips with a warning (qemuserver Config.Skipped).
	Notes []string
	paths node.Paths
	// pvesmPath resolves a volume of a storage the model does not know (nil
	// when loaded without a runner: such volumes stay unresolved).
	pvesmPath func(volid string) (string, error)
	resolved  map[string]string // volid -> pvesm path answer
}

// Unused is one unusedN line.
type Unused struct {
	Key    string // unused0
	Volume string // local-lvm:vm-100-disk-3
	// ParseError: the line is one Proxmox refuses (not a volume id).
	ParseError error
}

// Disk is one disk slot: configured, pending, running and live views.
type Disk struct {
	ID         string
	Drive      *qemuserver.Drive // main section; nil if only pending or only running
	ParseError error             // the main-section line is one Proxmox refuses
	// ResolveError: the line parses but its volume could not be placed (a
	// storage storage.cfg lacks, a volume name its plugin refuses, a plugin
	// storage whose `pvesm path` failed). Proxmox accepts such a config and
	// fails when it starts the VM.
	ResolveError error
	// Volume is where the main-section volume lives (nil for none/cdrom or
	// when unresolved); set for every kind, tpmstate0 included.
	Volume        *qemuserver.Volume
	Configured    *qemuserver.DiskSettings
	PendingDrive  *qemuserver.Drive
	Pending       *qemuserver.DiskSettings // next start, when [PENDING] changes this disk
	PendingDelete bool
	Running       *qemuserver.DiskSettings // from the running command line
	Live          *Live                    // from QMP; nil when not asked or not running
}

// Live is what QMP says about a running disk.
type Live struct {
	Inserted bool
	TopNode  string
	Format   qmp.BlockNode
	Protocol qmp.BlockNode
	// WriteCacheProp is the device's configured write-cache (qom-get):
	// on/off under -blockdev, auto under -drive.
	WriteCacheProp string
	// GuestWriteCache is what the guest negotiated (query-block
	// inserted.cache.writeback); it can differ from the configuration.
	GuestWriteCache bool
	WriteCache      string // effective configured write cache: on/off
	// Limits are the I/O limits QEMU applies now (a live change such as
	// 'pvediskcheck limit' or qom-set shows here, not on the command line).
	Limits qemuserver.Limits
	// IOStatus is the device's io-status (qmp.BlockDevice.IOStatus): failed
	// or nospace while an I/O error keeps the VM paused.
	IOStatus string
	// Backing is the format node's backing chain in QEMU's graph, newest
	// layer first (qcow2 overlays, volume chains); nil without one.
	Backing []qmp.DriveChain
}

// Load reads the config and storage.cfg and finds out whether the VM runs.
// Volumes of storages the model does not know stay unresolved (their
// disks carry a ResolveError); LoadNode resolves them through the node.
// No command is run; every file is read through n.ReadFile.
func Load(ctx context.Context, n node.Node, vmid int) (*VM, error) {
	return load(ctx, n, vmid, nil, nil)
}

// LoadNode is Load on a node whose tools can be run: a volume of a storage
// type the model does not know (a third-party plugin) is resolved through
// `pvesm path`, and that storage's use is read from `pvesm status`; both
// are said in Notes.
func LoadNode(ctx context.Context, n node.Node, vmid int) (*VM, error) {
	return LoadNodeWith(ctx, n, vmid, nil)
}

// LoadNodeWith is LoadNode for one of the VMs of a command that loads
// several (check --all, metrics): pkgs is the command's one reader of
// dpkg's status below --root, so the status file is read once for all of
// them (an unpinned machine's installed QEMU, the advisories' installed
// version). nil: the VM gets a reader of its own (VM.Packages).
func LoadNodeWith(ctx context.Context, n node.Node, vmid int, pkgs *dpkg.Packages) (*VM, error) {
	v, err := load(ctx, n, vmid, pkgs, func(volid string) (string, error) { return pvesm.Path(ctx, n.Runner, volid) })
	if err != nil {
		return nil, err
	}
	v.addStorageUse(ctx, n.Runner)
	return v, nil
}

func load(ctx context.Context, n node.Node, vmid int, pkgs *dpkg.Packages, pvesmPath func(string) (string, error)) (*VM, error) {
	p := n.Paths
	if pkgs == nil {
		pkgs = dpkg.NewPackages(n)
	}
	v := &VM{VMID: vmid, paths: p, packages: pkgs, pvesmPath: pvesmPath, resolved: map[string]string{}}
	cfgPath := p.VMConfig(vmid)
	cfg, err := ReadConfig(ctx, n, cfgPath, vmid)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("VM %d: %w (no %s)", vmid, ErrNoConfig, cfgPath)
		case errors.Is(err, qemuserver.ErrParse):
			return nil, err
		case errors.Is(err, node.ErrBadFile), errors.Is(err, qemuserver.ErrLineTooLong):
			return nil, fmt.Errorf("VM %d: %w", vmid, err)
		case errors.Is(err, os.ErrPermission), exitcode.Of(err) == exitcode.Unreachable:
			return nil, exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d", vmid), err)
		}
		return nil, exitcode.Wrap(exitcode.Usage, fmt.Sprintf("VM %d: %s is not a readable VM config", vmid, cfgPath), err)
	}
	v.Config = cfg
	// What Proxmox skips with a warning is said, and the rest is checked.
	v.Notes = append(v.Notes, cfg.Skipped...)
	// A dropped line that names a disk: the VM starts without it (check
	// makes each an error finding instead of this note).
	v.Notes = append(v.Notes, cfg.DroppedDisks...)
	v.lock = v.readLock(ctx, n)
	var skipped []string
	if v.Storages, skipped, err = ReadStorages(ctx, n); err != nil {
		return nil, err
	}
	v.Notes = append(v.Notes, skipped...)
	if b, err := n.ReadFile(ctx, p.Join("/etc/pve/ceph.conf")); err == nil {
		if fsid, ok := qemuserver.ParseCephFSID(b); ok {
			v.Storages.SetCephFSID(fsid)
		}
	}
	if v.Pid, v.Cmdline, err = runningProcess(ctx, n, vmid); err != nil {
		return nil, fmt.Errorf("VM %d: %w", vmid, err)
	}
	v.Running = v.Cmdline != nil
	v.Alive = v.Running && isProcfs(p.Proc)
	if !qemuserver.MachinePinned(cfg.Main) || !qemuserver.MachinePinned(cfg.Next()) {
		v.InstalledQEMU = installedQEMU(ctx, pkgs)
	}
	v.Blockdev = qemuserver.VMDefaultsAt(cfg.Main, v.InstalledQEMU).Blockdev
	if v.Running {
		v.Blockdev = v.Cmdline.Blockdev || len(v.Cmdline.Disks) == 0 && v.Blockdev
	}
	v.buildDisks()
	return v, nil
}

// ReadConfig reads and parses a VM config file of the node.
func ReadConfig(ctx context.Context, n node.Node, path string, vmid int) (*qemuserver.Config, error) {
	b, err := n.ReadFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return qemuserver.ParseConfigFile(b, path, vmid)
}

// ReadStorages reads the node's storage.cfg; a missing file is an empty
// set (a node without storages of its own). skipped names the lines
// Proxmox skips with a warning (qemuserver.ParseStoragesSkipped).
func ReadStorages(ctx context.Context, n node.Node) (st qemuserver.Storages, skipped []string, err error) {
	b, err := n.ReadFile(ctx, n.Paths.StorageCfg())
	if errors.Is(err, os.ErrNotExist) {
		return qemuserver.Storages{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return qemuserver.ParseStoragesSkipped(bytes.NewReader(b), n.Paths.StorageCfg())
}

// runningProcess does what qemu-server's check_running does: the pid from
// the pid file is alive and its command line has -pidfile for this VM. No
// pid file, or a process that has gone, is a VM that does not run; a pid
// file or command line that is not a file to read, or whose read hangs,
// is an error.
func runningProcess(ctx context.Context, n node.Node, vmid int) (int, *qemuserver.Cmdline, error) {
	p := n.Paths
	b, err := n.ReadFile(ctx, p.PidFile(vmid))
	if err != nil {
		return 0, nil, unlessGone(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, nil, nil
	}
	raw, err := n.ReadFile(ctx, filepath.Join(p.ProcPid(pid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return 0, nil, unlessGone(err)
	}
	argv := qemuserver.SplitNUL(raw)
	cl, err := qemuserver.ParseCmdline(argv)
	if err != nil {
		return 0, nil, nil
	}
	// qemu-server compares -pidfile with its own path; a copied tree (or a
	// test node below another root) keeps the original absolute path, so
	// accept any path ending in qemu-server/<vmid>.pid.
	if cl.Pidfile != p.PidFile(vmid) && !strings.HasSuffix(cl.Pidfile, "/qemu-server/"+strconv.Itoa(vmid)+".pid") {
		return 0, nil, nil
	}
	return pid, cl, nil
}

// unlessGone keeps the errors of a file that is there but cannot be read
// as a file (refused, or its read hung); any other (no such file, a
// process gone) means "not running".
func unlessGone(err error) error {
	if errors.Is(err, node.ErrBadFile) || node.GaveUp(err) {
		return err
	}
	return nil
}

// isProcfs reports whether dir is a procfs mount (statfs f_type
// PROC_SUPER_MAGIC), not a directory of copied files.
func isProcfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// IsBlockDevice stats a disk path the way the running QEMU sees it (through
// /proc/<pid>/root when running), falling back to the node root; within
// node.DefaultTimeout (node.Within): an image on a hung NFS or CIFS mount
// is not a block device.
func (v *VM) IsBlockDevice(path string) bool {
	st, err := node.Within(context.Background(), node.DefaultTimeout, func() (os.FileInfo, error) { return os.Stat(v.HostPath(path)) })
	return err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
}

// HostPath maps a path from the VM's command line to one this process can
// open: through /proc/<pid>/root for a running QEMU (a chroot or another
// mount namespace sees its own files), else below the node root.
func (v *VM) HostPath(path string) string {
	if v.Running && v.Pid > 0 {
		return filepath.Join(v.paths.ProcPid(v.Pid), "root", path)
	}
	return v.paths.Join(path)
}

func (v *VM) buildDisks() {
	cfg := v.Config
	next := cfg.Next()
	ids := map[string]string{}
	for _, k := range qemuserver.DiskKeys(cfg.Main) {
		ids[k] = ""
	}
	for _, k := range qemuserver.DiskKeys(next) {
		ids[k] = ""
	}
	if v.Cmdline != nil {
		for k := range v.Cmdline.Disks {
			if _, inConfig := ids[k]; k == "efidisk0" && !inConfig {
				// OVMF's temporary vars copy of a VM without efidisk0
				// (OVMF.pm: "no efidisk configured!"): no disk of the VM.
				continue
			}
			ids[k] = ""
		}
	}
	vmMain := qemuserver.VMDefaultsFor(cfg.Main)
	vmMain.Blockdev = v.Blockdev
	vmNext := qemuserver.VMDefaultsAt(next, v.InstalledQEMU)
	for _, id := range qemuserver.DiskKeys(ids) {
		d := &Disk{ID: id}
		if line, ok := cfg.Main[id]; ok {
			drv, err := qemuserver.ParseDrive(id, line)
			if err != nil {
				d.ParseError = fmt.Errorf("%s line %d: %w", cfg.Path, cfg.Lines[id], err)
			} else {
				d.Drive = drv
				d.Volume, d.Configured, d.ResolveError = v.predict(drv, vmMain)
			}
		}
		nline, inNext := next[id]
		if !inNext && d.Drive != nil {
			d.PendingDelete = true
		} else if inNext && (d.Drive == nil || nline != cfg.Main[id] || vmNext.SCSIHW != vmMain.SCSIHW) {
			if drv, err := qemuserver.ParseDrive(id, nline); err == nil {
				if _, s, err := v.predict(drv, vmNext); err == nil && s != nil {
					if d.Configured == nil || nline != cfg.Main[id] || qemuserver.Diff(*d.Configured, *s) != nil {
						d.PendingDrive, d.Pending = drv, s
					}
				} else if err == nil && drv.Kind() == qemuserver.KindTPMState && (d.Drive == nil || nline != cfg.Main[id]) {
					d.PendingDrive = drv
				}
			}
		}
		if v.Cmdline != nil {
			d.Running = v.Cmdline.Disks[id]
		}
		v.Disks = append(v.Disks, d)
	}
	for _, k := range qemuserver.UnusedKeys(cfg.Main) {
		u := Unused{Key: k, Volume: cfg.Main[k]}
		if drv, err := qemuserver.ParseDrive(k, cfg.Main[k]); err != nil {
			u.ParseError = fmt.Errorf("%s line %d: %w", cfg.Path, cfg.Lines[k], err)
		} else {
			u.Volume = drv.Volume
		}
		v.Unused = append(v.Unused, u)
	}
}

// predict places a drive's volume and, for the kinds QEMU opens, predicts
// its settings. tpmstate0 gets a volume but no settings: swtpm opens it,
// QEMU never does.
func (v *VM) predict(drv *qemuserver.Drive, defs qemuserver.VMDefaults) (*qemuserver.Volume, *qemuserver.DiskSettings, error) {
	var vol *qemuserver.Volume
	st := v.Storages.Of(drv)
	if drv.Volume != "cdrom" && !drv.IsNone() {
		r, err := qemuserver.ResolveVolume(v.Storages, drv, v.IsBlockDevice)
		var ue *qemuserver.UnmodelledError
		if errors.As(err, &ue) {
			r, err = v.resolveThroughNode(drv, ue)
			if err != nil && ue.Known != nil && drv.Kind() != qemuserver.KindTPMState {
				// Only the path is unknown: the settings follow from
				// storage.cfg, and the path would only add evidence.
				s := qemuserver.PredictVolume(drv, *ue.Known, st, defs)
				return nil, &s, fmt.Errorf("%w; its settings are predicted from storage.cfg (%s, %s), without the device's path", err, ue.Known.Driver, ue.Known.Format)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		vol = &r
	}
	if drv.Kind() == qemuserver.KindTPMState {
		return vol, nil, nil
	}
	var r qemuserver.Volume
	if vol != nil {
		r = *vol
	}
	s := qemuserver.PredictVolume(drv, r, st, defs)
	return vol, &s, nil
}

// resolveThroughNode asks `pvesm path` where a volume of a storage the
// model does not know lives.
func (v *VM) resolveThroughNode(drv *qemuserver.Drive, ue *qemuserver.UnmodelledError) (qemuserver.Volume, error) {
	if v.pvesmPath == nil {
		return qemuserver.Volume{}, fmt.Errorf("%s: %w (not resolved: no node tools)", drv.Key, ue)
	}
	p, seen := v.resolved[drv.Volume]
	if !seen {
		var err error
		if p, err = v.pvesmPath(drv.Volume); err != nil {
			return qemuserver.Volume{}, fmt.Errorf("%s: %w; `pvesm path` could not resolve it: %v", drv.Key, ue, err)
		}
		v.resolved[drv.Volume] = p
	}
	vol, err := qemuserver.VolumeFromPath(p, drv, v.IsBlockDevice)
	if err != nil {
		return qemuserver.Volume{}, fmt.Errorf("%s: %w", drv.Key, err)
	}
	if !seen {
		v.Notes = append(v.Notes, fmt.Sprintf("%s: %s: resolved through `pvesm path` to %s (%s, %s)", drv.Key, ue.Why, vol.Path, vol.Driver, vol.Format))
	}
	return vol, nil
}

// addStorageUse adds `pvesm status` for each storage whose volumes were
// resolved through pvesm: the tool cannot read those storages' use itself.
func (v *VM) addStorageUse(ctx context.Context, r node.Runner) {
	seen := map[string]bool{}
	for _, d := range v.Disks {
		if d.Drive == nil || d.Volume == nil || d.Volume.ResolvedBy != qemuserver.ResolvedByPvesm {
			continue
		}
		id := d.Drive.StorageID()
		if seen[id] {
			continue
		}
		seen[id] = true
		rows, err := pvesm.Status(ctx, r, id)
		if err != nil {
			v.Notes = append(v.Notes, fmt.Sprintf("storage %s: its use is unknown: `pvesm status` failed: %v", id, err))
			continue
		}
		for _, s := range rows {
			if s.Name != id {
				continue
			}
			use := "use not reported"
			if s.UsedPercent != nil && s.Status == "active" {
				use = fmt.Sprintf("%s used of %s (%s)", units.Bytes(s.UsedBytes), units.Bytes(s.TotalBytes), units.PercentPtr(s.UsedPercent))
			}
			v.Notes = append(v.Notes, fmt.Sprintf("storage %s (%s, %s): %s, as `pvesm status` reports it", id, s.Type, s.Status, use))
		}
	}
}

// Disk returns the disk with id, or nil.
func (v *VM) Disk(id string) *Disk {
	for _, d := range v.Disks {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// QMPSocket is the VM's QMP socket path: qemu-server's fixed one
// (/var/run/qemu-server/VMID.qmp) below the root. The command line's own
// -chardev path (qemuserver.Cmdline.QMPSocket) is parsed but not dialled:
// qemu-server always starts QEMU with this one.
func (v *VM) QMPSocket() string {
	return v.paths.QMPSocket(v.VMID)
}

// QGASocket is the guest agent socket.
func (v *VM) QGASocket() string { return v.paths.QGASocket(v.VMID) }

// Paths returns the node paths the VM was loaded with.
func (v *VM) Paths() node.Paths { return v.paths }

// RunningNow is the running settings with what QMP reports live (cache flags,
// write-cache, limits) in place of the command line's.
func (d *Disk) RunningNow() *qemuserver.DiskSettings {
	if d.Running == nil {
		return nil
	}
	r := *d.Running
	if d.Live != nil && d.Live.Inserted {
		r.CacheDirect, r.CacheNoFlush, r.WriteCache = d.Live.Format.Direct, d.Live.Format.NoFlush, d.Live.WriteCache
		if d.Live.Limits != nil {
			r.Limits = d.Live.Limits
		}
	}
	return &r
}

// HasThrottleGroup reports a running disk whose limits QEMU keeps in a
// throttle group object: under -blockdev every drive's top node is a
// throttle filter, except a passed-through SCSI disk's (scsiblock:
// qemu-server attaches none, Blockdev.pm); under -drive the limits sit on
// the drive (DriveLimits).
func (v *VM) HasThrottleGroup(d *Disk) bool {
	return v.Blockdev && d.Running != nil && !(d.Drive != nil && d.Drive.Bool("scsiblock"))
}

// DriveLimits are a -drive disk's running limits as query-block lists them
// (legacy names such as bps_wr), in ThrottleLimits names.
func DriveLimits(b qmp.BlockDevice) qemuserver.Limits {
	l := qemuserver.Limits{}
	for k, val := range b.BackendLimits {
		l[qmp.BackendToQEMULimitName(k)] = val
	}
	return l.Normal()
}

// Effective is the cache the running QEMU runs the disk with, decided once
// (qemuserver.EffectiveCache) from RunningNow's flags: the live ones QMP
// reported, else the command line's. nil when the disk is not running.
func (d *Disk) Effective() *qemuserver.Cache {
	r := d.RunningNow()
	if r == nil {
		return nil
	}
	c := r.Cache()
	return &c
}

// ProcCmdline is exposed for tests that need the raw argv.
func ProcCmdline(p node.Paths, pid int) ([]string, error) {
	raw, err := node.New(p, 0).ReadFile(context.Background(), filepath.Join(p.ProcPid(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return qemuserver.SplitNUL(bytes.TrimSpace(raw)), nil
}

// Kind is what the disk slot is (qemuserver.Kind): from the config line,
// the pending line, or what the running QEMU attached.
func (d *Disk) Kind() qemuserver.Kind {
	switch {
	case d.Drive != nil:
		return d.Drive.Kind()
	case d.PendingDrive != nil:
		return d.PendingDrive.Kind()
	case d.Running != nil && d.Running.CDROM:
		return qemuserver.KindCDROM
	case strings.HasPrefix(d.ID, "efidisk"):
		return qemuserver.KindEFIVars
	case strings.HasPrefix(d.ID, "tpmstate"):
		return qemuserver.KindTPMState
	}
	return qemuserver.KindDisk
}

// NotListed is the note a command prints for a disk it leaves out on
// purpose: why, from what the disk is (its kind) or where it is (a disk
// only [PENDING] adds).
func (d *Disk) NotListed() string {
	switch {
	case d.Drive == nil && d.PendingDrive != nil:
		return d.ID + " is only in [PENDING] (the next start adds it): not listed, on purpose"
	case d.Drive == nil && d.ParseError == nil && d.Running != nil:
		return d.ID + " is attached to the running VM but not in its config: not listed"
	}
	return d.Kind().NotListed(d.ID)
}

// IgnoredNotes are the notes for the disks whose config line Proxmox
// refuses, which Select leaves out: qemu-server drops such a line when it
// reads the config ("unable to parse value of ..."), so the next start has
// no such disk; one attached to the running VM was edited after the start.
func (v *VM) IgnoredNotes() []string {
	var out []string
	for _, d := range v.Disks {
		if d.ParseError == nil {
			continue
		}
		if d.Running != nil {
			out = append(out, d.ParseError.Error()+": attached to the running VM, but Proxmox refuses this line and the next start drops the disk: not listed")
		} else {
			out = append(out, d.ParseError.Error()+": Proxmox refuses this line and starts the VM without the disk: not listed")
		}
	}
	return out
}

// Select returns the disks named in ids, or with no names every disk
// whose config line Proxmox accepts: a line it refuses is left out, as
// qemu-server leaves it out of the VM (IgnoredNotes says so), unless no
// other disk is left. An unknown disk, or a named disk whose line Proxmox
// refuses, is a usage error naming it.
func (v *VM) Select(ids []string) ([]*Disk, error) {
	if len(ids) == 0 {
		out := make([]*Disk, 0, len(v.Disks))
		var refused error
		for _, d := range v.Disks {
			if d.ParseError == nil {
				out = append(out, d)
			} else if refused == nil {
				refused = d.ParseError
			}
		}
		if len(out) == 0 && refused != nil {
			// Nothing left to show: the refused line is the answer.
			return nil, exitcode.Wrap(exitcode.Usage, "", refused)
		}
		return out, nil
	}
	var out []*Disk
	for _, id := range ids {
		d := v.Disk(id)
		if d == nil {
			var have []string
			for _, d := range v.Disks {
				have = append(have, d.ID)
			}
			return nil, exitcode.Usagef("VM %d has no disk %s (disks: %s)", v.VMID, units.Clip(id, 40), strings.Join(have, ", "))
		}
		if d.ParseError != nil {
			return nil, exitcode.Wrap(exitcode.Usage, "", d.ParseError)
		}
		out = append(out, d)
	}
	return out, nil
}

// Packages is the reader of dpkg's status the VM was loaded with: the
// command's one (LoadNodeWith), read at most once whoever asks (the
// advisories' installed version of the build the VM runs).
func (v *VM) Packages() *dpkg.Packages { return v.packages }

// installedQEMU is pve-qemu-kvm's installed upstream version from dpkg's
// status below the node's root, "" where it is not installed or not known.
func installedQEMU(ctx context.Context, pkgs *dpkg.Packages) string {
	v, err := pkgs.Installed(ctx, "pve-qemu-kvm")
	if err != nil {
		return ""
	}
	return v.Upstream
}
