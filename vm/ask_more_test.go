package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// withHandler puts h in front of q's answers: h answers what it knows
// ("" passes the command on).
func withHandler(q *qmptest.QEMU, h func(cmd string, args gjson.Result) string) {
	next := q.Handler
	q.Handler = func(cmd string, args gjson.Result) string {
		if r := h(cmd, args); r != "" {
			return r
		}
		return next(cmd, args)
	}
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "qmp", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// NeedJobs places each job on its disk through the block graph (QEMU 7.2's
// recorded backup of scsi1, and QEMU 11.1.3's with fleecing), asks for the
// graph only while a job runs, places a job by its name where QEMU has no
// graph command, and without a graph says nothing of fleecing.
func TestAskJobs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, jobs, graph string
		disk, fleecing    string
		graphed           bool
	}{
		{"backup, 7.2", "query-block-jobs-backup-7.2.json", "x-debug-query-block-graph-backup-7.2.json", "scsi1", "", true},
		{"fleecing, 11.1.3", "query-block-jobs-fleecing-11.1.json", "x-debug-query-block-graph-fleecing-11.1.json", "scsi1", "fleecing-node", true},
		{"drive-backup by its name, no graph command", "query-block-jobs-drive-backup-7.2.json", "", "scsi1", "", false},
	} {
		v, q := liveVM(t, 2, qmptest.Greeting72)
		// liveVM's disks are scsi0 and virtio1: the recordings' disk is
		// scsi1, so the VM gets it too.
		v.Disks[0].ID = "scsi1"
		jobs, graph := recorded(t, c.jobs), ""
		if c.graph != "" {
			graph = recorded(t, c.graph)
		}
		withHandler(q, func(cmd string, _ gjson.Result) string {
			switch {
			case cmd == "query-block-jobs":
				return qmptest.Return(jobs)
			case cmd == "x-debug-query-block-graph" && graph != "":
				return qmptest.Return(graph)
			}
			return ""
		})
		a, err := v.Ask(ctx, 2*time.Second, Query{Need: NeedJobs})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := a.Jobs[c.disk]; !reflect.DeepEqual(got, []string{"backup"}) || len(a.Jobs) != 1 || len(a.JobInfo[c.disk]) != 1 {
			t.Errorf("%s: jobs %v %+v", c.name, a.Jobs, a.JobInfo)
			continue
		}
		j := a.JobInfo[c.disk][0]
		if j.Graphed != c.graphed || (j.Fleecing != "") != (c.fleecing != "") {
			t.Errorf("%s: graphed %v fleecing %q", c.name, j.Graphed, j.Fleecing)
		}
		if want := "query-block-jobs x-debug-query-block-graph"; strings.Join(q.Seen(), " ") != want {
			t.Errorf("%s: commands %v", c.name, q.Seen())
		}
	}
	// No job: no graph asked, empty maps.
	v, q := liveVM(t, 2, qmptest.Greeting72)
	withHandler(q, func(cmd string, _ gjson.Result) string {
		if cmd == "query-block-jobs" {
			return qmptest.Return("[]")
		}
		return ""
	})
	if a, err := v.Ask(ctx, 2*time.Second, Query{Need: NeedJobs}); err != nil || len(a.Jobs) != 0 || a.Jobs == nil || strings.Join(q.Seen(), " ") != "query-block-jobs" {
		t.Errorf("no job: %v %+v %v", err, a.Jobs, q.Seen())
	}
	// A job named after no disk and no graph: on no disk.
	if got := v.jobDisksByName("backup-xyz"); got != nil {
		t.Errorf("unnamed job: %v", got)
	}
	for _, name := range []string{"scsi0", "drive-scsi0", "mirror-virtio1"} {
		if got := v.jobDisksByName(name); len(got) != 1 {
			t.Errorf("%s: %v", name, got)
		}
	}
}

// Query.QOM: one qom-list-get on QEMU 10.1+, a property the object lacks
// said why; an object missing fails the list, and each is then asked with
// qom-get, one refused said why; before 10.1 qom-get each, duplicates once.
func TestAskQOM(t *testing.T) {
	ctx := context.Background()
	refs := []QOMRef{{"/machine/peripheral/virtio1", "num-queues"}, {"/machine/peripheral/scsihw0", "num_queues"}, {"/machine/peripheral/virtio1", "num-queues"}}
	qomGet := func(cmd string, args gjson.Result) string {
		if cmd != "qom-get" {
			return ""
		}
		if args.Get("path").String() == "/machine/peripheral/scsihw0" {
			return qmptest.Fail("DeviceNotFound", "Device '/machine/peripheral/scsihw0' not found")
		}
		return qmptest.Return("4")
	}
	// 11.1: the list answers; scsihw0 has no such property.
	v, q := liveVM(t, 2, qmptest.Greeting111)
	withHandler(q, func(cmd string, args gjson.Result) string {
		if cmd == "qom-list-get" {
			return qmptest.Return(`[{"properties": [{"name": "num-queues", "type": "uint16", "value": 4}]}, {"properties": [{"name": "other", "type": "int", "value": 1}]}]`)
		}
		return qomGet(cmd, args)
	})
	a, err := v.Ask(ctx, 2*time.Second, Query{QOM: refs})
	if err != nil || len(a.QOM) != 2 || a.QOM[refs[0]].Int == nil || *a.QOM[refs[0]].Int != 4 || a.QOM[refs[1]].Int != nil || !strings.Contains(a.QOM[refs[1]].Why, "no num_queues") ||
		strings.Join(q.Seen(), " ") != "qom-list-get" {
		t.Errorf("list: %v %+v %v", err, a.QOM, q.Seen())
	}
	// 11.1: an object missing fails the list: one by one.
	v, q = liveVM(t, 2, qmptest.Greeting111)
	withHandler(q, func(cmd string, args gjson.Result) string {
		if cmd == "qom-list-get" {
			return qmptest.Fail("DeviceNotFound", "Device '/machine/peripheral/scsihw0' not found")
		}
		return qomGet(cmd, args)
	})
	a, err = v.Ask(ctx, 2*time.Second, Query{QOM: refs})
	if err != nil || *a.QOM[refs[0]].Int != 4 || a.QOM[refs[1]].Int != nil || !strings.Contains(a.QOM[refs[1]].Why, "qom-get /machine/peripheral/scsihw0 num_queues: ") ||
		strings.Join(q.Seen(), " ") != "qom-list-get qom-get qom-get" {
		t.Errorf("list refused: %v %+v %v", err, a.QOM, q.Seen())
	}
	// 7.2: qom-get each, the duplicate once.
	v, q = liveVM(t, 2, qmptest.Greeting72)
	withHandler(q, qomGet)
	if a, err = v.Ask(ctx, 2*time.Second, Query{QOM: refs}); err != nil || len(a.QOM) != 2 || *a.QOM[refs[0]].Int != 4 || strings.Join(q.Seen(), " ") != "qom-get qom-get" {
		t.Errorf("7.2: %v %+v %v", err, a.QOM, q.Seen())
	}
}

// WhyGone: a QEMU whose /proc entry is gone or a zombie exited; one still
// there is described by its socket's error.
func TestWhyGone(t *testing.T) {
	v, _ := liveVM(t, 1, qmptest.Greeting72)
	n := node.New(v.Paths(), 0)
	stat := filepath.Join(v.Paths().ProcPid(v.Pid), "stat")
	sockErr := os.ErrDeadlineExceeded
	if got := v.WhyGone(context.Background(), n, sockErr); got != "QEMU (pid 4242) exited" {
		t.Errorf("no /proc entry: %q", got)
	}
	for state, want := range map[string]string{"S": sockErr.Error(), "Z": "QEMU (pid 4242) exited", "X": "QEMU (pid 4242) exited", "D": sockErr.Error()} {
		if err := os.WriteFile(stat, []byte("4242 (qemu-system-x86) "+state+" 1 4242 4242 0 -1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := v.WhyGone(context.Background(), n, sockErr); got != want {
			t.Errorf("state %s: %q, want %q", state, got, want)
		}
	}
	// Cut after the name: no state to read (and no read past the end).
	for _, b := range []string{"garbage", "4242 (qemu-system-x86) ", "4242 (qemu-system-x86)"} {
		if err := os.WriteFile(stat, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := v.WhyGone(context.Background(), n, sockErr); got != sockErr.Error() {
			t.Errorf("stat %q: %q", b, got)
		}
	}
	// No pid known: nothing of /proc is read.
	v.Pid = 0
	if got := v.WhyGone(context.Background(), n, sockErr); got != sockErr.Error() {
		t.Errorf("pid 0: %q", got)
	}
}

// LoadNode resolves a plugin storage's volumes with `pvesm path` through
// the node's runner and adds that storage's use from `pvesm status` (once
// per storage), an inactive one as use not reported, and a failing pvesm
// status as a note.
func TestLoadNodeStorageUse(t *testing.T) {
	p := writeNode(t, 101, "scsi0: linstor:vm-101-disk-1,size=10G\nscsi1: linstor:vm-101-disk-2,size=10G\nscsihw: virtio-scsi-single\n")
	for _, vol := range []string{"vm-101-disk-1", "vm-101-disk-2"} {
		dev := filepath.Join(p.Root, "dev/drbd/by-res", vol, "0")
		if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dev, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// pvesm status as PVE::CLI::pvesm prints it (pvesm's own tests'
	// layout, pvesm/pvesm_test.go).
	const head = "Name              Type     Status     Total (KiB)      Used (KiB) Available (KiB)        %\n"
	for _, c := range []struct {
		status string
		err    error
		want   string
	}{
		{status: head + "linstor           drbd     active      1048576000       398458880       650117120   38.00%\n",
			want: "storage linstor (drbd, active): 380.00 GiB used of 1000.00 GiB (38.00 %), as `pvesm status` reports it"},
		{status: head + "linstor           drbd   inactive               0               0               0    0.00%\n",
			want: "storage linstor (drbd, inactive): use not reported, as `pvesm status` reports it"},
		{err: errors.New("exit status 255"), want: "storage linstor: its use is unknown: `pvesm status` failed: exit status 255"},
	} {
		r := &fakerun.Runner{Out: map[string]string{"pvesm path linstor:vm-101-disk-1": "/dev/drbd/by-res/vm-101-disk-1/0\n", "pvesm path linstor:vm-101-disk-2": "/dev/drbd/by-res/vm-101-disk-2/0\n"}}
		if c.err != nil {
			r.Err = map[string]error{"pvesm status": c.err}
		} else {
			r.Out["pvesm status"] = c.status
		}
		v, err := LoadNode(context.Background(), r.Node(node.New(p, 0)), 101)
		if err != nil {
			t.Fatal(err)
		}
		if v.Disk("scsi1").Configured == nil || len(v.Notes) != 3 || v.Notes[2] != c.want {
			t.Errorf("notes %q, want last %q", v.Notes, c.want)
		}
		status := 0
		for _, call := range r.Calls() {
			if strings.HasPrefix(call, "pvesm status") {
				status++
				if call != "pvesm status --storage linstor" {
					t.Errorf("call %s", call)
				}
			}
		}
		if status != 1 {
			t.Errorf("pvesm status ran %d times, want once for the storage", status)
		}
	}
}

// taskRuns reads starttime, field 22 of /proc/PID/stat, after the last ")"
// (a command name may hold blanks and parentheses): a stat with exactly 22
// fields is enough, one shorter or without ")" is no task.
func TestTaskRunsStatEdges(t *testing.T) {
	p := writeNode(t, 105, "scsi0: local-lvm:vm-105-disk-0\n")
	v := &VM{VMID: 105, paths: p}
	n := node.New(p, 0)
	fields := func(k int) string {
		var f []string
		for i := 0; i < k; i++ {
			f = append(f, "0")
		}
		return strings.Join(f, " ")
	}
	// Fields 3..21 are zero, field 22 the start time.
	for _, c := range []struct {
		stat string
		runs bool
	}{
		{"21854 (task (x) y) " + fields(19) + " 148740", true},
		{"21854 (task (x) y) " + fields(19) + " 148741", false},
		{"21854 (task (x) y) " + fields(18) + " 148740", false},
		{"21854 task " + fields(19) + " 148740", false},
		{") " + fields(19) + " 148740", true},
	} {
		dir := filepath.Join(p.Proc, "21854")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(c.stat+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := v.taskRuns(context.Background(), n, 21854, 148740); got != c.runs {
			t.Errorf("%q: %v, want %v", c.stat, got, c.runs)
		}
	}
}

// A pid file holding 0 (or less) is no running QEMU, and nothing of /proc
// is read for it.
func TestPidFileZero(t *testing.T) {
	for _, pid := range []string{"0", "-1"} {
		p := writeNode(t, 106, "scsi0: local-lvm:vm-106-disk-0\n")
		if err := os.MkdirAll(filepath.Dir(p.PidFile(106)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.PidFile(106), []byte(pid+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// /proc/0 as a running QEMU would have it: must not be taken.
		writeRunning(t, p, 106, []string{"qemu-system-x86_64", "-pidfile", "/var/run/qemu-server/106.pid"})
		if err := os.Rename(filepath.Join(p.Proc, "4242"), filepath.Join(p.Proc, "0")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.PidFile(106), []byte(pid+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := Load(context.Background(), node.New(p, 0), 106)
		if err != nil || v.Running || v.Pid != 0 {
			t.Errorf("pid %s: running %v pid %d, %v", pid, v != nil && v.Running, v.Pid, err)
		}
	}
}
