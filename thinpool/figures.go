package thinpool

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// FromLVS builds an lvmthin storage's pool from one lvs report; uses says who
// uses each volume (nil: nobody known). The pool named by storage.cfg
// (Storage.ThinPool: "data" when unset) must be in the report. Its Fill
// knows only what lvs says (FromLVSFacts adds the node's facts).
func FromLVS(s *qemuserver.Storage, rep *lvm.Report, uses Uses) (Pool, error) {
	return FromLVSFacts(s, rep, uses, Facts{})
}

// FromLVSFacts is FromLVS with the node's facts for the pool's Fill
// (ReadFacts: autoextend, no_space_timeout, the PVs' discard support).
func FromLVSFacts(s *qemuserver.Storage, rep *lvm.Report, uses Uses, f Facts) (Pool, error) {
	vg, name := s.ThinPool()
	pl := rep.Find(vg, name)
	if pl == nil || !pl.IsThinPool() {
		return Pool{}, fmt.Errorf("thin pool %s/%s of storage %s is not in lvs's report", vg, name, s.ID)
	}
	p := Pool{Storage: s.ID, Type: s.Type, Pool: vg + "/" + name, SizeBytes: pl.SizeBytes,
		DataPercent: pl.DataPercent, MetadataPercent: pl.MetadataPercent, MetadataSizeBytes: pl.MetadataSizeBytes,
		ChunkSizeBytes: pl.ChunkSizeBytes, Discards: pl.Discards, Volumes: []Volume{}}
	if a, ok := pl.AllocatedBytes(); ok {
		p.AllocatedBytes = &a
	}
	lvs := rep.Volumes(vg, name)
	snaps := map[string][]string{}
	for _, l := range lvs {
		p.VirtualSumBytes += l.SizeBytes
		if l.IsSnapshot() {
			p.SnapshotVirtualBytes += l.SizeBytes
			snaps[l.Origin] = append(snaps[l.Origin], l.Name)
		}
	}
	for _, l := range lvs {
		if l.IsSnapshot() {
			continue
		}
		v := Volume{Name: l.Name, VirtualBytes: l.SizeBytes, DataPercent: l.DataPercent, Snapshots: orEmpty(snaps[l.Name])}
		if a, ok := l.AllocatedBytes(); ok {
			v.AllocatedBytes = &a
		}
		uses.owner(s.ID, &v)
		p.Volumes = append(p.Volumes, v)
	}
	p.finish()
	p.Fill = FillOf(&p, pl, rep, f)
	p.Warnings = Judge(&p)
	return p, nil
}

// FromZFS builds a zfspool storage's pool from `zfs get used,available` of
// its dataset and `zfs list` of its zvols and snapshots (alloc.ZFSListArgv).
// A snapshot counts toward overcommit with its volsize (its zvol's where zfs
// prints none).
func FromZFS(s *qemuserver.Storage, used, avail int64, rows []alloc.ZFSListRow, uses Uses) Pool {
	ds := s.Props["pool"]
	p := Pool{Storage: s.ID, Type: s.Type, Pool: ds, SizeBytes: used + avail, AllocatedBytes: &used, Volumes: []Volume{}}
	if p.SizeBytes > 0 {
		pct := float64(used) * 100 / float64(p.SizeBytes)
		p.DataPercent = &pct
	}
	volsize := map[string]int64{}
	for _, r := range rows {
		if _, _, snap := r.Snapshot(); !snap {
			volsize[r.Name] = r.VolsizeBytes
		}
	}
	snaps := map[string][]string{}
	for _, r := range rows {
		zvol, snap, isSnap := r.Snapshot()
		if !strings.HasPrefix(zvol, ds+"/") {
			continue // the dataset itself, or outside it
		}
		size := r.VolsizeBytes
		if isSnap && size == 0 {
			size = volsize[zvol]
		}
		p.VirtualSumBytes += size
		if isSnap {
			p.SnapshotVirtualBytes += size
			snaps[zvol] = append(snaps[zvol], snap)
		}
	}
	for _, r := range rows {
		if _, _, isSnap := r.Snapshot(); isSnap || !strings.HasPrefix(r.Name, ds+"/") {
			continue
		}
		ref := r.ReferencedBytes
		v := Volume{Name: strings.TrimPrefix(r.Name, ds+"/"), VirtualBytes: r.VolsizeBytes, AllocatedBytes: &ref, Snapshots: orEmpty(snaps[r.Name])}
		if r.VolsizeBytes > 0 {
			pct := float64(ref) * 100 / float64(r.VolsizeBytes)
			v.DataPercent = &pct
		}
		uses.owner(s.ID, &v)
		p.Volumes = append(p.Volumes, v)
	}
	p.finish()
	p.Warnings = Judge(&p)
	return p
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
