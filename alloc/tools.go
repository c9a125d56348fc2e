package alloc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/tidwall/gjson"
)

// ErrParse means a tool printed something this package cannot read.
var ErrParse = errors.New("cannot parse")

// QemuImgArgv is the qemu-img call for an image file. --force-share reads
// the image while the running QEMU holds its lock.
func QemuImgArgv(path string) []string {
	return []string{"qemu-img", "info", "--output", "json", "--force-share", path}
}

// ParseQemuImgInfo reads virtual-size and actual-size (bytes the file has
// allocated on the host) from `qemu-img info --output json`.
func ParseQemuImgInfo(b []byte) (virtual, actual int64, err error) {
	if !gjson.ValidBytes(b) {
		return 0, 0, fmt.Errorf("%w qemu-img output: %.100q", ErrParse, trimSpace(b))
	}
	r := gjson.ParseBytes(b)
	v, a := r.Get("virtual-size"), r.Get("actual-size")
	if !v.Exists() || !a.Exists() {
		return 0, 0, fmt.Errorf("%w qemu-img output: no virtual-size/actual-size", ErrParse)
	}
	if v.Int() < 0 || a.Int() < 0 {
		return 0, 0, fmt.Errorf("%w qemu-img output: negative size (virtual-size %d, actual-size %d)", ErrParse, v.Int(), a.Int())
	}
	return v.Int(), a.Int(), nil
}

func (m *Meter) qemuImg(ctx context.Context, v Volume, res Result) (Result, error) {
	res.Method = "qemu-img"
	out, err := m.Runner.Run(ctx, QemuImgArgv(v.Path)...)
	if err != nil {
		return res, &Error{What: "qemu-img", Err: fmt.Errorf("`%s`: %w", strings.Join(QemuImgArgv(v.Path), " "), err)}
	}
	virt, act, err := ParseQemuImgInfo(out)
	if err != nil {
		return res, &Error{What: "qemu-img", Err: err}
	}
	res.VirtualBytes, res.AllocatedBytes = &virt, &act
	return res, nil
}

// ZFSArgv is the zfs call for a dataset or zvol.
func ZFSArgv(dataset string, props ...string) []string {
	return []string{"zfs", "get", "-Hp", "-o", "property,value", strings.Join(props, ","), dataset}
}

// ParseZFSGet reads `zfs get -Hp -o property,value` lines into bytes per
// property ("-" values are left out).
func ParseZFSGet(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 2 {
			return nil, fmt.Errorf("%w zfs get line %s", ErrParse, units.Clip(line, 80))
		}
		if f[1] == "-" || f[1] == "none" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w zfs get: %s is %s, want bytes (-p)", ErrParse, units.Clip(f[0], 40), units.Clip(f[1], 40))
		}
		out[f[0]] = n
	}
	return out, nil
}

// zfs measures a zvol: referenced is what its data occupies (a trim lowers
// it); usedbysnapshots is what only snapshots hold.
func (m *Meter) zfs(ctx context.Context, v Volume, res Result) (Result, error) {
	res.Method = "zfs"
	poolDS := v.Storage.Props["pool"]
	ds := poolDS + "/" + v.VolName
	argv := ZFSArgv(ds, "volsize", "referenced", "usedbysnapshots")
	out, err := m.Runner.Run(ctx, argv...)
	if err != nil {
		return res, &Error{What: "zfs", Err: fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)}
	}
	p, err := ParseZFSGet(out)
	if err != nil {
		return res, &Error{What: "zfs", Err: err}
	}
	ref, ok := p["referenced"]
	if !ok {
		return res, &Error{What: "zfs", Err: fmt.Errorf("%w: zfs get printed no referenced for %s", ErrParse, ds)}
	}
	res.AllocatedBytes = &ref
	if vs, ok := p["volsize"]; ok {
		res.VirtualBytes = &vs
	}
	if s, ok := p["usedbysnapshots"]; ok {
		res.SnapshotBytes = &s
	}
	argv = ZFSArgv(poolDS, "used", "available")
	out, err = m.Runner.Run(ctx, argv...)
	if err != nil {
		return res, &Error{What: "zfs", Err: fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)}
	}
	pp, err := ParseZFSGet(out)
	if err != nil {
		return res, &Error{What: "zfs", Err: err}
	}
	used, avail := pp["used"], pp["available"]
	pool := &Pool{Name: poolDS, SizeBytes: used + avail, AllocatedBytes: &used}
	if pool.SizeBytes > 0 {
		pct := float64(used) * 100 / float64(pool.SizeBytes)
		pool.DataPercent = &pct
	}
	res.Pool = pool
	return res, nil
}

// RBDArgv is the `rbd du` call for an image, with the cluster options
// Proxmox uses for an external cluster (monhost set in storage.cfg).
func RBDArgv(storeID string, props map[string]string, image string) []string {
	pool := props["pool"]
	if pool == "" {
		pool = "rbd"
	}
	argv := []string{"rbd", "du", "--format", "json", "-p", pool}
	if ns := props["namespace"]; ns != "" {
		argv = append(argv, "--namespace", ns)
	}
	if mon := props["monhost"]; mon != "" {
		user := props["username"]
		if user == "" {
			user = "admin"
		}
		mon = strings.NewReplacer(";", ",", " ", ",").Replace(mon)
		argv = append(argv, "-m", mon, "--auth_supported", "cephx", "-n", "client."+user,
			"--keyring", "/etc/pve/priv/ceph/"+storeID+".keyring")
	}
	return append(argv, image)
}

// ParseRBDDu reads `rbd du --format json`: the image's own entry (the one
// without "snapshot") and its snapshots.
func ParseRBDDu(b []byte, image string) (provisioned, used int64, snaps []string, err error) {
	if !gjson.ValidBytes(b) {
		return 0, 0, nil, fmt.Errorf("%w rbd du output: %.100q", ErrParse, trimSpace(b))
	}
	found := false
	for _, im := range gjson.GetBytes(b, "images").Array() {
		if im.Get("name").String() != image {
			continue
		}
		if s := im.Get("snapshot"); s.Exists() {
			snaps = append(snaps, s.String())
			continue
		}
		found = true
		provisioned, used = im.Get("provisioned_size").Int(), im.Get("used_size").Int()
		if provisioned < 0 || used < 0 {
			return 0, 0, nil, fmt.Errorf("%w rbd du: negative size for %s", ErrParse, units.Clip(image, 60))
		}
	}
	if !found {
		return 0, 0, nil, fmt.Errorf("%w: rbd du lists no image %s", ErrNotInReport, image)
	}
	return provisioned, used, snaps, nil
}

func (m *Meter) rbd(ctx context.Context, v Volume, res Result) (Result, error) {
	res.Method = "rbd"
	// A linked clone's volume name is base/image: rbd du takes the image.
	image := qemuserver.RBDImage(v.VolName)
	argv := RBDArgv(v.Storage.ID, v.Storage.Props, image)
	out, err := m.Runner.Run(ctx, argv...)
	if err != nil {
		return res, &Error{What: "rbd", Err: fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)}
	}
	prov, used, snaps, err := ParseRBDDu(out, image)
	if err != nil {
		return res, &Error{What: "rbd", Err: err}
	}
	res.VirtualBytes, res.AllocatedBytes = &prov, &used
	// used_size counts whole RADOS objects (4 MiB by default).
	res.ResolutionBytes = 4 << 20
	res.Snapshots = append(res.Snapshots, snaps...)
	return res, nil
}
