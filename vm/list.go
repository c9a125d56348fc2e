package vm

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// List returns every VM of the node, sorted: the VMIDs of its VM configs
// (check --all, metrics). A tree that is not a Proxmox VE node is bad input
// naming the path.
func List(p node.Paths) ([]int, error) {
	if err := p.CheckNode(); err != nil {
		return nil, err
	}
	dir := p.QemuServerDir()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, exitcode.Usagef("%s is not a Proxmox VE node: no directory %s", p.Root, dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Unreachable, dir, err)
	}
	var ids []int
	for _, f := range files {
		// Only names qemu-server writes: 0370.conf is not VM 370's.
		if id, err := qemuserver.ParseVMID(strings.TrimSuffix(filepath.Base(f), ".conf")); err == nil && filepath.Base(f) == strconv.Itoa(id)+".conf" {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids, nil
}
