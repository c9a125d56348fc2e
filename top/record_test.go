//go:build record

package top

// TestRecordFixtures records the fixtures of top/testdata, threads/testdata
// and qmp/testdata from real QEMU (as root, with loop devices):
//
//	go test -tags record -run TestRecordFixtures -count=1 ./top/
//
// It starts Lab 37's VM 370 (fakenode.CreateLab370) on both command-line
// generations, writes to scsi1 through qemu-io under a 20 MiB/s write limit
// (256 KiB requests, 16 in flight), and saves what top reads: QMP replies,
// the QEMU process's /proc/<pid>/task/<tid>/{stat,schedstat,comm} and the
// loop devices' /sys/class/block/<dev>/stat, twice, 1 s apart; then a
// blockdev-backup of scsi1 to a scratch volume with the block graph.

import (
	"context"
	"encoding/json"
	"github.com/pvediskcheck/pvediskcheck/node"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func TestRecordFixtures(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(gen, func(t *testing.T) { record(t, gen) })
	}
}

func record(t *testing.T, gen string) {
	n := fakenode.NewT(t)
	if err := n.CreateLab370(""); err != nil {
		t.Fatal(err)
	}
	qv, err := fakenode.QEMUVersion(fakenode.QEMUBinary())
	if err != nil {
		t.Fatal(err)
	}
	vmq := n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
	sock := n.Paths.QMPSocket(370)
	exec := func(cmd string, args any) json.RawMessage {
		var out json.RawMessage
		err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
			r, err := s.Exec(cmd, args)
			out = json.RawMessage(r.Raw)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	full := map[string]int64{}
	for _, k := range qmp.ThrottleLimitNames {
		full[k] = 0
		if strings.HasSuffix(k, "-max-length") {
			full[k] = 1
		}
	}
	full["bps-write"] = 20 << 20
	if err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		return s.SetThrottleLimits("scsi1", gen == "blockdev", full)
	}); err != nil {
		t.Fatal(err)
	}
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 256 << 10, Depth: 16})
	time.Sleep(4 * time.Second) // past the throttle's first burst
	dir := filepath.Join("testdata", "lab370-"+gen)
	tdir := filepath.Join("..", "threads", "testdata", "lab370-"+gen)
	for _, d := range []string{dir, tdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(vmq.Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	// Paths below the scratch node are made relative to a fixed root.
	root := n.Root
	fix := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), root, "/ROOT")) }
	write(filepath.Join(tdir, "cmdline"), fix(raw))
	write(filepath.Join(dir, "cmdline"), fix(raw))
	write(filepath.Join(tdir, "query-iothreads.json"), exec("query-iothreads", nil))
	write(filepath.Join(tdir, "query-cpus-fast.json"), exec("query-cpus-fast", nil))
	write(filepath.Join(dir, "query-iothreads.json"), exec("query-iothreads", nil))
	write(filepath.Join(dir, "query-cpus-fast.json"), exec("query-cpus-fast", nil))
	write(filepath.Join(dir, "query-block.json"), fix(exec("query-block", nil)))
	if gen == "blockdev" {
		write(filepath.Join(dir, "qom-get-throttle-drive-scsi1-limits.json"), exec("qom-get", map[string]any{"path": "throttle-drive-scsi1", "property": "limits"}))
	}
	v, err := vm.Load(context.Background(), node.New(n.Paths, 0), 370)
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	host := sampler.Host{Proc: "/proc", Sys: "/sys"}
	for _, d := range v.Disks {
		if name, ok := host.BlockDeviceName(d.Running.Path); ok {
			devs = append(devs, d.ID+" "+name)
		}
	}
	write(filepath.Join(dir, "devices.txt"), []byte(strings.Join(devs, "\n")+"\n"))
	for _, side := range []string{"a", "b"} {
		t0 := time.Now()
		bs := exec("query-blockstats", nil)
		t1 := time.Now()
		at := t0.Add(t1.Sub(t0) / 2)
		write(filepath.Join(dir, "query-blockstats-"+side+".json"), fix(bs))
		tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(vmq.Pid), "task"))
		for _, task := range tasks {
			for _, f := range []string{"stat", "schedstat", "comm"} {
				b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(vmq.Pid), "task", task.Name(), f))
				if err != nil {
					continue
				}
				write(filepath.Join(tdir, "proc-"+side, strconv.Itoa(vmq.Pid), "task", task.Name(), f), b)
			}
		}
		threadsAt := time.Now()
		for _, dv := range devs {
			name := strings.Fields(dv)[1]
			b, err := os.ReadFile(filepath.Join("/sys/class/block", name, "stat"))
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(dir, "sys-"+side, "class", "block", name, "stat"), b)
		}
		devicesAt := time.Now()
		times, _ := json.Marshal(map[string]int64{"blockstats_ns": at.UnixNano(), "threads_ns": threadsAt.UnixNano(), "devices_ns": devicesAt.UnixNano()})
		write(filepath.Join(dir, "times-"+side+".json"), times)
		write(filepath.Join(tdir, "times-"+side+".json"), times)
		if side == "a" {
			time.Sleep(time.Second - time.Since(t0))
		}
	}
	write(filepath.Join(dir, "pid"), []byte(strconv.Itoa(vmq.Pid)+"\n"))
	write(filepath.Join(tdir, "pid"), []byte(strconv.Itoa(vmq.Pid)+"\n"))
	stats := load.Stop()
	if stats.Err != nil {
		t.Fatal(stats.Err)
	}
	write(filepath.Join(dir, "qemu-version"), []byte(qv+"\n"))
	write(filepath.Join(tdir, "qemu-version"), []byte(qv+"\n"))

	if gen != "blockdev" {
		return
	}
	// A backup-like job: blockdev-backup of scsi1 to a scratch volume,
	// slowed down so it is still running when asked about.
	scratch := n.MustVolume(t, "local", "370/scratch.raw", fakenode.Lab370DiskSize)
	exec("blockdev-add", map[string]any{"driver": "raw", "node-name": "scratch", "file": map[string]any{"driver": "file", "filename": scratch}})
	exec("blockdev-backup", map[string]any{"job-id": "backup-scsi1-test", "device": "drive-scsi1", "target": "scratch", "sync": "full", "speed": 1 << 20})
	qdir := filepath.Join("..", "qmp", "testdata")
	write(filepath.Join(qdir, "query-block-jobs-backup-7.2.json"), exec("query-block-jobs", nil))
	write(filepath.Join(qdir, "x-debug-query-block-graph-backup-7.2.json"), exec("x-debug-query-block-graph", nil))
	write(filepath.Join(dir, "query-block-jobs-backup.json"), exec("query-block-jobs", nil))
	write(filepath.Join(dir, "x-debug-query-block-graph-backup.json"), exec("x-debug-query-block-graph", nil))
}

// TestRecordPCI records query-pci of Lab 37's VM 370 (-blockdev, q35) for
// guestdisk/testdata:
//
//	go test -tags record -run TestRecordPCI -count=1 ./top/
func TestRecordPCI(t *testing.T) {
	n := fakenode.NewT(t)
	if err := n.CreateLab370(""); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	var out json.RawMessage
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
		r, err := s.Exec("query-pci", nil)
		out = json.RawMessage(r.Raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("../guestdisk/testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("../guestdisk/testdata/query-pci-lab370.json", out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordDriveBackup records a drive-backup's block graph under -drive
// for qmp/testdata (there BlockBackends are named drive-<id>):
//
//	go test -tags record -run TestRecordDriveBackup -count=1 ./top/
func TestRecordDriveBackup(t *testing.T) {
	n := fakenode.NewT(t)
	if err := n.CreateLab370(""); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: true})
	scratch := n.MustVolume(t, "local", "370/scratch.raw", fakenode.Lab370DiskSize)
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
		if _, err := s.Exec("drive-backup", map[string]any{"device": "drive-scsi1", "target": scratch, "sync": "full", "format": "raw", "mode": "existing", "speed": 1 << 20}); err != nil {
			return err
		}
		for _, c := range []struct{ cmd, file string }{
			{"query-block-jobs", "query-block-jobs-drive-backup-7.2.json"},
			{"x-debug-query-block-graph", "x-debug-query-block-graph-drive-backup-7.2.json"},
		} {
			r, err := s.Exec(c.cmd, nil)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join("..", "qmp", "testdata", c.file), []byte(r.Raw), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecordFleecing records a backup with fleecing for qmp/testdata (QEMU
// >= 10: 7.2 aborts at the copy-before-write filter's blockdev-add):
//
//	PVEDISKCHECK_QEMU=$PWD/scripts/qemu-11.1 go test -tags record -run TestRecordFleecing -count=1 ./top/
func TestRecordFleecing(t *testing.T) {
	n := fakenode.NewT(t)
	if err := n.CreateLab370(""); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	fleece := n.MustVolume(t, "local", "370/fleece.raw", fakenode.Lab370DiskSize)
	target := n.MustVolume(t, "local", "370/target.raw", fakenode.Lab370DiskSize)
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
		nodes, err := s.Exec("query-named-block-nodes", map[string]any{"flat": true})
		if err != nil {
			return err
		}
		g := qmp.ParseNamedBlockNodes(nodes)
		dg, err := s.Exec("x-debug-query-block-graph", nil)
		if err != nil {
			return err
		}
		g.AddDebugGraph(dg)
		format := g.Children["drive-scsi1"]["file"]
		for _, st := range []struct {
			cmd  string
			args map[string]any
		}{
			{"blockdev-add", map[string]any{"driver": "raw", "node-name": "fleece", "file": map[string]any{"driver": "file", "filename": fleece}}},
			{"blockdev-add", map[string]any{"driver": "copy-before-write", "node-name": "cbw", "file": format, "target": "fleece"}},
			{"blockdev-reopen", map[string]any{"options": []any{map[string]any{"driver": "throttle", "node-name": "drive-scsi1", "throttle-group": "throttle-drive-scsi1", "file": "cbw"}}}},
			{"blockdev-add", map[string]any{"driver": "snapshot-access", "node-name": "snap", "file": "cbw"}},
			{"blockdev-add", map[string]any{"driver": "raw", "node-name": "target", "file": map[string]any{"driver": "file", "filename": target}}},
			{"blockdev-backup", map[string]any{"job-id": "backup-scsi1-fleece", "device": "snap", "target": "target", "sync": "full", "speed": 1 << 20}},
		} {
			if _, err := s.Exec(st.cmd, st.args); err != nil {
				return err
			}
		}
		for name, cmd := range map[string]string{"x-debug-query-block-graph-fleecing-11.1.json": "x-debug-query-block-graph", "query-block-jobs-fleecing-11.1.json": "query-block-jobs"} {
			r, err := s.Exec(cmd, nil)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join("..", "qmp", "testdata", name), []byte(r.Raw), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
