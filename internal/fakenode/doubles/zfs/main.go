// Command zfs is the fake node's stand-in for OpenZFS's zfs: the kernel
// module is not available where the tests run, so a zfspool storage is a
// set of sparse files behind loop devices linked at /dev/zvol/<pool>/<name>
// (fakenode.CreateVolume), and this program answers in zfs's own -Hp format
// (tab-separated, no header, sizes in bytes) from their real state:
//
//   - volsize is the backing file's size, referenced its allocated bytes
//     (st_blocks), so writes and discards that reach the file show;
//   - volblocksize, sync, compression, primarycache, logbias and
//     refreservation are the zvol's properties as recorded in the state
//     file (fakenode writes OpenZFS 2.2's defaults when it creates the zvol;
//     `zfs set` and fakenode.SetZvolProperty change them);
//   - the pool dataset's used is the sum of its zvols' referenced bytes and
//     available the free space of the filesystem holding the files.
//
// Node state, below $PVEDISKCHECK_FAKENODE_ROOT/var/lib/zfs:
//
//	zvols      "dataset backing_file" per line
//	props      "dataset property value" per line (the last line wins)
//	zfs-fault  "sleep SECONDS" (hang, for timeouts) or
//	           "exit CODE MESSAGE..." (print MESSAGE on stderr, exit CODE)
//
// Supported: `get -Hp -o FIELDS PROPS DATASET...` (FIELDS of name,
// property, value, source), `list -Hp -r -t volume,snapshot -o
// name,volsize,referenced DATASET`, `set PROP=VALUE DATASET`. A dataset
// that does not exist fails the whole call with zfs's message and exit 1.
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
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type state struct {
	dir     string
	backing map[string]string            // zvol -> backing file
	props   map[string]map[string]string // zvol -> property -> value
	order   []string
}

func run(args []string, stdout, stderr io.Writer) int {
	root := os.Getenv("PVEDISKCHECK_FAKENODE_ROOT")
	if root == "" {
		fmt.Fprintln(stderr, "zfs (fakenode double): PVEDISKCHECK_FAKENODE_ROOT is not set")
		return 3
	}
	st, err := load(filepath.Join(root, "var/lib/zfs"))
	if err != nil {
		fmt.Fprintln(stderr, "zfs (fakenode double):", err)
		return 3
	}
	if code, done := fault(st.dir, stderr); done {
		return code
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "missing command")
		return 2
	}
	switch args[0] {
	case "get":
		return st.get(args[1:], stdout, stderr)
	case "list":
		return st.list(args[1:], stdout, stderr)
	case "set":
		return st.set(args[1:], stderr)
	}
	fmt.Fprintf(stderr, "unrecognized command '%s'\n", args[0])
	return 2
}

func load(dir string) (*state, error) {
	st := &state{dir: dir, backing: map[string]string{}, props: map[string]map[string]string{}}
	if err := lines(filepath.Join(dir, "zvols"), func(f []string) {
		if len(f) == 2 {
			if _, ok := st.backing[f[0]]; !ok {
				st.order = append(st.order, f[0])
			}
			st.backing[f[0]], st.props[f[0]] = f[1], map[string]string{}
		}
	}); err != nil {
		return nil, err
	}
	err := lines(filepath.Join(dir, "props"), func(f []string) {
		if len(f) == 3 && st.props[f[0]] != nil {
			st.props[f[0]][f[1]] = f[2]
		}
	})
	return st, err
}

func lines(p string, fn func([]string)) error {
	f, err := os.Open(p)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fn(strings.Fields(sc.Text()))
	}
	return sc.Err()
}

func fault(dir string, stderr io.Writer) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "zfs-fault"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	switch {
	case len(f) == 2 && f[0] == "sleep":
		s, _ := strconv.Atoi(f[1])
		time.Sleep(time.Duration(s) * time.Second)
		return 0, false
	case len(f) >= 2 && f[0] == "exit":
		code, _ := strconv.Atoi(f[1])
		fmt.Fprintln(stderr, strings.Join(f[2:], " "))
		return code, true
	}
	return 0, false
}

// pool is the dataset a zvol lives in ("" for a zvol's own name).
func (st *state) isPool(ds string) bool {
	for _, z := range st.order {
		if strings.HasPrefix(z, ds+"/") {
			return true
		}
	}
	return false
}

// value is one property of a dataset as -p prints it, and its source.
func (st *state) value(ds, prop string) (string, string) {
	if b, ok := st.backing[ds]; ok {
		var s unix.Stat_t
		if err := unix.Stat(b, &s); err != nil {
			return "-", "-"
		}
		switch prop {
		case "volsize":
			return strconv.FormatInt(s.Size, 10), "local"
		case "referenced", "used":
			return strconv.FormatInt(s.Blocks*512, 10), "-"
		case "usedbysnapshots":
			return "0", "-"
		case "type":
			return "volume", "-"
		}
		if v, ok := st.props[ds][prop]; ok {
			return v, "local"
		}
		return "-", "-"
	}
	// The pool dataset: what its zvols hold, and the free space below.
	switch prop {
	case "used", "referenced":
		var sum int64
		for _, z := range st.order {
			if strings.HasPrefix(z, ds+"/") {
				v, _ := st.value(z, "referenced")
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
		return strconv.FormatInt(sum, 10), "-"
	case "available":
		var fs unix.Statfs_t
		if err := unix.Statfs(st.dir, &fs); err != nil {
			return "-", "-"
		}
		return strconv.FormatUint(fs.Bavail*uint64(fs.Bsize), 10), "-"
	case "type":
		return "filesystem", "-"
	}
	return "-", "-"
}

func (st *state) exists(ds string) bool { _, ok := st.backing[ds]; return ok || st.isPool(ds) }

func notFound(stderr io.Writer, ds string) int {
	fmt.Fprintf(stderr, "cannot open '%s': dataset does not exist\n", ds)
	return 1
}

func (st *state) get(args []string, stdout, stderr io.Writer) int {
	fields := []string{"name", "property", "value", "source"}
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-Hp" || a == "-pH":
		case a == "-o" && i+1 < len(args):
			i++
			fields = strings.Split(args[i], ",")
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "zfs (fakenode double): get: option %s not supported\n", a)
			return 2
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) < 2 {
		fmt.Fprintln(stderr, "missing property argument")
		return 2
	}
	props := strings.Split(rest[0], ",")
	for _, ds := range rest[1:] {
		if !st.exists(ds) {
			return notFound(stderr, ds)
		}
	}
	var out strings.Builder
	for _, ds := range rest[1:] {
		for _, p := range props {
			v, src := st.value(ds, p)
			row := map[string]string{"name": ds, "property": p, "value": v, "source": src}
			var cols []string
			for _, f := range fields {
				cols = append(cols, row[f])
			}
			out.WriteString(strings.Join(cols, "\t") + "\n")
		}
	}
	io.WriteString(stdout, out.String())
	return 0
}

func (st *state) list(args []string, stdout, stderr io.Writer) int {
	ds := args[len(args)-1]
	if !st.exists(ds) {
		return notFound(stderr, ds)
	}
	var names []string
	for _, z := range st.order {
		if z == ds || strings.HasPrefix(z, ds+"/") {
			names = append(names, z)
		}
	}
	sort.Strings(names)
	for _, z := range names {
		vs, _ := st.value(z, "volsize")
		ref, _ := st.value(z, "referenced")
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", z, vs, ref)
	}
	return 0
}

// set records PROP=VALUE for a zvol, as `zfs set` changes it at once.
func (st *state) set(args []string, stderr io.Writer) int {
	if len(args) != 2 || !strings.Contains(args[0], "=") {
		fmt.Fprintln(stderr, "zfs (fakenode double): set PROP=VALUE DATASET")
		return 2
	}
	ds := args[1]
	if _, ok := st.backing[ds]; !ok {
		return notFound(stderr, ds)
	}
	k, v, _ := strings.Cut(args[0], "=")
	f, err := os.OpenFile(filepath.Join(st.dir, "props"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s\n", ds, k, v)
	return 0
}
