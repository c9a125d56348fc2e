package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func init() { commands = append(commands, thinCommand) }

// Thresholds of the thin report.
const (
	thinWarnPercent = 80.0 // data or metadata use that earns a warning
	thinFailPercent = 90.0 // data or metadata use that makes the exit status 1
	// A volume is "large" for the discard-off warning from this size, or
	// from this share of its pool.
	thinLargeBytes = 1 << 30
	thinLargeShare = 0.10
)

func thinCommand() *cli.Command {
	return &cli.Command{
		Name:      "thin",
		Usage:     "report thin pools: use, overcommit, and which volumes hold the space",
		ArgsUsage: "[STORAGE...]",
		Description: `For each LVM-thin storage of storage.cfg (and each zfspool storage), or the
ones named: the pool's size, data and metadata use, the sum of its thin
volumes' virtual sizes and the overcommit ratio (what 'qm create' warns about:
"Sum of all thin volume sizes exceeds the size of thin pool"), and per volume:
the VM or container and disk that use it, virtual size, allocated bytes, discard
on or off, and its snapshots; sorted by allocated bytes, biggest first.

Warnings: data or metadata use at 80 % or more (at 100 % data a thin pool stops
writes; at 100 % metadata it can be damaged), a pool that ignores discards,
and volumes of at least 1 GiB (or 10 % of the pool) with discard off, whose
trimmed space never comes back (see 'pvediskcheck discard').

Volumes are matched to VMs through /etc/pve/qemu-server/*.conf and
/etc/pve/lxc/*.conf on this node; a volume no config names is "unreferenced"
(a leftover, or a guest of another node on shared storage).

Changes nothing. Runs lvs (LVM-thin) and zfs list/get (zfspool) once each,
with --timeout.

EXAMPLES
   pvediskcheck thin
   pvediskcheck thin local-lvm --json

` + exitcode.Help + `
   1 when a pool's data or metadata use is at or above 90 %.
   3 when lvs or zfs fails or times out, or a pool is missing from its report.`,
		Action: thinAction,
	}
}

// thinJSON is the --json schema of `thin` (README "JSON schemas").
type thinJSON struct {
	Pools []thinPoolJSON `json:"pools"`
	Notes []string       `json:"notes,omitempty"`
}

type thinPoolJSON struct {
	Storage           string           `json:"storage"`
	Type              string           `json:"type"` // lvmthin, zfspool
	Pool              string           `json:"pool"` // vg/thinpool or the ZFS dataset
	SizeBytes         int64            `json:"size_bytes"`
	AllocatedBytes    *int64           `json:"allocated_bytes"`
	DataPercent       *float64         `json:"data_percent"`
	MetadataPercent   *float64         `json:"metadata_percent"`
	MetadataSizeBytes int64            `json:"metadata_size_bytes,omitempty"`
	ChunkSizeBytes    int64            `json:"chunk_size_bytes,omitempty"`
	Discards          string           `json:"discards,omitempty"`
	VirtualSumBytes   int64            `json:"virtual_sum_bytes"`
	OvercommitRatio   float64          `json:"overcommit_ratio"`
	Volumes           []thinVolumeJSON `json:"volumes"`
	Warnings          []discardReason  `json:"warnings"`
}

type thinVolumeJSON struct {
	Name           string   `json:"name"`
	VMID           int      `json:"vmid"`           // 0 when unknown
	Guest          string   `json:"guest"`          // vm, ct, unreferenced
	Disk           string   `json:"disk,omitempty"` // scsi1, rootfs, mp0, unused0
	VirtualBytes   int64    `json:"virtual_bytes"`
	AllocatedBytes *int64   `json:"allocated_bytes"`
	DataPercent    *float64 `json:"data_percent"`
	Discard        string   `json:"discard"` // on, ignore, n/a (containers: pct fstrim)
	Snapshots      []string `json:"snapshots"`
}

// thinUse is who uses a volume, from the guest configs.
type thinUse struct {
	vmid    int
	guest   string
	disk    string
	discard string
}

func thinAction(c *cli.Context) error {
	e := newEnv(c)
	st, err := qemuserver.LoadStorages(e.paths.StorageCfg())
	if err != nil {
		return exitcode.Usagef("%v", err)
	}
	var want []*qemuserver.Storage
	if c.NArg() > 0 {
		for _, id := range c.Args().Slice() {
			s, ok := st[id]
			if !ok {
				return exitcode.Usagef("thin: no storage %q in %s", id, e.paths.StorageCfg())
			}
			if s.Type != "lvmthin" && s.Type != "zfspool" {
				return exitcode.Usagef("thin: storage %s is of type %s; thin reports lvmthin and zfspool storages", id, s.Type)
			}
			want = append(want, s)
		}
	} else {
		for _, id := range qemuserver.SortedKeys(st) {
			if s := st[id]; s.Type == "lvmthin" || s.Type == "zfspool" {
				want = append(want, s)
			}
		}
	}
	out := thinJSON{Pools: []thinPoolJSON{}}
	if len(want) == 0 {
		out.Notes = append(out.Notes, "no lvmthin or zfspool storage in "+e.paths.StorageCfg())
	}
	uses, notes := thinUses(e)
	out.Notes = append(out.Notes, notes...)

	var vgs []string
	seen := map[string]bool{}
	for _, s := range want {
		if vg := s.Props["vgname"]; s.Type == "lvmthin" && !seen[vg] {
			seen[vg] = true
			vgs = append(vgs, vg)
		}
	}
	var rep *lvm.Report
	if len(vgs) > 0 {
		if rep, err = lvm.List(e.ctx(), e.runner, vgs...); err != nil {
			return exitcode.Unreachablef("thin: %v", err)
		}
	}
	for _, s := range want {
		var p thinPoolJSON
		switch s.Type {
		case "lvmthin":
			p, err = thinLVM(s, rep, uses[s.ID])
		case "zfspool":
			p, err = thinZFS(e, s, uses[s.ID])
		}
		if err != nil {
			return exitcode.Unreachablef("thin: %v", err)
		}
		thinWarn(&p)
		out.Pools = append(out.Pools, p)
	}
	if e.json {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printThin(e, out)
	}
	for _, p := range out.Pools {
		if p.DataPercent != nil && *p.DataPercent >= thinFailPercent || p.MetadataPercent != nil && *p.MetadataPercent >= thinFailPercent {
			return exitcode.ErrProblem
		}
	}
	return nil
}

func thinLVM(s *qemuserver.Storage, rep *lvm.Report, uses map[string]thinUse) (thinPoolJSON, error) {
	vg, poolName := s.Props["vgname"], s.Props["thinpool"]
	if poolName == "" {
		poolName = "data"
	}
	pl := rep.Find(vg, poolName)
	if pl == nil || !pl.IsThinPool() {
		return thinPoolJSON{}, fmt.Errorf("thin pool %s/%s of storage %s is not in lvs's report", vg, poolName, s.ID)
	}
	p := thinPoolJSON{Storage: s.ID, Type: s.Type, Pool: vg + "/" + poolName, SizeBytes: pl.SizeBytes,
		DataPercent: pl.DataPercent, MetadataPercent: pl.MetadataPercent, MetadataSizeBytes: pl.MetadataSizeBytes,
		ChunkSizeBytes: pl.ChunkSizeBytes, Discards: pl.Discards, Volumes: []thinVolumeJSON{}, Warnings: []discardReason{}}
	if a, ok := pl.AllocatedBytes(); ok {
		p.AllocatedBytes = &a
	}
	snaps := map[string][]string{}
	for _, l := range rep.Volumes(vg, poolName) {
		if l.IsSnapshot() {
			snaps[l.Origin] = append(snaps[l.Origin], l.Name)
		}
	}
	for _, l := range rep.Volumes(vg, poolName) {
		if l.IsSnapshot() {
			continue
		}
		v := thinVolumeJSON{Name: l.Name, VirtualBytes: l.SizeBytes, DataPercent: l.DataPercent, Snapshots: snaps[l.Name]}
		if v.Snapshots == nil {
			v.Snapshots = []string{}
		}
		if a, ok := l.AllocatedBytes(); ok {
			v.AllocatedBytes = &a
		}
		thinOwner(&v, uses)
		p.VirtualSumBytes += l.SizeBytes
		p.Volumes = append(p.Volumes, v)
	}
	thinSort(&p)
	return p, nil
}

func thinZFS(e *env, s *qemuserver.Storage, uses map[string]thinUse) (thinPoolJSON, error) {
	ds := s.Props["pool"]
	argv := alloc.ZFSArgv(ds, "used", "available")
	b, err := e.runner.Run(e.ctx(), argv...)
	if err != nil {
		return thinPoolJSON{}, fmt.Errorf("`%s`: %v", strings.Join(argv, " "), err)
	}
	pp, err := alloc.ParseZFSGet(b)
	if err != nil {
		return thinPoolJSON{}, err
	}
	argv = thinZFSListArgv(ds)
	b, err = e.runner.Run(e.ctx(), argv...)
	if err != nil {
		return thinPoolJSON{}, fmt.Errorf("`%s`: %v", strings.Join(argv, " "), err)
	}
	vols, err := parseZFSList(b)
	if err != nil {
		return thinPoolJSON{}, err
	}
	return thinZFSPool(s, pp["used"], pp["available"], vols, uses), nil
}

// thinZFSListArgv lists the storage's zvols and their snapshots.
func thinZFSListArgv(ds string) []string {
	return []string{"zfs", "list", "-Hp", "-r", "-t", "volume,snapshot", "-o", "name,volsize,referenced", ds}
}

type zfsListRow struct {
	name               string
	volsize, reference int64
}

// parseZFSList reads `zfs list -Hp -o name,volsize,referenced` (tabs).
func parseZFSList(b []byte) ([]zfsListRow, error) {
	var out []zfsListRow
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("cannot parse zfs list line %q", line)
		}
		r := zfsListRow{name: f[0]}
		r.volsize, _ = strconv.ParseInt(f[1], 10, 64)
		var err error
		if r.reference, err = strconv.ParseInt(f[2], 10, 64); err != nil {
			return nil, fmt.Errorf("cannot parse zfs list line %q: referenced is not bytes", line)
		}
		out = append(out, r)
	}
	return out, nil
}

func thinZFSPool(s *qemuserver.Storage, used, avail int64, rows []zfsListRow, uses map[string]thinUse) thinPoolJSON {
	ds := s.Props["pool"]
	p := thinPoolJSON{Storage: s.ID, Type: s.Type, Pool: ds, SizeBytes: used + avail, AllocatedBytes: &used,
		Volumes: []thinVolumeJSON{}, Warnings: []discardReason{}}
	if p.SizeBytes > 0 {
		pct := float64(used) * 100 / float64(p.SizeBytes)
		p.DataPercent = &pct
	}
	snaps := map[string][]string{}
	for _, r := range rows {
		if vol, snap, ok := strings.Cut(r.name, "@"); ok {
			snaps[vol] = append(snaps[vol], snap)
		}
	}
	for _, r := range rows {
		if strings.Contains(r.name, "@") || !strings.HasPrefix(r.name, ds+"/") {
			continue
		}
		ref := r.reference
		v := thinVolumeJSON{Name: strings.TrimPrefix(r.name, ds+"/"), VirtualBytes: r.volsize, AllocatedBytes: &ref, Snapshots: snaps[r.name]}
		if v.Snapshots == nil {
			v.Snapshots = []string{}
		}
		if r.volsize > 0 {
			pct := float64(ref) * 100 / float64(r.volsize)
			v.DataPercent = &pct
		}
		thinOwner(&v, uses)
		p.VirtualSumBytes += r.volsize
		p.Volumes = append(p.Volumes, v)
	}
	thinSort(&p)
	return p
}

var thinVolVMID = regexp.MustCompile(`^(?:vm|base|subvol)-(\d+)-`)

func thinOwner(v *thinVolumeJSON, uses map[string]thinUse) {
	if u, ok := uses[v.Name]; ok {
		v.VMID, v.Guest, v.Disk, v.Discard = u.vmid, u.guest, u.disk, u.discard
		return
	}
	v.Guest, v.Discard = "unreferenced", "n/a"
	if m := thinVolVMID.FindStringSubmatch(v.Name); m != nil {
		v.VMID, _ = strconv.Atoi(m[1])
	}
}

func thinSort(p *thinPoolJSON) {
	if p.SizeBytes > 0 {
		p.OvercommitRatio = float64(p.VirtualSumBytes) / float64(p.SizeBytes)
	}
	sort.SliceStable(p.Volumes, func(i, j int) bool {
		a, b := p.Volumes[i].AllocatedBytes, p.Volumes[j].AllocatedBytes
		switch {
		case a == nil:
			return false
		case b == nil:
			return true
		}
		if *a != *b {
			return *a > *b
		}
		return p.Volumes[i].Name < p.Volumes[j].Name
	})
}

func thinWarn(p *thinPoolJSON) {
	add := func(code, text, fix string) { p.Warnings = append(p.Warnings, discardReason{code, text, fix}) }
	if p.DataPercent != nil && *p.DataPercent >= thinWarnPercent {
		add("pool-data-full", fmt.Sprintf("data use is %.2f %% of %s: at 100 %% the pool stops every write of every volume on it", *p.DataPercent, units.Bytes(p.SizeBytes)),
			"trim the guests (pvediskcheck discard VMID --trim), delete old snapshots, or grow the pool (lvextend -L +SIZE "+p.Pool+")")
	}
	if p.MetadataPercent != nil && *p.MetadataPercent >= thinWarnPercent {
		add("pool-metadata-full", fmt.Sprintf("metadata use is %.2f %%: a pool whose metadata fills up can be damaged", *p.MetadataPercent),
			"lvextend --poolmetadatasize +SIZE "+p.Pool)
	}
	if p.OvercommitRatio > 1 {
		add("overcommit", fmt.Sprintf("the thin volumes' virtual sizes add up to %s, %.1f times the pool's %s: the pool fills before the guests' disks do",
			units.Bytes(p.VirtualSumBytes), p.OvercommitRatio, units.Bytes(p.SizeBytes)), "")
	}
	if p.Discards == "ignore" {
		add("pool-ignores-discards", "the pool ignores discards: nothing a guest trims is freed",
			"with every volume of the pool inactive: lvchange --discards passdown "+p.Pool)
	}
	for _, v := range p.Volumes {
		if v.Guest != "vm" || v.Discard != "ignore" {
			continue
		}
		if v.VirtualBytes >= thinLargeBytes || p.SizeBytes > 0 && float64(v.VirtualBytes) >= thinLargeShare*float64(p.SizeBytes) {
			add("discard-off", fmt.Sprintf("VM %d %s (%s, %s allocated of %s) has discard off: what its guest trims never returns to the pool",
				v.VMID, v.Disk, v.Name, units.BytesPtr(v.AllocatedBytes), units.Bytes(v.VirtualBytes)),
				fmt.Sprintf("pvediskcheck discard %d %s (shows the qm set that turns it on)", v.VMID, v.Disk))
		}
	}
}

// thinUses maps storage -> volume name -> who uses it, from this node's VM
// and container configs (main sections only; snapshots' copies of the same
// lines name the same volumes).
func thinUses(e *env) (map[string]map[string]thinUse, []string) {
	out := map[string]map[string]thinUse{}
	var notes []string
	put := func(volid string, u thinUse) {
		sid, vol, ok := strings.Cut(volid, ":")
		if !ok || strings.HasPrefix(volid, "/") {
			return
		}
		if out[sid] == nil {
			out[sid] = map[string]thinUse{}
		}
		if _, dup := out[sid][vol]; !dup {
			out[sid][vol] = u
		}
	}
	files, _ := filepath.Glob(filepath.Join(e.paths.QemuServerDir(), "*.conf"))
	for _, f := range files {
		vmid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".conf"))
		if err != nil {
			continue
		}
		cfg, err := qemuserver.LoadConfig(f, vmid)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		keys := qemuserver.DiskKeys(cfg.Main)
		for k := range cfg.Main {
			if strings.HasPrefix(k, "unused") {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			line := cfg.Main[k]
			if strings.HasPrefix(k, "unused") {
				put(line, thinUse{vmid, "vm", k, "n/a"})
				continue
			}
			d, err := qemuserver.ParseDrive(k, line)
			if err != nil {
				continue
			}
			disc := "ignore"
			if d.Opts["discard"] == "on" {
				disc = "on"
			}
			if d.IsCDROM() {
				if !strings.Contains(d.Volume, "cloudinit") {
					continue // ISO images are not thin volumes
				}
				disc = "n/a"
			}
			put(d.Volume, thinUse{vmid, "vm", k, disc})
		}
	}
	cts, _ := filepath.Glob(e.paths.Join("/etc/pve/lxc/*.conf"))
	for _, f := range cts {
		vmid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".conf"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "[") {
				break // snapshots and pending follow
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || !(k == "rootfs" || strings.HasPrefix(k, "mp") || strings.HasPrefix(k, "unused")) {
				continue
			}
			vol, _, _ := strings.Cut(strings.TrimSpace(v), ",")
			put(vol, thinUse{vmid, "ct", k, "n/a"})
		}
	}
	return out, notes
}

func printThin(e *env, out thinJSON) {
	for i, p := range out.Pools {
		if i > 0 {
			fmt.Fprintln(e.out)
		}
		pct := units.PercentPtr(p.DataPercent)
		color := ""
		if p.DataPercent != nil && *p.DataPercent >= thinFailPercent {
			color = red
		} else if p.DataPercent != nil && *p.DataPercent >= thinWarnPercent {
			color = yellow
		}
		fmt.Fprintf(e.out, "%s (%s %s): %s of %s used (%s)", p.Storage, p.Type, p.Pool, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), e.paint(color, pct))
		if p.MetadataPercent != nil {
			fmt.Fprintf(e.out, ", metadata %s", units.PercentPtr(p.MetadataPercent))
		}
		if p.Discards != "" {
			fmt.Fprintf(e.out, ", discards %s", p.Discards)
		}
		fmt.Fprintf(e.out, "\n  thin volumes: %d, virtual sizes %s, overcommit %.2fx\n", len(p.Volumes), units.Bytes(p.VirtualSumBytes), p.OvercommitRatio)
		t := newTable(e.out, "  VOLUME", "GUEST", "DISK", "VIRTUAL", "ALLOCATED", "USE", "DISCARD", "SNAPSHOTS")
		for _, v := range p.Volumes {
			guest := v.Guest
			if v.VMID != 0 {
				guest = fmt.Sprintf("%s %d", v.Guest, v.VMID)
				if v.Guest == "unreferenced" {
					guest = fmt.Sprintf("unreferenced (%d?)", v.VMID)
				}
			}
			snaps := "-"
			if len(v.Snapshots) > 0 {
				snaps = strings.Join(v.Snapshots, ",")
			}
			t.row("  "+v.Name, guest, units.OrDash(v.Disk), units.Bytes(v.VirtualBytes), units.BytesPtr(v.AllocatedBytes), units.PercentPtr(v.DataPercent), v.Discard, snaps)
		}
		t.flush()
		for _, w := range p.Warnings {
			fmt.Fprintf(e.out, "  %s %s\n", e.paint(yellow, "warning:"), w.Text)
			if w.Fix != "" {
				fmt.Fprintf(e.out, "    fix: %s\n", w.Fix)
			}
		}
	}
	for _, n := range out.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}
