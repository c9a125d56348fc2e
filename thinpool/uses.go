package thinpool

import (
	"bufio"
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Who a volume belongs to (Volume.Guest).
const (
	GuestVM           = "vm"
	GuestCT           = "ct"
	GuestUnreferenced = "unreferenced"
)

// A volume's discard setting (Volume.Discard).
const (
	DiscardOn     = "on"
	DiscardIgnore = "ignore"
	// DiscardNA: containers (trimmed by pct fstrim, not by a drive
	// option), unused disks, cloud-init drives.
	DiscardNA = "n/a"
)

// Use is who uses a volume, from the guest configs.
type Use struct {
	VMID    int
	Guest   string // GuestVM, GuestCT
	Disk    string // config key: scsi1, unused0, rootfs, mp0
	Discard string // DiscardOn, DiscardIgnore, DiscardNA
}

// Uses maps storage id -> volume name -> who uses it.
type Uses map[string]map[string]Use

func (u Uses) put(volid string, use Use) {
	sid, vol, ok := strings.Cut(volid, ":")
	if !ok || strings.HasPrefix(volid, "/") || sid == "" || vol == "" {
		return // a path (passthrough) or none/cdrom: not a storage volume
	}
	if u[sid] == nil {
		u[sid] = map[string]Use{}
	}
	if _, dup := u[sid][vol]; !dup {
		u[sid][vol] = use
	}
}

// LoadUses reads this node's VM and container configs (main sections only:
// snapshots' copies of the same lines name the same volumes). A config that
// cannot be read is a note, not an error: the other guests still count.
func LoadUses(ctx context.Context, n node.Node) (Uses, []string) {
	p := n.Paths
	u := Uses{}
	var notes []string
	vms, _ := filepath.Glob(filepath.Join(p.QemuServerDir(), "*.conf"))
	for _, f := range vms {
		vmid, err := qemuserver.ParseVMID(strings.TrimSuffix(filepath.Base(f), ".conf"))
		if err != nil {
			continue
		}
		b, err := n.ReadFile(ctx, f)
		var cfg *qemuserver.Config
		if err == nil {
			cfg, err = qemuserver.ParseConfig(bytes.NewReader(b), f)
		}
		if err != nil {
			notes = append(notes, fileNote(f, err))
			continue
		}
		// A line Proxmox skips names no volume; it is said.
		notes = append(notes, cfg.Skipped...)
		u.addVM(vmid, cfg.Main)
	}
	cts, _ := filepath.Glob(p.Join("/etc/pve/lxc/*.conf"))
	for _, f := range cts {
		vmid, err := qemuserver.ParseVMID(strings.TrimSuffix(filepath.Base(f), ".conf"))
		if err != nil {
			continue
		}
		b, err := n.ReadFile(ctx, f)
		if err != nil {
			notes = append(notes, fileNote(f, err))
			continue
		}
		for _, cv := range ParseCTVolumes(b) {
			u.put(cv.Volume, Use{vmid, GuestCT, cv.Key, DiscardNA})
		}
	}
	return u, notes
}

// fileNote says why file f was not read, naming it once.
func fileNote(f string, err error) string {
	if strings.HasPrefix(err.Error(), f+": ") {
		return err.Error()
	}
	return f + ": " + err.Error()
}

// addVM records a VM config's disks and unused volumes.
func (u Uses) addVM(vmid int, main map[string]string) {
	for _, k := range qemuserver.SortedKeys(main) {
		line := main[k]
		if strings.HasPrefix(k, "unused") {
			u.put(line, Use{vmid, GuestVM, k, DiscardNA})
			continue
		}
		if !qemuserver.IsDiskKey(k) {
			continue
		}
		d, err := qemuserver.ParseDrive(k, line)
		if err != nil {
			continue
		}
		use := Use{vmid, GuestVM, k, DiscardIgnore}
		switch {
		case d.IsCDROM() && !d.IsCloudInit():
			continue // an ISO image is not a thin volume
		case d.IsCloudInit(), d.Kind() == qemuserver.KindEFIVars, d.Kind() == qemuserver.KindTPMState:
			// No discard key in their formats: nothing to turn on.
			use.Discard = DiscardNA
		case d.Opts["discard"] == "on":
			use.Discard = DiscardOn
		}
		u.put(d.Volume, use)
	}
}

// CTVolume is one volume line of a container config.
type CTVolume struct {
	Key    string // rootfs, mp0, unused0
	Volume string // storage:volume (or a path for a bind mount)
}

var ctVolumeKey = regexp.MustCompile(`^(rootfs|mp\d+|unused\d+)$`)

// ParseCTVolumes reads the main section of an LXC config
// (/etc/pve/lxc/<vmid>.conf): rootfs, mpN and unusedN lines, whose first
// value is the volume.
func ParseCTVolumes(b []byte) []CTVolume {
	var out []CTVolume
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20) // lines up to 1 MiB (bufio's default stops at 64 KiB)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[") {
			break // snapshots and pending follow
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !ctVolumeKey.MatchString(k) {
			continue
		}
		vol, _, _ := strings.Cut(strings.TrimSpace(v), ",")
		vol = strings.TrimPrefix(vol, "volume=")
		out = append(out, CTVolume{k, vol})
	}
	return out
}

var volVMID = regexp.MustCompile(`^(?:vm|base|subvol)-(\d+)-`)

// owner fills in who uses v, or the VMID its name suggests for a volume
// no config names.
func (u Uses) owner(storage string, v *Volume) {
	if use, ok := u[storage][v.Name]; ok {
		v.VMID, v.Guest, v.Disk, v.Discard = use.VMID, use.Guest, use.Disk, use.Discard
		return
	}
	v.Guest, v.Discard = GuestUnreferenced, DiscardNA
	if m := volVMID.FindStringSubmatch(v.Name); m != nil {
		v.VMID, _ = strconv.Atoi(m[1])
	}
}
