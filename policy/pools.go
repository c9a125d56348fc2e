package policy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// UserCfg is where Proxmox keeps its pools (pmxcfs, the same on every node).
const UserCfg = "/etc/pve/user.cfg"

// Pools are the pools of user.cfg and their VMs.
type Pools struct {
	ByVM  map[int]string // VMID -> its pool (a VM is in one pool at most)
	Names []string       // every pool, sorted
}

// poolNameRe is pve-access-control's verify_poolname: up to three levels.
var poolNameRe = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)

// ParsePools reads user.cfg's pool lines as parse_user_config does
// (pve-access-control 9.1.1): `pool:NAME:COMMENT:VMIDS:STORAGES:`, fields
// trimmed, VMIDs split as split_list splits (commas, semicolons,
// spaces); a pool name verify_poolname refuses and a VMID that is not a
// number are skipped, and a VMID already in an earlier pool stays there.
// The other lines (users, groups, ACLs, tokens) are not read.
func ParsePools(raw []byte) Pools {
	p := Pools{ByVM: map[int]string{}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), node.MaxFileBytes)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) < 2 || strings.TrimSpace(f[0]) != "pool" {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		name := f[1]
		if !poolNameRe.MatchString(name) {
			continue
		}
		// A nested pool's parents exist too (parse_user_config adds them).
		for parts := strings.Split(name, "/"); len(parts) > 0; parts = parts[:len(parts)-1] {
			if n := strings.Join(parts, "/"); !seen[n] {
				seen[n] = true
				p.Names = append(p.Names, n)
			}
		}
		if len(f) < 4 {
			continue
		}
		for _, id := range strings.FieldsFunc(f[3], func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' }) {
			n, err := strconv.Atoi(id)
			if err != nil || n < 0 || strings.TrimLeft(id, "0123456789") != "" {
				continue
			}
			if _, dup := p.ByVM[n]; !dup {
				p.ByVM[n] = name
			}
		}
	}
	sort.Strings(p.Names)
	return p
}

// ReadPools reads the node's user.cfg; a node without one has no pools.
func ReadPools(ctx context.Context, n node.Node) (Pools, error) {
	b, err := n.ReadFile(ctx, n.Paths.Join(UserCfg))
	if errors.Is(err, os.ErrNotExist) {
		return Pools{ByVM: map[int]string{}}, nil
	}
	if err != nil {
		return Pools{}, err
	}
	return ParsePools(b), nil
}

// UsesPools reports a rule that selects by pool: only then is user.cfg read.
func (p *Policy) UsesPools() bool {
	if p == nil {
		return false
	}
	for _, r := range p.Rules {
		if len(r.Match.Pool) > 0 {
			return true
		}
	}
	return false
}
