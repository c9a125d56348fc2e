// Command lvs is the fake node's stand-in for lvm2's lvs: device-mapper is
// not available where the tests run, so the local-lvm storage is a set of
// sparse files behind loop devices, and this program reports them in lvs's
// own JSON format with the numbers a thin pool would show:
//
//   - each thin volume's data_percent is the real allocation of its backing
//     file, counted in whole pool chunks (a chunk counts when any byte of it
//     holds data, found with SEEK_DATA/SEEK_HOLE), so a discard that QEMU
//     drops leaves the number unchanged and one that reaches the file lowers
//     it; with a 4 KiB chunk this is the file's st_blocks;
//   - a thin snapshot (a sparse copy of its origin's file) holds the chunks
//     it shares: the pool counts the union of a volume's and its snapshots'
//     chunks, so discarding in the origin lowers the origin, not the pool;
//   - the pool row's size, chunk size, discards mode and metadata use come
//     from a file the test writes; its data_percent is the sum;
//   - lv_when_full, vg_free and seg_monitor come from that file too
//     (defaults queue, 0, monitored); with -a the pool's hidden data LV
//     [<pool>_tdata] names the PV the file gives (a real block device the
//     test made, whose sysfs discard_max_bytes the tool reads), as lvm2
//     2.03 prints it (lvm/testdata/real-vg-fill.json).
//
// Node state, below $PVEDISKCHECK_FAKENODE_ROOT/var/lib/lvm-thin:
//
//	volumes     "vg lv size_bytes backing_file" per line (fakenode.CreateVolume)
//	snapshots   "vg snap origin backing_file" per line (fakenode.SnapshotVolume)
//	pool        "key value" lines: size (bytes), chunk_size (bytes),
//	            discards (ignore|nopassdown|passdown), metadata_percent,
//	            when_full (queue|error), vg_free (bytes), monitor
//	            (monitored|not monitored), pv (/dev/... under the pool)
//	lvs-fault   "sleep SECONDS" (hang, for timeouts) or
//	            "exit CODE MESSAGE..." (print MESSAGE on stderr, exit CODE)
//
// Supported arguments: --reportformat json, --units b, --nosuffix,
// -o/--options FIELDS, -a, and VG or VG/LV names (a name that matches no LV
// exits 5 with lvs's message, as lvm2 2.03 does).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

type volume struct {
	vg, name, origin, backing string
	size                      int64
}

type pool struct {
	size, chunk     int64
	discards        string
	metadataPercent string
	whenFull        string
	vgFree          int64
	monitor         string
	pv              string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := os.Getenv("PVEDISKCHECK_FAKENODE_ROOT")
	if root == "" {
		fmt.Fprintln(stderr, "  lvs (fakenode double): PVEDISKCHECK_FAKENODE_ROOT is not set")
		return 3
	}
	dir := filepath.Join(root, "var/lib/lvm-thin")
	if code, done := fault(dir, stderr); done {
		return code
	}
	fields := []string{"lv_name", "vg_name", "lv_attr", "lv_size", "pool_lv", "origin", "data_percent", "metadata_percent", "move_pv", "mirror_log", "copy_percent", "convert_lv"}
	var names []string
	all := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--reportformat":
			i++
			if i >= len(args) || args[i] != "json" {
				fmt.Fprintln(stderr, "  lvs (fakenode double): only --reportformat json is supported")
				return 3
			}
		case a == "--units":
			i++
			if i >= len(args) || args[i] != "b" {
				fmt.Fprintln(stderr, "  lvs (fakenode double): only --units b is supported")
				return 3
			}
		case a == "-o" || a == "--options":
			i++
			if i < len(args) {
				fields = strings.Split(args[i], ",")
			}
		case a == "-a" || a == "--all":
			all = true
		case a == "--nosuffix":
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "  lvs (fakenode double): unsupported option %s\n", a)
			return 3
		default:
			names = append(names, a)
		}
	}
	vols, err := readVolumes(dir)
	if err != nil {
		fmt.Fprintf(stderr, "  lvs (fakenode double): %v\n", err)
		return 5
	}
	poolNames := thinPoolNames(root)
	poolName := func(vg string) string {
		if n := poolNames[vg]; n != "" {
			return n
		}
		return "data"
	}
	p := readPool(dir, vols)
	var rows []map[string]string
	alloc := map[string]int64{}
	families := map[string][]*volume{} // origin name -> origin + its snapshots
	for i := range vols {
		v := &vols[i]
		key := v.vg + "/" + v.name
		if v.origin != "" {
			key = v.vg + "/" + v.origin
		}
		families[key] = append(families[key], v)
	}
	var poolUsed int64
	for _, fam := range families {
		var files []string
		for _, v := range fam {
			a, err := allocated([]string{v.backing}, p.chunk)
			if err != nil {
				fmt.Fprintf(stderr, "  lvs (fakenode double): %v\n", err)
				return 5
			}
			alloc[v.vg+"/"+v.name] = a
			files = append(files, v.backing)
		}
		u, err := allocated(files, p.chunk)
		if err != nil {
			fmt.Fprintf(stderr, "  lvs (fakenode double): %v\n", err)
			return 5
		}
		poolUsed += u
	}
	vgs := map[string]bool{}
	for _, v := range vols {
		vgs[v.vg] = true
	}
	for vg := range vgs {
		rows = append(rows, map[string]string{
			"vg_name": vg, "lv_name": poolName(vg), "lv_size": itoa(p.size), "lv_attr": "twi-aotz--",
			"pool_lv": "", "origin": "", "data_percent": percent(poolUsed, p.size),
			"metadata_percent": p.metadataPercent, "lv_metadata_size": "4194304",
			"chunk_size": itoa(p.chunk), "discards": p.discards,
			"lv_when_full": p.whenFull, "vg_free": itoa(p.vgFree), "seg_monitor": p.monitor, "devices": poolName(vg) + "_tdata(0)",
		})
		if all && p.pv != "" {
			rows = append(rows, map[string]string{
				"vg_name": vg, "lv_name": "[" + poolName(vg) + "_tdata]", "lv_size": itoa(p.size), "lv_attr": "Twi-ao----",
				"chunk_size": "0", "vg_free": itoa(p.vgFree), "devices": p.pv + "(0)",
			})
		}
	}
	for _, v := range vols {
		attr := "Vwi-aotz--"
		if v.origin != "" {
			attr = "Vri---tz-k" // Proxmox snapshots: read-only, activation skipped
		}
		dp := percent(alloc[v.vg+"/"+v.name], v.size)
		if v.origin != "" {
			dp = "" // inactive: lvs prints no percentage
		}
		rows = append(rows, map[string]string{
			"vg_name": v.vg, "lv_name": v.name, "lv_size": itoa(v.size), "lv_attr": attr,
			"pool_lv": poolName(v.vg), "origin": v.origin, "data_percent": dp,
			"metadata_percent": "", "lv_metadata_size": "", "chunk_size": "0", "discards": p.discards,
			"vg_free": itoa(p.vgFree),
		})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i]["vg_name"] != rows[j]["vg_name"] {
			return rows[i]["vg_name"] < rows[j]["vg_name"]
		}
		return rows[i]["lv_name"] < rows[j]["lv_name"]
	})
	if len(names) > 0 {
		var keep []map[string]string
		for _, n := range names {
			found := false
			for _, r := range rows {
				if r["vg_name"] == n || r["vg_name"]+"/"+r["lv_name"] == n {
					keep = append(keep, r)
					found = true
				}
			}
			if !found {
				if strings.Contains(n, "/") {
					fmt.Fprintf(stderr, "  Failed to find logical volume \"%s\"\n", n)
				} else {
					fmt.Fprintf(stderr, "  Volume group \"%s\" not found\n  Cannot process volume group %s\n", n, n)
				}
				printReport(stdout, nil, fields)
				return 5
			}
		}
		rows = keep
	}
	printReport(stdout, rows, fields)
	return 0
}

// fault applies lvs-fault: hang or fail on purpose.
func fault(dir string, stderr io.Writer) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "lvs-fault"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	switch f[0] {
	case "sleep":
		d, _ := strconv.ParseFloat(f[1], 64)
		time.Sleep(time.Duration(d * float64(time.Second)))
		return 0, false
	case "exit":
		code, _ := strconv.Atoi(f[1])
		fmt.Fprintln(stderr, "  "+strings.Join(f[2:], " "))
		return code, true
	}
	return 0, false
}

func readVolumes(dir string) ([]volume, error) {
	var out []volume
	for _, file := range []string{"volumes", "snapshots"} {
		f, err := os.Open(filepath.Join(dir, file))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) != 4 {
				continue
			}
			v := volume{vg: w[0], name: w[1], backing: w[3]}
			if file == "volumes" {
				v.size, _ = strconv.ParseInt(w[2], 10, 64)
			} else {
				v.origin = w[2]
			}
			out = append(out, v)
		}
		f.Close()
	}
	// A removed line or backing file is a removed volume.
	sizes := map[string]int64{}
	for _, v := range out {
		if v.origin == "" {
			sizes[v.vg+"/"+v.name] = v.size
		}
	}
	var keep []volume
	for _, v := range out {
		if _, err := os.Stat(v.backing); err != nil {
			continue
		}
		if v.origin != "" {
			v.size = sizes[v.vg+"/"+v.origin]
		}
		keep = append(keep, v)
	}
	return keep, nil
}

// thinPoolNames maps each VG of an lvmthin storage to its thinpool (a VG
// without one in storage.cfg gets Proxmox's default, "data").
func thinPoolNames(root string) map[string]string {
	out := map[string]string{}
	st, err := qemuserver.LoadStorages(filepath.Join(root, "etc/pve/storage.cfg"))
	if err != nil {
		return out
	}
	for _, s := range st {
		if s.Type == "lvmthin" {
			vg, lv := s.ThinPool()
			out[vg] = lv
		}
	}
	return out
}

func readPool(dir string, vols []volume) pool {
	p := pool{chunk: 64 << 10, discards: "passdown", metadataPercent: "1.56", whenFull: "queue", monitor: "monitored"}
	for _, v := range vols {
		if v.origin == "" {
			p.size += v.size
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "pool"))
	if err != nil {
		return p
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		val = strings.TrimSpace(val)
		switch k {
		case "size":
			p.size, _ = strconv.ParseInt(val, 10, 64)
		case "chunk_size":
			p.chunk, _ = strconv.ParseInt(val, 10, 64)
		case "discards":
			p.discards = val
		case "metadata_percent":
			p.metadataPercent = val
		case "when_full":
			p.whenFull = val
		case "vg_free":
			p.vgFree, _ = strconv.ParseInt(val, 10, 64)
		case "monitor":
			p.monitor = val
		case "pv":
			p.pv = val
		}
	}
	if p.chunk <= 0 {
		p.chunk = 64 << 10
	}
	return p
}

// allocated counts the chunks that hold data in any of files (the same
// offsets in each: a volume and its snapshots), in bytes.
func allocated(files []string, chunk int64) (int64, error) {
	used := map[int64]bool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return 0, err
		}
		fd := int(f.Fd())
		var off int64
		for off < st.Size() {
			data, err := unix.Seek(fd, off, unix.SEEK_DATA)
			if err != nil {
				break // ENXIO: no data after off
			}
			hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
			if err != nil {
				hole = st.Size()
			}
			for c := data / chunk; c*chunk < hole; c++ {
				used[c] = true
			}
			off = hole
		}
		f.Close()
	}
	return int64(len(used)) * chunk, nil
}

// percent formats like lvm2's dm_percent_to_round_float with 2 digits: a
// non-empty volume never shows 0.00 and a not-full one never 100.00.
func percent(part, whole int64) string {
	if whole <= 0 {
		return ""
	}
	p := float64(part) * 100 / float64(whole)
	switch {
	case p > 0 && p < 0.01:
		p = 0.01
	case p > 99.99 && p < 100:
		p = 99.99
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// printReport writes rows the way lvm2 2.03's json report format does:
// every value a string, two-space indented, one row per line.
func printReport(w io.Writer, rows []map[string]string, fields []string) {
	fmt.Fprintln(w, "  {")
	fmt.Fprintln(w, "      \"report\": [")
	fmt.Fprintln(w, "          {")
	fmt.Fprintln(w, "              \"lv\": [")
	for i, r := range rows {
		var kv []string
		for _, f := range fields {
			kv = append(kv, strconv.Quote(f)+":"+strconv.Quote(r[f]))
		}
		sep := ","
		if i == len(rows)-1 {
			sep = ""
		}
		fmt.Fprintf(w, "                  {%s}%s\n", strings.Join(kv, ", "), sep)
	}
	fmt.Fprintln(w, "              ]")
	fmt.Fprintln(w, "          }")
	fmt.Fprintln(w, "      ]")
	fmt.Fprintln(w, "  }")
}
