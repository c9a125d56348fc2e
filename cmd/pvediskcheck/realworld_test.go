package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// The real-world corpus (../shared/real-world, or $PVE_REALWORLD_DIR) holds
// VM configs that ran on real nodes; qemuserver/testdata/shapes adds the
// shapes it lacks. Every command runs on every config, as a copied node
// tree (--root) with the test doubles for lvs and pvesm.

type corpusCase struct {
	name, conf string
	vmid       int
	storageCfg []byte
	cephConf   []byte // the cluster's ceph.conf, for krbd without fsid
}

var trailingVMID = regexp.MustCompile(`-(\d+)\.conf$`)

func corpusCases(t *testing.T) []corpusCase {
	shapes := filepath.Join("..", "..", "qemuserver", "testdata", "shapes")
	shapesCfg, err := os.ReadFile(filepath.Join(shapes, "storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	ceph, err := os.ReadFile(filepath.Join(shapes, "ceph.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusCase
	add := func(f string, cfg, cephConf []byte) {
		m := trailingVMID.FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("%s: no VMID at the end of its name", f)
		}
		vmid, _ := strconv.Atoi(m[1])
		out = append(out, corpusCase{strings.TrimSuffix(filepath.Base(f), ".conf"), f, vmid, cfg, cephConf})
	}
	// Each with the storage.cfg of its node, and the storages that lacks
	// (the Spongey-PC's own LVM-thin ones; the techno-* configs came
	// without one): check/testdata/realworld declares them.
	for _, c := range corpus.Cases(t, corpus.RealWorld) {
		add(c.Conf, []byte(c.StorageCfg(t)), nil)
	}
	if len(out) < 30 {
		t.Fatalf("only %d real-world configs", len(out))
	}
	files, _ := filepath.Glob(filepath.Join(shapes, "*-*.conf"))
	for _, f := range files {
		add(f, shapesCfg, ceph)
	}
	return out
}

// buildTree copies one config into a node tree and gives every volume it
// names a backing file: LVM-thin volumes for the lvs double (sparse files
// of the config's size), file-storage images, LINSTOR devices.
func buildTree(t *testing.T, c corpusCase) (string, *qemuserver.Config, qemuserver.Storages) {
	root := t.TempDir()
	copyFile(t, c.conf, filepath.Join(root, "etc/pve/qemu-server", strconv.Itoa(c.vmid)+".conf"))
	if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), c.storageCfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if c.cephConf != nil {
		if err := os.WriteFile(filepath.Join(root, "etc/pve/ceph.conf"), c.cephConf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"var/run/qemu-server", "var/lib/lvm-thin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := qemuserver.LoadConfig(filepath.Join(root, "etc/pve/qemu-server", strconv.Itoa(c.vmid)+".conf"), c.vmid)
	if err != nil {
		t.Fatalf("the config does not parse: %v", err)
	}
	st, err := qemuserver.LoadStorages(filepath.Join(root, "etc/pve/storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	var thin strings.Builder
	seen := map[string]bool{}
	next := cfg.Next()
	for _, conf := range []map[string]string{cfg.Main, next} {
		for _, k := range append(qemuserver.DiskKeys(conf), qemuserver.UnusedKeys(conf)...) {
			d, err := qemuserver.ParseDrive(k, conf[k])
			if err != nil || seen[d.Volume] {
				continue
			}
			if strings.HasPrefix(d.Volume, "/") {
				// A host disk passed through: a real node has it.
				sparse(t, filepath.Join(root, d.Volume), 1<<30)
				continue
			}
			if d.StorageID() == "" {
				continue
			}
			seen[d.Volume] = true
			s := st[d.StorageID()]
			if s == nil {
				continue // a storage this storage.cfg lacks: the tool must say so
			}
			size := int64(1 << 30)
			if v := d.Opts["size"]; v != "" {
				size = parseSize(t, v)
			}
			switch s.Type {
			case "lvmthin":
				backing := filepath.Join(root, "var/lib/lvm-thin", s.Props["vgname"]+"-"+d.VolName()+".img")
				sparse(t, backing, size)
				thin.WriteString(s.Props["vgname"] + " " + d.VolName() + " " + strconv.FormatInt(size, 10) + " " + backing + "\n")
			case "dir", "nfs", "cifs", "btrfs":
				if v, err := qemuserver.ResolveVolume(st, d, nil); err == nil {
					sparse(t, filepath.Join(root, v.Path), size)
				}
			case "drbd":
				name := d.VolName()
				if i := strings.LastIndex(name, "_"); strings.HasPrefix(name, "pm-") && i > 0 {
					name = name[:i]
				}
				sparse(t, filepath.Join(root, "dev/drbd/by-res", name, "0"), size)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/lvm-thin/volumes"), []byte(thin.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, cfg, st
}

func parseSize(t *testing.T, v string) int64 {
	mult := map[string]int64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
	num := strings.TrimRight(v, "KMGT")
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatalf("size %q", v)
	}
	return int64(f * float64(mult[strings.TrimPrefix(v, num)]))
}

func sparse(t *testing.T, p string, size int64) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// qmSetRe finds the drive lines of printed fixes: "qm set VMID --KEY VALUE".
var qmSetRe = regexp.MustCompile(`--([a-z]+[0-9]+) ([^\s"]+)`)

// TestRealWorldCorpus runs cache, check, discard, limit, thin and flush on
// every config and asserts: no config-invalid (these configs ran), every
// disk key listed or said why not, every printed `qm set` drive line one
// the parser accepts for that drive kind, and the documented exit codes (a
// stopped VM is exit 3 for cache, discard, limit and flush).
func TestRealWorldCorpus(t *testing.T) {
	cases := corpusCases(t)
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", doubles+string(os.PathListSeparator)+os.Getenv("PATH"))
	kinds := map[qemuserver.Kind]int{}
	fixes := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, cfg, st := buildTree(t, c)
			t.Setenv(fakenode.EnvRoot, root)
			vmid := strconv.Itoa(c.vmid)
			want := map[string]bool{}
			for _, conf := range []map[string]string{cfg.Main, cfg.Next()} {
				for _, k := range qemuserver.DiskKeys(conf) {
					want[k] = true
					if d, err := qemuserver.ParseDrive(k, conf[k]); err == nil {
						kinds[d.Kind()]++
					}
				}
			}
			run := func(args ...string) (string, string, int) {
				return runCLI(t, append([]string{"--root", root, "--json"}, args...)...)
			}
			// Every printed fix parses for its drive's kind.
			checkFixes := func(cmd, out string) {
				for _, m := range qmSetRe.FindAllStringSubmatch(out, -1) {
					if !qemuserver.IsDiskKey(m[1]) {
						continue
					}
					fixes++
					if _, err := qemuserver.ParseDrive(m[1], m[2]); err != nil {
						t.Errorf("%s prints a fix Proxmox refuses: --%s %s: %v", cmd, m[1], m[2], err)
					}
				}
			}
			// Every disk key is listed or named in a note.
			accounted := func(cmd string, listed []gjson.Result, notes []gjson.Result) {
				got := map[string]bool{}
				for _, id := range listed {
					got[id.String()] = true
				}
				for _, n := range notes {
					for k := range want {
						if regexp.MustCompile(`(^|[(;] ?)` + k + `[ :]`).MatchString(n.String()) {
							got[k] = true
						}
					}
				}
				var missing []string
				for k := range want {
					if !got[k] {
						missing = append(missing, k)
					}
				}
				sort.Strings(missing)
				if len(missing) > 0 {
					t.Errorf("%s: disks neither listed nor explained: %v", cmd, missing)
				}
			}

			out, errs, code := run("cache", vmid)
			if code != exitUnreachable || !strings.Contains(errs, "not running") {
				t.Errorf("cache: exit %d (%s), want 3 for a stopped VM", code, errs)
			}
			accounted("cache", gjson.Get(out, "disks.#.id").Array(), gjson.Get(out, "notes").Array())

			out, errs, code = run("check", vmid)
			if code != exitOK && code != exitProblem {
				t.Errorf("check: exit %d (%s)", code, errs)
			}
			vm := gjson.Get(out, "vms.0")
			for _, f := range vm.Get("findings").Array() {
				if f.Get("code").String() == "config-invalid" {
					t.Errorf("check: false config-invalid: %s", f.Get("message"))
				}
			}
			if bad := code == exitOK; bad != (gjson.Get(out, "summary.errors").Int()+gjson.Get(out, "summary.warnings").Int() == 0) {
				t.Errorf("check: exit %d with summary %s", code, gjson.Get(out, "summary"))
			}
			accounted("check", vm.Get("disks.#.id").Array(), vm.Get("notes").Array())
			checkFixes("check", out)

			// metrics: check's findings, counted; a stopped VM has no live
			// series; nothing failed but, without zfs here, a zfspool.
			mout, errs, code := runCLI(t, "--root", root, "metrics")
			if code != exitOK || errs != "" {
				t.Errorf("metrics: exit %d (%s)", code, errs)
			}
			counted := map[string]int{}
			for _, f := range vm.Get("findings").Array() {
				counted[sf(`pvediskcheck_check_findings{code=%q,severity=%q,vmid="%s"}`, f.Get("code").String(), f.Get("severity").String(), vmid)]++
			}
			got := map[string]int{}
			for _, l := range strings.Split(mout, "\n") {
				if k, n, ok := strings.Cut(l, "} "); ok && strings.HasPrefix(l, "pvediskcheck_check_findings{") {
					v, _ := strconv.Atoi(n)
					got[k+"}"] = v
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(counted) {
				t.Errorf("metrics: findings %v, check --json %v", got, counted)
			}
			for _, bad := range []string{"pvediskcheck_disk_info{", `source="config"} 1`, `source="qmp"} 1`, `source="node"} 1`} {
				if strings.Contains(mout, bad) {
					t.Errorf("metrics of a stopped VM has %s", bad)
				}
			}

			out, errs, code = run("discard", vmid)
			switch {
			case code == exitUnreachable && strings.Contains(errs, "cannot measure the allocation") && (strings.Contains(errs, "executable file not found") || strings.Contains(errs, "dataset does not exist")):
				// Ceph's rbd is not installed here, and the zfs double
				// knows none of the corpus's zvols (zfs's own "dataset
				// does not exist"): discard stops at the first volume it
				// cannot measure (exit 3, naming the disk and the tool),
				// so nothing is listed.
				t.Logf("discard: %s", strings.TrimSpace(errs))
			case code != exitUnreachable || !strings.Contains(errs, "not running"):
				t.Errorf("discard: exit %d (%s), want 3 for a stopped VM", code, errs)
			default:
				accounted("discard", gjson.Get(out, "disks.#.id").Array(), gjson.Get(out, "notes").Array())
			}
			checkFixes("discard", out)

			out, errs, code = run("limit", vmid)
			switch {
			case code == exitUsage && strings.Contains(errs, "no disk with limits to show"):
				// A VM with CD-ROMs only: nothing to limit, each said why.
				accounted("limit", nil, []gjson.Result{{Type: gjson.String, Str: strings.TrimPrefix(errs, "pvediskcheck: ")}})
			case code != exitUnreachable || !strings.Contains(errs, "not running"):
				t.Errorf("limit: exit %d (%s), want 3 for a stopped VM", code, errs)
			default:
				accounted("limit", gjson.Get(out, "#.disk").Array(), gjson.Get(out, "#.notes|@flatten").Array())
			}

			_, errs, code = run("flush", vmid)
			if code != exitUnreachable || !strings.Contains(errs, "not running") {
				t.Errorf("flush: exit %d (%s), want 3: it needs a running VM", code, errs)
			}

			// thin, per LVM-thin storage of the tree (no ZFS tools here):
			// every thin volume the VM names is in its pool, owned by it.
			// The lvs double knows a volume group by its volumes: only
			// the pools this VM has volumes on exist in the tree.
			var pools []string
			for id, s := range st {
				if s.Type == "lvmthin" && strings.Contains(thinState(t, root), s.Props["vgname"]+" ") {
					pools = append(pools, id)
				}
			}
			sort.Strings(pools)
			if len(pools) > 0 {
				out, errs, code = run(append([]string{"thin"}, pools...)...)
				if code != exitOK {
					t.Errorf("thin: exit %d (%s)", code, errs)
				}
				owned := map[string]string{}
				for _, v := range gjson.Get(out, "pools.#.volumes|@flatten").Array() {
					if v.Get("vmid").Int() == int64(c.vmid) && v.Get("guest").String() == "vm" {
						owned[v.Get("disk").String()] = v.Get("name").String()
					}
				}
				for _, k := range append(qemuserver.DiskKeys(cfg.Main), qemuserver.UnusedKeys(cfg.Main)...) {
					d, err := qemuserver.ParseDrive(k, cfg.Main[k])
					if err != nil || st[d.StorageID()] == nil || st[d.StorageID()].Type != "lvmthin" {
						continue
					}
					if owned[k] == "" && !strings.Contains(out, `"name": "`+d.VolName()+`"`) {
						t.Errorf("thin: %s (%s) is in no pool", k, d.Volume)
					}
				}
				checkFixes("thin", out)
			}
		})
	}
	for k := qemuserver.KindDisk; k <= qemuserver.KindTPMState; k++ {
		if kinds[k] == 0 {
			t.Errorf("no %s drive in the corpus: the test does not cover that kind", k)
		}
	}
	t.Logf("%d configs, drives by kind %v, %d printed fixes parsed", len(cases), kinds, fixes)
}

func thinState(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "var/lib/lvm-thin/volumes"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// findingSet is check --json's findings of one VM as "severity code disk"
// lines, sorted.
func findingSet(vm gjson.Result) []string {
	var out []string
	for _, f := range vm.Get("findings").Array() {
		out = append(out, f.Get("severity").String()+" "+f.Get("code").String()+" "+f.Get("disk").String())
	}
	sort.Strings(out)
	return out
}

// elsewhereDisks are the findings a node named here must add for the
// VM's drives (disks, EFI, TPM, ISOs) on storages whose nodes list leaves
// it out: the next start fails on them (storage-unavailable), read from
// the input's own storage.cfg and config.
func elsewhereDisks(t *testing.T, root string, vmid int, here string) []string {
	t.Helper()
	cfg, err := qemuserver.LoadConfig(filepath.Join(root, "etc/pve/qemu-server", strconv.Itoa(vmid)+".conf"), vmid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := qemuserver.LoadStorages(filepath.Join(root, "etc/pve/storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	next := cfg.Next()
	for _, k := range qemuserver.DiskKeys(next) {
		d, err := qemuserver.ParseDrive(k, next[k])
		if err != nil || st[d.StorageID()] == nil || st[d.StorageID()].Bool("disable") {
			continue
		}
		if nodes := st[d.StorageID()].Props["nodes"]; nodes != "" && !slices.Contains(strings.Split(nodes, ","), here) {
			out = append(out, "error storage-unavailable "+k)
		}
	}
	return out
}

// TestRealWorldBackupsAndStorageCfg runs every real config through the
// newer paths of check: the backup configuration (vzdump.conf, jobs.cfg:
// a job for all VMs with fleecing on local-lvm, one bound to this node
// with vzdump.conf's fleecing on a storage storage.cfg lacks, one bound
// to another node, one disabled) with and without the node's name in the
// tree, and the same storage.cfg with CRLF line ends and with a BOM before
// an extra first section. Asserted exactly: the backups check lists, the
// one fleecing-storage finding, the notes of what cannot be told, and
// that neither CRLF nor the BOM changes a finding (the BOM costs Proxmox
// that first section only, said in a note naming line 1).
func TestRealWorldBackupsAndStorageCfg(t *testing.T) {
	cases := corpusCases(t)
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", doubles+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, _, _ := buildTree(t, c)
			t.Setenv(fakenode.EnvRoot, root)
			vmid := strconv.Itoa(c.vmid)
			write := func(p, s string) {
				t.Helper()
				if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			check := func(args ...string) (gjson.Result, string, int) {
				t.Helper()
				out, errs, code := runCLI(t, append([]string{"--root", root, "--json", "check"}, args...)...)
				if code != exitOK && code != exitProblem {
					t.Fatalf("check %v: exit %d (%s)", args, code, errs)
				}
				if strings.Contains(errs, "panic") || len(strings.Split(strings.TrimSpace(errs), "\n")) > 1 {
					t.Errorf("check %v: stderr %q", args, errs)
				}
				return gjson.Get(out, "vms.0"), out, code
			}
			clean, _, _ := check(vmid)
			base := findingSet(clean)
			if clean.Get("backups").Exists() {
				t.Fatalf("backups without jobs.cfg: %s", clean.Get("backups"))
			}

			write("etc/vzdump.conf", "# defaults\nfleecing: 1,storage=nowhere\n")
			write("etc/pve/jobs.cfg", "vzdump: rw-all\n\tall 1\n\tfleecing 1,storage=local-lvm\n\tstorage backup\n\n"+
				"vzdump: rw-here\n\tvmid "+vmid+"\n\tnode rwnode\n\n"+
				"vzdump: rw-elsewhere\n\tvmid "+vmid+"\n\tnode othernode\n\tfleecing 1,storage=nowhere\n\n"+
				"vzdump: rw-off\n\tvmid "+vmid+"\n\tenabled 0\n")
			for _, named := range []bool{true, false} {
				if named {
					write("etc/hostname", "rwnode\n")
				} else if err := os.Remove(filepath.Join(root, "etc/hostname")); err != nil {
					t.Fatal(err)
				}
				for _, args := range [][]string{{vmid}, {"--all"}} {
					vm, _, _ := check(args...)
					var got []string
					for _, b := range vm.Get("backups").Array() {
						got = append(got, sf("%s %v %s %s %q", b.Get("job"), b.Get("fleecing").Bool(), b.Get("fleecing_storage"), b.Get("fleecing_from"), b.Get("fleecing_storage_unsuitable")))
					}
					want := []string{`rw-all true local-lvm job ""`}
					wantFindings := base
					var notes []string
					for _, n := range vm.Get("notes").Array() {
						if strings.HasPrefix(n.String(), "backup job ") {
							notes = append(notes, n.String())
						}
					}
					var wantNotes []string
					if named {
						want = append(want, `rw-here true nowhere vzdump.conf "storage nowhere is not in storage.cfg"`)
						wantFindings = append(append([]string{}, base...), "warning fleecing-storage ")
						wantFindings = append(wantFindings, elsewhereDisks(t, root, c.vmid, "rwnode")...)
						sort.Strings(wantFindings)
					} else {
						for _, j := range []string{"rw-here runs on node rwnode", "rw-elsewhere runs on node othernode"} {
							wantNotes = append(wantNotes, "backup job "+j+" only, and this node's name is unknown (no /etc/pve/local or /etc/hostname below the root): whether it backs this VM up is not checked")
						}
					}
					if !slices.Equal(got, want) || !slices.Equal(findingSet(vm), wantFindings) || !slices.Equal(notes, wantNotes) {
						t.Errorf("check %v (node named %v):\nbackups  %q\nwant     %q\nfindings %q\nwant     %q\nnotes    %q\nwant     %q", args, named, got, want, findingSet(vm), wantFindings, notes, wantNotes)
					}
				}
			}
			if err := os.Remove(filepath.Join(root, "etc/pve/jobs.cfg")); err != nil {
				t.Fatal(err)
			}

			// storage.cfg with CRLF, then with a BOM before an extra first
			// section: the same findings.
			write("etc/pve/storage.cfg", strings.ReplaceAll(string(c.storageCfg), "\n", "\r\n"))
			if vm, _, _ := check(vmid); !slices.Equal(findingSet(vm), base) {
				t.Errorf("CRLF storage.cfg: %q, want %q", findingSet(vm), base)
			}
			write("etc/pve/storage.cfg", "\ufeffdir: bomdummy\n\tpath /nowhere\n\n"+string(c.storageCfg))
			vm, _, _ := check(vmid)
			bom := false
			for _, n := range vm.Get("notes").Array() {
				bom = bom || n.String() == filepath.Join(root, "etc/pve/storage.cfg")+` line 1: section "bomdummy" skipped: no storage type is called "\ufeffdir" (Proxmox: "unsupported type")`
			}
			if !slices.Equal(findingSet(vm), base) || !bom {
				t.Errorf("storage.cfg after a BOM: %q (want %q), note of line 1 %v: %s", findingSet(vm), base, bom, vm.Get("notes"))
			}
		})
	}
}

// fioTestRe is a real-world fio file's test, its name without the run.
var fioTestRe = regexp.MustCompile(`^(arau-t\d-[a-z]+|brahiam-[a-z]+-\d+[MG])-`)

// TestRealWorldFioCompare: fio compare on the real-world fio files, each
// test's runs as one side (a directory) and the whole corpus as another,
// every pair both ways. A vs B and B vs A compare the same jobs and
// metrics with the same verdicts (the better side swapped) and exit the
// same; a side holding several option sets of one job is compared only
// with the same options (no "options differ" note, no two table rows
// alike); fio summary names no group twice in a warning.
func TestRealWorldFioCompare(t *testing.T) {
	src := filepath.Join(corpus.Dir(t, corpus.RealWorld), "fio")
	files, _ := filepath.Glob(filepath.Join(src, "*.json"))
	tmp := t.TempDir()
	sides := map[string]string{"all": src}
	for _, f := range files {
		m := fioTestRe.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			t.Fatalf("%s: no test in its name", f)
		}
		sides[m[1]] = filepath.Join(tmp, m[1])
		copyFile(t, f, filepath.Join(tmp, m[1], filepath.Base(f)))
	}
	if len(sides) != 16 {
		t.Fatalf("%d sides", len(sides))
	}
	// A row's workload is A's: the key is the job, direction and metric
	// (one set a side compares whatever options differ, said in a note).
	type row struct{ key, verdict, better string }
	compare := func(a, b string) ([]row, gjson.Result, int) {
		out, errs, code := runCLI(t, "--json", "fio", "compare", sides[a], sides[b])
		if code != exitOK && code != exitProblem || errs != "" {
			t.Fatalf("%s vs %s: exit %d (%s)", a, b, code, errs)
		}
		var rows []row
		for _, r := range gjson.Get(out, "comparisons").Array() {
			rows = append(rows, row{r.Get("job").String() + " " + r.Get("direction").String() + " " + r.Get("metric").String(), r.Get("verdict").String(), r.Get("better").String()})
		}
		return rows, gjson.Get(out, "notes"), code
	}
	names := qemuserver.SortedKeys(sides)
	pairs, compared := 0, 0
	for i, a := range names {
		for _, b := range names[i:] {
			ab, notes, codeAB := compare(a, b)
			ba, _, codeBA := compare(b, a)
			pairs++
			compared += len(ab)
			if codeAB != codeBA || len(ab) != len(ba) {
				t.Errorf("%s vs %s: exit %d, %d rows; swapped: exit %d, %d rows", a, b, codeAB, len(ab), codeBA, len(ba))
				continue
			}
			swap := map[string]string{"A": "B", "B": "A", "": ""}
			for k := range ab {
				if ab[k].key != ba[k].key || ab[k].verdict != ba[k].verdict || ab[k].better != swap[ba[k].better] {
					t.Errorf("%s vs %s row %d: %+v; swapped %+v", a, b, k, ab[k], ba[k])
				}
			}
			if a == "all" || b == "all" {
				for _, n := range notes.Array() {
					if strings.HasPrefix(n.String(), "options differ") {
						t.Errorf("%s vs %s: a side with several option sets paired different options: %s", a, b, n)
					}
				}
			}
			if a == b && (len(ab) == 0 || len(notes.Array()) != 0) {
				t.Errorf("%s vs itself: %d rows, notes %s", a, len(ab), notes)
			}
		}
	}
	// The table: no two rows alike, each job named with its workload.
	out, _, _ := runCLI(t, "fio", "compare", src, src)
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasPrefix(l, "test") && !strings.HasPrefix(l, "vol0") {
			continue
		}
		k := strings.Join(f[:len(f)-8], " ") // JOB (WORKLOAD) I/O METRIC
		if seen[k] {
			t.Errorf("fio compare: two rows %q", k)
		}
		seen[k] = true
	}
	// fio summary: each group a warning applies to, once.
	out, _, _ = runCLI(t, "fio", "summary", src)
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "      ") || l == "      all runs" {
			continue
		}
		where := strings.Split(strings.TrimSpace(l), "), ")
		if len(slices.Compact(slices.Sorted(slices.Values(where)))) != len(where) {
			t.Errorf("fio summary names a group twice: %s", l)
		}
	}
	t.Logf("%d sides, %d pairs both ways, %d rows compared", len(sides), pairs, compared)
}

// TestRealWorldCheckAll: check --all on one node holding every real config
// of a setup (those whose VMIDs do not collide), with its storage.cfg: the
// same findings, per VM, as check of that VM alone on its own tree; every
// VM listed once; the exit code that of the worst of them.
func TestRealWorldCheckAll(t *testing.T) {
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", doubles+string(os.PathListSeparator)+os.Getenv("PATH"))
	type alone struct {
		findings []string
		code     int
	}
	nodes := map[string][]corpusCase{}
	var order []string
	for _, c := range corpusCases(t) {
		node := "shapes" // qemuserver/testdata/shapes: one node, VMIDs 601 on
		if i := strings.LastIndex(c.name, "-"); i > 0 && !strings.Contains(c.conf, "shapes") {
			node = c.name[:i]
		}
		if nodes[node] == nil {
			order = append(order, node)
		}
		nodes[node] = append(nodes[node], c)
	}
	vms := 0
	for _, node := range order {
		t.Run(node, func(t *testing.T) {
			all := t.TempDir()
			var volumes strings.Builder
			want := map[string]alone{}
			worst := exitOK
			for _, c := range nodes[node] {
				root, _, _ := buildTree(t, c)
				t.Setenv(fakenode.EnvRoot, root)
				out, errs, code := runCLI(t, "--root", root, "--json", "check", strconv.Itoa(c.vmid))
				if code != exitOK && code != exitProblem {
					t.Fatalf("%s: exit %d (%s)", c.name, code, errs)
				}
				if _, dup := want[strconv.Itoa(c.vmid)]; dup {
					t.Fatalf("%s: VMID %d twice on %s", c.name, c.vmid, node)
				}
				want[strconv.Itoa(c.vmid)] = alone{findingSet(gjson.Get(out, "vms.0")), code}
				worst = max(worst, code)
				copyFile(t, c.conf, filepath.Join(all, "etc/pve/qemu-server", strconv.Itoa(c.vmid)+".conf"))
				if err := os.WriteFile(filepath.Join(all, "etc/pve/storage.cfg"), c.storageCfg, 0o644); err != nil {
					t.Fatal(err)
				}
				if c.cephConf != nil {
					copyFile(t, filepath.Join(root, "etc/pve/ceph.conf"), filepath.Join(all, "etc/pve/ceph.conf"))
				}
				volumes.WriteString(thinState(t, root))
				// Passthrough disks and file images: the node has them.
				_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
					rel, _ := filepath.Rel(root, p)
					if err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(rel, "etc/") && !strings.HasPrefix(rel, "var/lib/lvm-thin/") {
						sparse(t, filepath.Join(all, rel), fi.Size())
					}
					return nil
				})
			}
			for _, d := range []string{"var/run/qemu-server", "var/lib/lvm-thin"} {
				if err := os.MkdirAll(filepath.Join(all, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(all, "var/lib/lvm-thin/volumes"), []byte(volumes.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv(fakenode.EnvRoot, all)
			out, errs, code := runCLI(t, "--root", all, "--json", "check", "--all")
			if code != worst {
				t.Errorf("check --all: exit %d (%s), want %d, the worst of the VMs alone", code, errs, worst)
			}
			got := map[string]bool{}
			for _, vm := range gjson.Get(out, "vms").Array() {
				id := vm.Get("vmid").String()
				if got[id] {
					t.Errorf("VM %s listed twice", id)
				}
				got[id] = true
				if w, ok := want[id]; !ok {
					t.Errorf("VM %s is no config of %s", id, node)
				} else if !slices.Equal(findingSet(vm), w.findings) {
					t.Errorf("VM %s: --all %q, alone %q", id, findingSet(vm), w.findings)
				}
			}
			if len(got) != len(want) {
				t.Errorf("check --all listed %d VMs, %d configs", len(got), len(want))
			}
			vms += len(got)
		})
	}
	t.Logf("%d nodes, %d VMs", len(order), vms)
}
