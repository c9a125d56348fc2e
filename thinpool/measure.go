package thinpool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// IsPool reports the storage types this package reports a pool for (their
// row's Pool: lvmthin, zfspool).
func IsPool(s *qemuserver.Storage) bool {
	return s != nil && s.Facts().Pool != storagetype.PoolNone
}

// isLVMThin: the pool is an LVM thin pool (else a ZFS dataset).
func isLVMThin(s *qemuserver.Storage) bool { return s.Facts().Pool == storagetype.PoolLVMThin }

// Measure reports the named storages' pools, or every lvmthin and zfspool
// storage of storage.cfg when none is named: lvs once for their volume
// groups, zfs once per zfspool, who uses each volume from this node's guest
// configs. A missing storage.cfg (not a Proxmox VE node), an unknown storage
// or one of another type is bad input (exit 2); lvs or zfs failing, or a
// pool missing from its report, is exit 3.
func Measure(ctx context.Context, n node.Node, names []string) (*Report, error) {
	r := n.Runner
	return measureWith(ctx, n, r, names, func(vgs []string) (*lvm.Report, error) { return lvm.List(ctx, r, vgs...) },
		func(rep *lvm.Report) Facts { return ReadFacts(ctx, n, r, rep) })
}

// Measure is thinpool.Measure on the cache's one lvs run (every volume
// group), the run its Pool figures come from too: a collection that checks
// VMs and reports pools (metrics) runs lvs once.
func (c *Cache) Measure(ctx context.Context, n node.Node, names []string) (*Report, error) {
	return measureWith(ctx, n, c.runner, names, func([]string) (*lvm.Report, error) { return c.lvsReport(ctx) },
		func(rep *lvm.Report) Facts { return c.facts(ctx, n, rep) })
}

// facts reads the node's facts of the pools (lvmconfig, sysfs) once per
// cache.
func (c *Cache) facts(ctx context.Context, n node.Node, rep *lvm.Report) Facts {
	c.factsOnce.Do(func() { c.fillFacts = ReadFacts(ctx, n, c.runner, rep) })
	return c.fillFacts
}

// lvsReport runs lvs over every volume group once per cache.
func (c *Cache) lvsReport(ctx context.Context) (*lvm.Report, error) {
	c.lvsOnce.Do(func() { c.lvs, c.lvsErr = lvm.List(ctx, c.runner) })
	return c.lvs, c.lvsErr
}

// measureWith reports the pools of names (all of the node's when none),
// their lvs report from listLVS (given the volume groups they need) and the
// node's facts of their filling from facts.
func measureWith(ctx context.Context, n node.Node, r node.Runner, names []string, listLVS func(vgs []string) (*lvm.Report, error), facts func(*lvm.Report) Facts) (*Report, error) {
	p := n.Paths
	cfg := p.StorageCfg()
	b, err := n.ReadFile(ctx, cfg)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, exitcode.Usagef("thin: no %s: %s is not a Proxmox VE node (give its root with --root)", cfg, p.Root)
	case errors.Is(err, node.ErrBadFile):
		return nil, exitcode.Wrap(exitcode.Usage, "thin", err)
	case err != nil:
		return nil, exitcode.Wrap(exitcode.Unreachable, "thin", err)
	}
	st, skipped, err := qemuserver.ParseStoragesSkipped(bytes.NewReader(b), cfg)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, "thin", err)
	}
	var want []*qemuserver.Storage
	for _, id := range names {
		s, ok := st[id]
		if !ok {
			return nil, exitcode.Usagef("thin: no storage %q in %s", id, cfg)
		}
		if !IsPool(s) {
			return nil, exitcode.Usagef("thin: storage %s is of type %s; thin reports lvmthin and zfspool storages", id, s.Type)
		}
		want = append(want, s)
	}
	out := &Report{Pools: []Pool{}, Notes: skipped}
	if len(names) == 0 {
		here := p.NodeName()
		for _, id := range qemuserver.SortedKeys(st) {
			s := st[id]
			if !IsPool(s) {
				continue
			}
			// A storage another node owns, or one switched off, has no
			// pool here to ask lvs or zfs about (pvesm status skips them).
			if why := s.Unavailable(here); why != "" {
				out.Notes = append(out.Notes, fmt.Sprintf("storage %s skipped: %s", id, why))
				continue
			}
			want = append(want, s)
		}
	}
	if len(want) == 0 {
		out.Notes = append(out.Notes, "no lvmthin or zfspool storage in "+cfg)
	}
	uses, notes := LoadUses(ctx, n)
	out.Notes = append(out.Notes, notes...)

	var vgs []string
	seen := map[string]bool{}
	for _, s := range want {
		if vg, _ := s.ThinPool(); isLVMThin(s) && !seen[vg] {
			seen[vg] = true
			vgs = append(vgs, vg)
		}
	}
	var rep *lvm.Report
	var f Facts
	if len(vgs) > 0 {
		if rep, err = listLVS(vgs); err != nil {
			return nil, exitcode.Wrap(exitcode.Unreachable, "thin", err)
		}
		f = facts(rep)
		out.Notes = append(out.Notes, f.Notes...)
	}
	for _, s := range want {
		var pl Pool
		if isLVMThin(s) {
			pl, err = FromLVSFacts(s, rep, uses, f)
		} else {
			pl, err = zfsPool(ctx, r, s, uses)
		}
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unreachable, "thin", err)
		}
		out.Pools = append(out.Pools, pl)
	}
	return out, nil
}

// zfsPool runs zfs get and zfs list for a zfspool storage.
func zfsPool(ctx context.Context, r node.Runner, s *qemuserver.Storage, uses Uses) (Pool, error) {
	ds := s.Props["pool"]
	argv := alloc.ZFSArgv(ds, "used", "available")
	b, err := r.Run(ctx, argv...)
	if err != nil {
		return Pool{}, fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)
	}
	pp, err := alloc.ParseZFSGet(b)
	if err != nil {
		return Pool{}, err
	}
	argv = alloc.ZFSListArgv(ds)
	if b, err = r.Run(ctx, argv...); err != nil {
		return Pool{}, fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)
	}
	rows, err := alloc.ParseZFSList(b)
	if err != nil {
		return Pool{}, err
	}
	return FromZFS(s, pp["used"], pp["available"], rows, uses), nil
}

// Cache measures each pool once per run, however many VMs live on it (check
// --all): lvs once for every volume group, zfs once per zfspool. Safe for
// concurrent use.
type Cache struct {
	runner    node.Runner
	node      node.Node // for the facts of Pool's Fill; zero: lvs's alone
	lvsOnce   sync.Once
	lvs       *lvm.Report
	lvsErr    error
	factsOnce sync.Once
	fillFacts Facts
	mu        sync.Mutex
	pools     map[string]*cached
}

type cached struct {
	once sync.Once
	pool *Pool
	err  error
}

// NewCache returns a cache that runs lvs and zfs through r.
func NewCache(r node.Runner) *Cache { return &Cache{runner: r, pools: map[string]*cached{}} }

// NewNodeCache is NewCache on the node's runner that also reads the node's
// facts of a filling pool (lvmconfig once, sysfs) for Pool's Fill.
func NewNodeCache(n node.Node) *Cache {
	c := NewCache(n.Runner)
	c.node = n
	return c
}

// Pool returns the figures of storage s's pool (an lvmthin or zfspool
// storage), without who uses its volumes.
func (c *Cache) Pool(ctx context.Context, s *qemuserver.Storage) (*Pool, error) {
	if !IsPool(s) {
		return nil, fmt.Errorf("storage %s is of type %s, not a thin pool", s.ID, s.Type)
	}
	c.mu.Lock()
	e := c.pools[s.ID]
	if e == nil {
		e = &cached{}
		c.pools[s.ID] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		var p Pool
		if !isLVMThin(s) {
			p, e.err = zfsPool(ctx, c.runner, s, nil)
		} else {
			var rep *lvm.Report
			if rep, e.err = c.lvsReport(ctx); e.err == nil {
				f := Facts{}
				if c.node.Paths.Root != "" {
					f = c.facts(ctx, c.node, rep)
				}
				p, e.err = FromLVSFacts(s, rep, nil, f)
			}
		}
		if e.err == nil {
			e.pool = &p
		}
	})
	return e.pool, e.err
}
