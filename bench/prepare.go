package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// AgentTimeout bounds each guest agent exchange's handshake.
const AgentTimeout = 10 * time.Second

// Request is what the user asked for, beyond the method.
type Request struct {
	FileIn  []string // --file-in mount points
	Destroy []string // --destroy disk keys
}

// Validate checks --destroy against the disks selected: the exact key of a
// selected disk (exit 2 otherwise: no global force).
func (r Request) Validate(sel []*vm.Disk) error {
	for _, k := range r.Destroy {
		if !slices.ContainsFunc(sel, func(d *vm.Disk) bool { return d.ID == k }) {
			var ids []string
			for _, d := range sel {
				ids = append(ids, d.ID)
			}
			return exitcode.Usagef("--destroy %q: not one of the disks to measure (%s): it takes a disk's exact key", k, strings.Join(ids, ", "))
		}
	}
	return nil
}

// Prepare finds each selected disk in the guest (query-pci, guest-get-disks,
// guest-get-fsinfo), places its target (Place: nothing is written to a disk
// that is not blank unless --destroy names it) and reads its settings as
// it runs. The VM's live state must have been fetched (vm.FetchLive).
func Prepare(ctx context.Context, n node.Node, v *vm.VM, sel []*vm.Disk, m Method, req Request) ([]Disk, *NodeObserver, error) {
	if err := req.Validate(sel); err != nil {
		return nil, nil, err
	}
	ag, skip := v.Agent(ctx, n, AgentTimeout, guestdisk.Commands, guestdisk.For)
	if skip != nil {
		return nil, nil, exitcode.Unreachablef("VM %d: bench refused: %s", v.VMID, skip)
	}
	agent := *ag
	var pci map[string]string
	var qemu string
	a, err := v.Ask(ctx, n.Timeout, vm.Query{Need: vm.NeedPCI})
	if err != nil {
		return nil, nil, exitcode.Unreachablef("%s", vm.QMPError(v.VMID, err))
	}
	pci = a.PCI
	if a.QEMU != (qmp.Version{}) {
		qemu = a.QEMU.String()
	}
	seen, err := guestdisk.Ask(ctx, agent, pci, qemuserver.SCSIHW(v.Config.Main))
	if err != nil {
		return nil, nil, agentErr(v.VMID, "guest-get-disks", err)
	}
	free := map[string]int64{}
	if fs, err := agent.FsInfo(ctx); err == nil {
		for _, f := range fs {
			free[f.Mountpoint] = -1
			if f.TotalBytes >= 0 && f.UsedBytes >= 0 {
				free[f.Mountpoint] = f.TotalBytes - f.UsedBytes
			}
		}
	}
	for _, mnt := range req.FileIn {
		if _, ok := free[mnt]; !ok {
			return nil, nil, exitcode.Usagef("--file-in %s: not a mount point in the guest (guest-get-fsinfo)", mnt)
		}
	}
	boot := BootDisks(v.Config.Main)
	obs := &NodeObserver{Node: n, Host: sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}, VM: v,
		Volumes: map[string]alloc.Volume{}, Facts: map[string]DiskFacts{}, Devices: map[string]NodeDevice{}, Meter: alloc.NewMeter(n.Runner, n.Timeout)}
	// One zfs get for the zvols (sync=disabled drops flushes).
	set := disk.Resolve(ctx, n, v, sel, disk.ZFS|disk.Devices, disk.Options{})
	var disks []Disk
	for _, d := range set.Disks {
		run := d.RunningNow()
		if run == nil || d.Drive == nil || d.Kind() != qemuserver.KindDisk || d.Drive.IsNone() || run.CDROM {
			return nil, nil, exitcode.Usagef("%s: not a running disk of VM %d (bench measures disks, not CD-ROMs, EFI vars or TPM state)", d.ID, v.VMID)
		}
		t, err := Place(ctx, agent, Placement{Disk: d.ID, Seen: seen[d.ID], Boot: slices.Contains(boot, d.ID),
			FileIn: req.FileIn, Destroy: slices.Contains(req.Destroy, d.ID), FreeBytes: free}, m.SizeBytes)
		if err != nil {
			return nil, nil, err
		}
		st := d.Storage
		s := Settings{Controller: run.Controller, Device: run.Device, Cache: run.Cache().Mode, AIO: run.AIO, IOThread: run.IOThread,
			Storage: d.Drive.StorageID(), Volume: d.Drive.Volume, Limits: run.Limits, QEMU: qemu,
			GuestDevice: t.Device, Mode: t.Mode, Path: t.Path}
		if st != nil {
			s.StorageType = st.Type
		}
		f := DiskFacts{Cache: run.Cache(), Limits: run.Limits, AreaBytes: m.SizeBytes,
			Thin: t.Mode == Raw && storage.ReturnsSpace(st, run.Format, d.Path), Zvol: d.ZFS}
		obs.Facts[d.ID] = f
		obs.Volumes[d.ID] = d.Alloc
		switch {
		case d.Dev != "":
			obs.Devices[d.ID] = NodeDevice{Name: d.Dev}
		case d.FSDev != "":
			obs.Devices[d.ID] = NodeDevice{Name: d.FSDev, Shared: true}
		}
		disks = append(disks, Disk{ID: d.ID, Target: t, Settings: s, Facts: f})
	}
	obs.Neighbours, obs.NeighbourWhy = neighbours(ctx, n, v, sel)
	return disks, obs, nil
}

// neighbours lists, per selected disk, the node's other running VMs (a pid
// file in /var/run/qemu-server) with a disk on the same storage.
func neighbours(ctx context.Context, n node.Node, v *vm.VM, sel []*vm.Disk) (map[string][]NeighbourVM, string) {
	ents, err := os.ReadDir(n.Paths.RunDir())
	if err != nil {
		return nil, "the node's running VMs are not listed (" + err.Error() + ")"
	}
	out := map[string][]NeighbourVM{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		id, err := qemuserver.ParseVMID(name)
		if !ok || err != nil || id == v.VMID {
			continue
		}
		other, err := vm.Load(ctx, n, id)
		if err != nil || !other.Running {
			continue
		}
		for _, d := range sel {
			var on []string
			for _, od := range other.Disks {
				if od.Drive != nil && od.Running != nil && od.Drive.StorageID() != "" && od.Drive.StorageID() == d.Drive.StorageID() {
					on = append(on, od.ID)
				}
			}
			if len(on) > 0 {
				out[d.ID] = append(out[d.ID], NeighbourVM{VMID: id, VM: other, Disks: on})
			}
		}
	}
	return out, ""
}
