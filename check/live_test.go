package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// patch replaces old with new in every recorded reply.
func patch(rec recording, old, new string) recording {
	out := rec
	out.Replies = map[string]json.RawMessage{}
	for k, v := range rec.Replies {
		out.Replies[k] = json.RawMessage(strings.ReplaceAll(string(v), old, new))
	}
	return out
}

// withImages creates the recorded VM's volume files below the node's root,
// where /proc/<pid>/root (the host's /) leads, so statfs has a filesystem.
func withImages(t *testing.T, tn *tnode) {
	for _, p := range []string{"mnt/small/images/390/vm-390-disk-1.raw", "var/lib/vz/images/390/vm-390-disk-2.raw"} {
		tn.image(p, 1<<20, true)
	}
}

// TestIOError replays the three pauses TestCheckIOError recorded from QEMU
// 7.2 (testdata/README.md).
func TestIOError(t *testing.T) {
	for _, c := range []struct {
		name, file string
		edit       func(recording) recording
		want       []string
		notes      int
	}{
		{"no space left", "real-ioerror-nospace.json", nil, []string{"error io-error scsi1"}, 0},
		{"resumed: io-status kept", "real-ioerror-resumed.json", nil, []string{"info io-error scsi1"}, 0},
		{"EIO after an earlier pause", "real-ioerror-failed.json", nil, []string{"error io-error scsi1", "error io-error scsi2"}, 1},
		{"paused, no disk named", "real-ioerror-failed.json", func(r recording) recording {
			return patch(patch(r, `"io-status":"nospace"`, `"io-status":"ok"`), `"io-status":"failed"`, `"io-status":"ok"`)
		}, []string{"error io-error -"}, 0},
		{"paused, one disk named", "real-ioerror-failed.json", func(r recording) recording {
			return patch(r, `"io-status":"nospace"`, `"io-status":"ok"`)
		}, []string{"error io-error scsi2"}, 0},
		{"running, nothing flagged", "real-ioerror-resumed.json", func(r recording) recording {
			return patch(r, `"io-status":"nospace"`, `"io-status":"ok"`)
		}, []string{}, 0},
		{"paused by the user, not by an error", "real-ioerror-resumed.json", func(r recording) recording {
			return patch(patch(r, `"io-status":"nospace"`, `"io-status":"ok"`), `"status":"running"`, `"status":"paused"`)
		}, []string{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := loadRecording(t, c.file)
			if c.edit != nil {
				rec = c.edit(rec)
			}
			tn := newNode(t)
			tn.replay(t, rec, 390, "")
			withImages(t, tn)
			v := tn.check(390, quietRunner(), Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) || len(v.Notes) != c.notes || v.Err != nil || !v.Running {
				t.Fatalf("findings %q notes %q err %v, want %q", got, v.Notes, v.Err, c.want)
			}
			for _, f := range v.Findings {
				t.Logf("%s %s %s: %s / %s", f.Severity, f.Code, f.Disk, f.Message, f.Fix)
				switch {
				case f.Severity == Info:
					if f.Fix != "" || !strings.Contains(f.Message, "paused the VM since it started and it was resumed") {
						t.Errorf("%+v", f)
					}
				case f.Disk == "scsi1":
					if !strings.Contains(f.Message, "the VM is paused by an I/O error on this disk: no space left on the storage (io-status nospace); storage small (dir): ") ||
						!strings.Contains(f.Message, " free of ") || f.Fix != "free space on the storage or extend it, then qm resume 390" {
						t.Errorf("%+v", f)
					}
				case f.Disk == "scsi2":
					if !strings.Contains(f.Message, "the storage failed a request (io-status failed); storage local (dir): ") ||
						f.Fix != "find and repair what fails below the disk (dmesg, the storage), then qm resume 390" {
						t.Errorf("%+v", f)
					}
				default:
					if !strings.Contains(f.Message, "no disk's io-status names it") || !strings.HasSuffix(f.Fix, "then qm resume 390") {
						t.Errorf("%+v", f)
					}
				}
			}
			if c.notes > 0 && !strings.Contains(v.Notes[0], "one of the disks named may be from an earlier pause") {
				t.Errorf("note %q", v.Notes[0])
			}
		})
	}
}

// TestIOErrorStorageUse: a thin pool's figures, a path the node cannot
// stat, a block device.
func TestIOErrorStorageUse(t *testing.T) {
	rec := loadRecording(t, "real-ioerror-nospace.json")
	tn := newNode(t)
	tn.replay(t, rec, 390, "")
	// No image files: statfs cannot read the storage.
	v := tn.check(390, quietRunner(), Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.Contains(f.Message, "storage small (dir): use unknown (statfs: no such file or directory)") {
		t.Errorf("%+v", v.Findings)
	}
	// The same disk on local-lvm: the pool's data and metadata.
	conf := strings.ReplaceAll(rec.Config, "small:390/vm-390-disk-1.raw", "local-lvm:vm-390-disk-1")
	tn = newNode(t)
	tn.replay(t, rec, 390, conf)
	r := quietRunner()
	r.Out["lvs"] = lvsJSON(lvsRow{size: 1 << 30, data: "100.00", metadata: "12.50"}, lvsRow{name: "vm-390-disk-1", size: 64 << 20, data: "100.00"})
	v = tn.check(390, r, Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.Contains(f.Message, "storage local-lvm (lvmthin): pool pve/data data 100.00 % of 1.00 GiB, metadata 12.50 %") {
		t.Errorf("%+v", v.Findings)
	}
	// lvs failing: the use is unknown, the finding stays.
	r.Err = map[string]error{"lvs": errors.New("lvs broke")}
	v = tn.check(390, r, Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.Contains(f.Message, "local-lvm (lvmthin): use unknown (`lvs ") || !strings.Contains(f.Message, "lvs broke)") || f.Severity != Error {
		t.Errorf("%+v", v.Findings)
	}
	// A ZFS pool has no metadata figure.
	conf = strings.ReplaceAll(rec.Config, "small:390/vm-390-disk-1.raw", "local-zfs:vm-390-disk-1")
	tn = newNode(t)
	tn.replay(t, rec, 390, conf)
	v = tn.check(390, quietRunner(), Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.Contains(f.Message, "storage local-zfs (zfspool): pool rpool/data data 0.99 % of 101.00 GiB;") && !strings.HasSuffix(f.Message, "pool rpool/data data 0.99 % of 101.00 GiB") {
		t.Errorf("%+v", v.Findings)
	}
	// A disk given as a path: named by it, its filesystem's use.
	conf = strings.ReplaceAll(rec.Config, "small:390/vm-390-disk-1.raw", rec.Root+"/mnt/small/images/390/vm-390-disk-1.raw")
	tn = newNode(t)
	tn.replay(t, rec, 390, conf)
	withImages(t, tn)
	v = tn.check(390, quietRunner(), Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.Contains(f.Message, "; path "+tn.root+"/mnt/small/images/390/vm-390-disk-1.raw: ") || !strings.Contains(f.Message, " free of ") {
		t.Errorf("%+v", v.Findings)
	}
	// A block device the tool has no figure for.
	conf = strings.ReplaceAll(rec.Config, "small:390/vm-390-disk-1.raw", "thick:vm-390-disk-1")
	tn = newNode(t)
	tn.replay(t, rec, 390, conf)
	v = tn.check(390, quietRunner(), Options{})
	if f := find(v, CodeIOError, "scsi1"); f == nil || !strings.HasSuffix(f.Message, "storage thick (lvm): use not known to this tool") {
		t.Errorf("%+v", v.Findings)
	}
}

// quiet is the resumed recording with nothing flagged: a running VM as
// QEMU 7.2 reported it, for the running-VM rules.
func quiet(t *testing.T) recording {
	return patch(loadRecording(t, "real-ioerror-resumed.json"), `"io-status":"nospace"`, `"io-status":"ok"`)
}

// TestRunningVM: drift, [PENDING] and the fix texts on a running VM.
func TestRunningVM(t *testing.T) {
	rec := quiet(t)
	t.Run("started from its config", func(t *testing.T) {
		tn := newNode(t)
		tn.replay(t, rec, 390, "")
		withImages(t, tn)
		v := tn.check(390, quietRunner(), Options{})
		if got := summary(v); len(got) != 0 || !v.Running || len(v.Disks) != 2 || v.Disks[0].Running == nil || v.Disks[0].Configured == nil {
			t.Fatalf("%q %+v", got, v)
		}
		if !reflect.DeepEqual(v.Disks[0].Running, v.Disks[0].Configured) {
			t.Errorf("configured %+v running %+v", v.Disks[0].Configured, v.Disks[0].Running)
		}
	})
	t.Run("config edited behind the running VM", func(t *testing.T) {
		tn := newNode(t)
		tn.replay(t, rec, 390, strings.Replace(rec.Config, "discard=on,iothread=1,size=64M", "cache=writeback,discard=on,iothread=1,size=64M", 1))
		withImages(t, tn)
		v := tn.check(390, quietRunner(), Options{})
		if got := summary(v); !reflect.DeepEqual(got, []string{"warning cache-writeback scsi1", "warning drift scsi1"}) {
			t.Fatalf("%q", got)
		}
		if f := find(v, CodeDrift, "scsi1"); !strings.Contains(f.Message, "cache_direct: config false, running true") || f.Fix != "qm reboot 390 (applies the config) "+restartHint {
			t.Errorf("%+v", f)
		}
		want := "qm set 390 --scsi1 small:390/vm-390-disk-1.raw,discard=on,iothread=1,size=64M, then qm reboot 390 " + restartHint
		if f := find(v, CodeCacheWriteback, "scsi1"); f.Fix != want {
			t.Errorf("fix\n got %q\nwant %q", f.Fix, want)
		}
	})
	t.Run("a limit fix applies live", func(t *testing.T) {
		tn := newNode(t)
		tn.replay(t, rec, 390, strings.Replace(rec.Config, "discard=on,iothread=1,size=64M", "discard=on,iothread=1,iops_max=100,size=64M", 1))
		withImages(t, tn)
		v := tn.check(390, quietRunner(), Options{})
		if f := find(v, CodeLimitInvalid, "scsi1"); f == nil || f.Fix != "qm set 390 --scsi1 small:390/vm-390-disk-1.raw,discard=on,iothread=1,size=64M" {
			t.Errorf("%+v", v.Findings)
		}
	})
	t.Run("[PENDING] change and delete", func(t *testing.T) {
		tn := newNode(t)
		conf := rec.Config + "\n[PENDING]\nscsi1: small:390/vm-390-disk-1.raw,cache=unsafe,discard=on,iothread=1,size=64M\ndelete: scsi2,!memory\n"
		tn.replay(t, rec, 390, conf)
		withImages(t, tn)
		v := tn.check(390, quietRunner(), Options{})
		want := []string{"error cache-unsafe scsi1", "info pending-restart -", "info pending-restart scsi1", "info pending-restart scsi2"}
		if got := summary(v); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q, want %q", got, want)
		}
		if f := find(v, CodePendingRestart, "scsi2"); f.Message != "scsi2 is deleted in [PENDING]: it goes at the next restart" || f.Fix != "qm reboot 390" {
			t.Errorf("%+v", f)
		}
		if f := find(v, CodePendingRestart, "scsi1"); f.Message != "scsi1 is changed in [PENDING]: it applies at the next restart" {
			t.Errorf("%+v", f)
		}
		if f := find(v, CodePendingRestart, ""); f.Message != "memory is deleted in [PENDING]: it goes at the next restart" {
			t.Errorf("%+v", f)
		}
		if v.Disks[0].NextStart == nil || !v.Disks[0].NextStart.CacheNoFlush {
			t.Errorf("next start %+v", v.Disks[0].NextStart)
		}
	})
}

// TestNextStart: `qm showcmd` (here the recorded command line with aio
// changed) against the running VM.
func TestNextStart(t *testing.T) {
	rec := quiet(t)
	tn := newNode(t)
	tn.replay(t, rec, 390, "")
	withImages(t, tn)
	var showcmd []string
	for _, a := range rec.Cmdline {
		a = strings.ReplaceAll(a, rec.Root, tn.root)
		showcmd = append(showcmd, shellQuote(strings.Replace(a, `"aio":"io_uring"`, `"aio":"threads"`, 1)))
	}
	// The next start drops scsi2 and adds scsi3.
	cmd := strings.Join(showcmd, " ")
	cmd = strings.Replace(cmd, "drive-scsi2", "drive-scsi3", -1)
	cmd = strings.Replace(cmd, "id=scsi2", "id=scsi3", -1)
	r := quietRunner()
	r.Out["qm showcmd"] = cmd
	v := tn.check(390, r, Options{NextStart: true})
	want := []string{"info pending-restart scsi1", "info pending-restart scsi2", "info pending-restart scsi3"}
	if got := summary(v); !reflect.DeepEqual(got, want) || len(v.Notes) != 0 {
		t.Fatalf("%q %v, want %q", got, v.Notes, want)
	}
	if f := find(v, CodePendingRestart, "scsi1"); f.Message != "changes at the next start: aio: now io_uring, next start threads" || f.Fix != "qm reboot 390" {
		t.Errorf("%+v", f)
	}
	if f := find(v, CodePendingRestart, "scsi2"); f.Message != "the next start no longer attaches this disk" {
		t.Errorf("%+v", f)
	}
	if f := find(v, CodePendingRestart, "scsi3"); f.Message != "the next start attaches this disk" {
		t.Errorf("%+v", f)
	}
	if v.Disks[0].NextStart == nil || v.Disks[0].NextStart.AIO != "threads" {
		t.Errorf("next start %+v", v.Disks[0].NextStart)
	}
	if r.Calls()[len(r.Calls())-1] != "qm showcmd 390 --pretty" {
		t.Errorf("ran %v", r.Calls())
	}
	// The next start runs what runs now: nothing to say.
	var same []string
	for _, a := range rec.Cmdline {
		same = append(same, shellQuote(strings.ReplaceAll(a, rec.Root, tn.root)))
	}
	r = quietRunner()
	r.Out["qm showcmd"] = strings.Join(same, " ")
	if v := tn.check(390, r, Options{NextStart: true}); len(v.Findings) != 0 || len(v.Notes) != 0 || v.Disks[1].NextStart == nil {
		t.Errorf("same command line: %+v %v", v.Findings, v.Notes)
	}
	for _, c := range []struct {
		out  string
		err  error
		note string
	}{
		{"", errors.New("exit 2"), "--next-start: qm showcmd failed: exit 2"},
		{"kvm -drive 'unbalanced", nil, "--next-start: cannot split qm showcmd output"},
	} {
		r := quietRunner()
		r.Out["qm showcmd"] = c.out
		if c.err != nil {
			r.Err = map[string]error{"qm showcmd": c.err}
		}
		v := tn.check(390, r, Options{NextStart: true})
		if len(v.Findings) != 0 || len(v.Notes) != 1 || !strings.HasPrefix(v.Notes[0], c.note) {
			t.Errorf("%q: %+v %v", c.out, v.Findings, v.Notes)
		}
	}
	// A stopped VM: the next start's values, no comparison.
	tn2 := newNode(t)
	tn2.conf(390, strings.ReplaceAll(rec.Config, rec.Root, tn2.root))
	tn2.write("etc/pve/storage.cfg", strings.ReplaceAll(rec.StorageCfg, rec.Root, tn2.root)+"\n"+storageCfg)
	v = tn2.check(390, r, Options{NextStart: true})
	if len(v.Findings) != 0 || v.Disks[0].NextStart == nil {
		t.Errorf("stopped: %+v %+v", v.Findings, v.Disks)
	}
}

// TestLiveUnread (issue 15 #3): a running VM whose QMP socket is held,
// silent or answers errors is exit 3 with the checks that did not run; a
// copied tree without the socket is a note.
func TestLiveUnread(t *testing.T) {
	rec := quiet(t)
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, tn *tnode, conf string)
		code  exitcode.Code
		msg   string
	}{
		{"no socket (a support bundle)", func(t *testing.T, tn *tnode, conf string) {
			os.Remove(tn.n.Paths.QMPSocket(390))
		}, exitcode.OK, "no QMP socket"},
		{"socket held by another client", func(t *testing.T, tn *tnode, conf string) {
			os.Remove(tn.n.Paths.QMPSocket(390))
			q := tn.replay(t, rec, 390, conf)
			q.Hold(t)
		}, exitcode.Unreachable, "busy"},
		{"QEMU stopped: no greeting", func(t *testing.T, tn *tnode, conf string) {
			os.Remove(tn.n.Paths.QMPSocket(390))
			q := tn.qmp(390, nil)
			q.GreetDelay = time.Hour
		}, exitcode.Unreachable, "no greeting"},
		{"query-block fails", func(t *testing.T, tn *tnode, conf string) {
			os.Remove(tn.n.Paths.QMPSocket(390))
			tn.qmp(390, nil)
		}, exitcode.Unreachable, "CommandNotFound"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.n.Timeout = 300 * time.Millisecond
			conf := strings.Replace(rec.Config, "discard=on,iothread=1,size=64M", "cache=unsafe,discard=on,iothread=1,size=64M", 1)
			tn.replay(t, rec, 390, conf)
			withImages(t, tn)
			c.setup(t, tn, conf)
			r := quietRunner()
			v, set := VMLoaded(context.Background(), r.Node(tn.n), 390, Options{}, thinpool.NewCache(r))
			// VMLoaded gives the VM, with FetchLive's error.
			if set == nil || set.VM.VMID != 390 || !set.VM.Running || set.AskErr == nil || !strings.Contains(v.Notes[0], set.AskErr.Error()) {
				t.Errorf("VMLoaded: %v", set)
			}
			if exitcode.Of(v.Err) != c.code || !reflect.DeepEqual(v.NotChecked, []Code{CodeIOError, CodeDrift, CodeQEMUAdvisory}) ||
				len(v.Notes) != 1 || !strings.HasPrefix(v.Notes[0], "QMP not reachable (") || !strings.Contains(v.Notes[0], c.msg) ||
				!strings.Contains(v.Notes[0], "not checked: io-error") {
				t.Fatalf("err %v (exit %d), not checked %v, notes %q", v.Err, exitcode.Of(v.Err), v.NotChecked, v.Notes)
			}
			if c.code != exitcode.OK && !strings.HasPrefix(v.Err.Error(), "VM 390: running state not read, io-error, live drift and qemu-advisory not checked: ") {
				t.Errorf("err %v", v.Err)
			}
			// The config's own rules and the command line's drift still ran.
			if got := summary(v); !reflect.DeepEqual(got, []string{"error cache-unsafe scsi1", "warning drift scsi1"}) {
				t.Errorf("findings %q", got)
			}
			rep := Summarize([]VMResult{v})
			if exitcode.Of(rep.Err()) != c.code {
				t.Errorf("report exit %d", exitcode.Of(rep.Err()))
			}
		})
	}
}

// TestThinPoolFindings: thin-overcommit from thinpool's figures and
// thresholds, the same `thin` reports.
func TestThinPoolFindings(t *testing.T) {
	const gib = int64(1 << 30)
	vols := []lvsRow{{name: "vm-100-disk-0", size: 32 * gib, data: "50.00"}, {name: "vm-101-disk-0", size: 32 * gib, data: "50.00"}}
	for _, c := range []struct {
		name     string
		pool     lvsRow
		vols     []lvsRow
		want     []string
		contains []string
	}{
		{"quiet", lvsRow{size: 64 * gib, data: "50.00", metadata: "5.00"}, vols, []string{}, nil},
		{"overcommit exactly 1.0", lvsRow{size: 64 * gib, data: "10.00", metadata: "5.00"}, vols, []string{}, nil},
		{"a thin snapshot tips it over", lvsRow{size: 64 * gib, data: "10.00", metadata: "5.00"}, append(vols, lvsRow{name: "snap_vm-100-disk-0_a", origin: "vm-100-disk-0", size: 32 * gib}),
			[]string{"warning thin-overcommit -"}, []string{"thin pool pve/data (storage local-lvm): its volumes total 96.0 GiB on a 64.0 GiB pool (1.5x), 32.0 GiB of it thin snapshots", "lvextend -L +32G pve/data"}},
		{"data 79.99", lvsRow{size: 1024 * gib, data: "79.99", metadata: "5.00"}, vols, []string{}, nil},
		{"data 80", lvsRow{size: 1024 * gib, data: "80.00", metadata: "5.00"}, vols, []string{"warning thin-full -", "warning thin-overcommit -"}, []string{"data at 80.00 %", "stops accepting writes after 204.80 GiB more data, at 100 % data", "this VM's disks there: scsi0 (werror enospc (default): the VM pauses)"}},
		{"data 89.99", lvsRow{size: 1024 * gib, data: "89.99", metadata: "5.00"}, vols, []string{"warning thin-full -", "warning thin-overcommit -"}, nil},
		{"data 90", lvsRow{size: 1024 * gib, data: "90.00", metadata: "5.00"}, vols, []string{"error thin-full -", "error thin-overcommit -"}, []string{"data at 90.00 % (warning from 80 %, failure from 90 %)"}},
		{"metadata first 49.99", lvsRow{size: 1024 * gib, data: "5.00", metadata: "49.99"}, vols, []string{}, nil},
		{"metadata first 50", lvsRow{size: 1024 * gib, data: "5.00", metadata: "50.00"}, vols, []string{"warning thin-full -"},
			[]string{"at 100 % metadata (it fills before the data", "EIO reaches the guest", "lvextend --poolmetadatasize +SIZE pve/data"}},
		{"metadata 79.99", lvsRow{size: 1024 * gib, data: "5.00", metadata: "79.99"}, vols, []string{"warning thin-full -"}, nil},
		{"metadata 79.99 behind data", lvsRow{size: 1024 * gib, data: "85.00", metadata: "79.99"}, vols, []string{"warning thin-full -", "warning thin-overcommit -"}, []string{"at 100 % data;"}},
		{"metadata 80", lvsRow{size: 1024 * gib, data: "5.00", metadata: "80.00"}, vols, []string{"warning thin-full -", "warning thin-overcommit -"}, []string{"metadata at 80.00 %", "lvextend --poolmetadatasize +SIZE pve/data"}},
		{"metadata 89.99", lvsRow{size: 1024 * gib, data: "5.00", metadata: "89.99"}, vols, []string{"warning thin-full -", "warning thin-overcommit -"}, nil},
		{"metadata 90", lvsRow{size: 1024 * gib, data: "5.00", metadata: "90.00"}, vols, []string{"error thin-full -", "error thin-overcommit -"}, nil},
		{"everything", lvsRow{size: 32 * gib, data: "95.00", metadata: "85.00"}, vols, []string{"error thin-full -", "error thin-overcommit -", "warning thin-overcommit -", "warning thin-overcommit -"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.conf(100, "scsi0: local-lvm:vm-100-disk-0,discard=on\n")
			r := quietRunner()
			r.Out["lvs"] = lvsJSON(c.pool, c.vols...)
			v := tn.check(100, r, Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q, want %q: %+v", got, c.want, v.Findings)
			}
			all := ""
			for _, f := range v.Findings {
				all += f.Message + " | " + f.Fix + "\n"
			}
			for _, s := range c.contains {
				if !strings.Contains(all, s) {
					t.Errorf("%q not in\n%s", s, all)
				}
			}
		})
	}
	t.Run("lvs fails: a note and a check not run", func(t *testing.T) {
		tn := newNode(t)
		tn.conf(100, "scsi0: local-lvm:vm-100-disk-0,discard=on\nscsi1: local-lvm:vm-100-disk-1,discard=on\n[PENDING]\nscsi2: local-zfs:vm-100-disk-2,discard=on\n")
		r := quietRunner()
		r.Err = map[string]error{"lvs": errors.New("`lvs` exited with status 5")}
		v := tn.check(100, r, Options{})
		if len(v.Findings) != 0 || !reflect.DeepEqual(v.NotChecked, []Code{CodeThinOvercommit}) || len(v.Notes) != 1 ||
			!strings.HasPrefix(v.Notes[0], "thin-overcommit not checked for storage local-lvm: `lvs --reportformat json") || !strings.HasSuffix(v.Notes[0], "`lvs` exited with status 5") || v.Err != nil {
			t.Errorf("%+v", v)
		}
	})
	t.Run("two pools, the zfspool of a pending disk too", func(t *testing.T) {
		tn := newNode(t)
		tn.conf(100, "scsi0: local-lvm:vm-100-disk-0,discard=on\n[PENDING]\nscsi2: local-zfs:vm-100-disk-2,discard=on\n")
		r := quietRunner()
		r.Out["lvs"] = lvsJSON(lvsRow{size: 1024 * gib, data: "85.00", metadata: "5.00"}, vols...)
		r.Out["zfs get rpool/data"] = "used\t9663676416\navailable\t1073741824\n"
		r.Out["zfs list rpool/data"] = "rpool/data/vm-100-disk-2\t21474836480\t9663676416\n"
		v := tn.check(100, r, Options{})
		if got := summary(v); !reflect.DeepEqual(got, []string{"error thin-overcommit -", "warning thin-full -", "warning thin-overcommit -", "warning thin-overcommit -"}) {
			t.Fatalf("%q", got)
		}
		if !strings.HasPrefix(v.Findings[0].Message, "thin pool pve/data (storage local-lvm): data at 85.00 %") ||
			!strings.HasPrefix(v.Findings[1].Message, "thin pool pve/data (storage local-lvm) stops accepting writes") ||
			!strings.HasPrefix(v.Findings[2].Message, "thin pool rpool/data (storage local-zfs): its volumes total 20.0 GiB on a 10.0 GiB pool (2.0x)") ||
			!strings.HasPrefix(v.Findings[2].Fix, "add space to the ZFS pool") {
			t.Errorf("%+v", v.Findings)
		}
	})
	t.Run("thin-full names each disk's werror", func(t *testing.T) {
		tn := newNode(t)
		tn.conf(100, "scsi0: local-lvm:vm-100-disk-0,werror=report\nscsi1: local-lvm:vm-100-disk-1,werror=stop\nscsi2: local-zfs:vm-100-disk-2\n")
		r := quietRunner()
		r.Out["lvs"] = lvsJSON(lvsRow{size: 1024 * gib, data: "85.00", metadata: "5.00"}, vols...)
		v := tn.check(100, r, Options{})
		var msg string
		for _, f := range v.Findings {
			if f.Code == CodeThinFull {
				msg = f.Message
			}
		}
		if !strings.HasSuffix(msg, "this VM's disks there: scsi0 (werror=report: the guest gets the write errors), scsi1 (werror=stop: the VM pauses)") {
			t.Errorf("%q", msg)
		}
	})
}

// TestUnreadable (issue 15 #4): a config that cannot be read is bad input
// naming the file, not "0 findings".
func TestUnreadable(t *testing.T) {
	tn := newNode(t)
	if err := os.Mkdir(filepath.Join(tn.root, "etc/pve/qemu-server/372.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	tn.conf(373, "memory: 512\nname: "+strings.Repeat("x", 5<<20)+"\n")
	// (issue 21) One line naming the file, and the line for a line too
	// long; not a raw "bufio.Scanner: token too long".
	for id, why := range map[int]string{372: ": is a directory, not a regular file", 373: " line 2: longer than 4 MiB: not a file Proxmox wrote"} {
		v := tn.check(id, quietRunner(), Options{})
		if exitcode.Of(v.Err) != exitcode.Usage || v.Err.Error() != fmt.Sprintf("VM %d: %s%s", id, tn.n.Paths.VMConfig(id), why) || len(v.Findings) != 0 || len(v.Notes) != 1 {
			t.Errorf("VM %d: %v (exit %d) %+v", id, v.Err, exitcode.Of(v.Err), v)
		}
	}
	// A line Proxmox cannot parse is skipped as Proxmox skips it (issue 26
	// #3): a note naming it, the rest checked.
	tn.conf(374, "memory: 512\nthis line is broken\nscsi0: local-lvm:vm-374-disk-0,cache=unsafe,discard=on\n")
	v := tn.check(374, quietRunner(), Options{})
	if got := summary(v); !reflect.DeepEqual(got, []string{"error cache-unsafe scsi0"}) || v.Err != nil || !slices.ContainsFunc(v.Notes, func(n string) bool {
		return n == tn.n.Paths.VMConfig(374)+` line 2: "this line is broken" is not a `+"`key: value`"+` line: Proxmox skips it ("unable to parse config") and starts the VM without it`
	}) {
		t.Errorf("%+v", v)
	}
	// A storage.cfg Proxmox cannot parse: the fix names that file.
	tn.write("etc/pve/storage.cfg", "this is not storage.cfg\n")
	tn.conf(375, "scsi0: local-lvm:vm-375-disk-0\n")
	v = tn.check(375, quietRunner(), Options{})
	if got := summary(v); !reflect.DeepEqual(got, []string{"error config-invalid -"}) || v.Findings[0].Fix != "edit "+tn.n.Paths.StorageCfg()+" so Proxmox can parse it" {
		t.Errorf("%+v", v)
	}
}

func TestFSUse(t *testing.T) {
	for _, c := range []struct {
		total, free int64
		want        string
	}{
		{1000, 250, "250 B free of 1000 B (75.0 % used)"},
		{16 << 20, 0, "0 B free of 16.0 MiB (100.0 % used)"},
		{1 << 30, 1 << 30, "1.00 GiB free of 1.00 GiB (0.0 % used)"},
		{0, 0, "0 B free of 0 B (0.0 % used)"},
	} {
		if got := fsUse(c.total, c.free); got != c.want {
			t.Errorf("%d/%d: %q, want %q", c.total, c.free, got, c.want)
		}
	}
}

func TestStatfs(t *testing.T) {
	dir := t.TempDir()
	total, free, err := statfs(context.Background(), dir)
	var st unix.Statfs_t
	if err2 := unix.Statfs(dir, &st); err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if total != int64(st.Blocks)*int64(st.Bsize) || free <= 0 || free > total {
		t.Errorf("total %d free %d, statfs says %d blocks of %d", total, free, st.Blocks, st.Bsize)
	}
	if d := free - int64(st.Bavail)*int64(st.Bsize); d > total/100 || d < -total/100 {
		t.Errorf("free %d, statfs says %d", free, int64(st.Bavail)*int64(st.Bsize))
	}
	if _, _, err := statfs(context.Background(), filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
}

// TestLayerFull: ENOSPC on a volume chain's current layer names its LV,
// what qemu-img check sees of it and lvextend by what the qcow2 can still
// allocate; without the figures, a placeholder size and the reason.
func TestLayerFull(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	top := volchain.Layer{LV: "vm-391-disk-0.qcow2", Path: "/dev/pve/vm-391-disk-0.qcow2", LVSizeBytes: i(16 << 20), Qcow2EndBytes: i(16<<20 - 256<<10), UnallocatedBytes: i(48 << 20)}
	cause, use, fix := layerFull(top, "391")
	if cause != "no space left in the LV of the current layer vm-391-disk-0.qcow2 (io-status nospace): a volume chain's qcow2 sits on a thick LV, and the write past the LV's end failed" ||
		use != "LV /dev/pve/vm-391-disk-0.qcow2 of 16.0 MiB; qemu-img check sees its qcow2 reach 15.8 MiB (allocations QEMU has not flushed are not counted)" ||
		fix != "lvextend -L +47.8 MiB /dev/pve/vm-391-disk-0.qcow2 (the current layer's LV: what its qcow2 can still allocate), then qm resume 391" {
		t.Errorf("measured:\n%s\n%s\n%s", cause, use, fix)
	}
	// The qcow2 can allocate nothing more than the LV holds (a write of
	// metadata failed): no size to name.
	top.UnallocatedBytes = i(0)
	if _, _, fix := layerFull(top, "391"); fix != "lvextend -L +SIZE /dev/pve/vm-391-disk-0.qcow2 (the current layer's LV), then qm resume 391" {
		t.Errorf("nothing left to allocate: %s", fix)
	}
	unread := volchain.Layer{LV: "vm-391-disk-0.qcow2", Path: "/dev/pve/vm-391-disk-0.qcow2", Error: "qemu-img: not found"}
	if _, use, fix := layerFull(unread, "391"); use != "LV /dev/pve/vm-391-disk-0.qcow2: use unknown (qemu-img: not found)" || !strings.HasPrefix(fix, "lvextend -L +SIZE ") {
		t.Errorf("unmeasured: %s / %s", use, fix)
	}
}
