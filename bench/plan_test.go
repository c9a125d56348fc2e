package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
)

func TestLabJobSetIsFioJobs(t *testing.T) {
	jobs := LabJobSet()
	if len(jobs) != len(fio.LabJobs)+1 || jobs[0].Name != FillJob || jobs[0].Timed {
		t.Fatalf("jobs %+v", jobs)
	}
	// The same jobs `fio jobs` prints: each name's section has the same options.
	file := fio.JobSet{Device: "/dev/disk/by-id/x", Label: "x", Size: "2G", RuntimeS: 20, RampS: 3, Runs: 2}.JobFile()
	for _, j := range jobs {
		sec := file[strings.Index(file, "["+j.Name+"]"):]
		for _, o := range j.Opts {
			if !strings.Contains(sec, o.Key+"="+o.Value+"\n") {
				t.Errorf("%s: %s=%s not in fio jobs' section", j.Name, o.Key, o.Value)
			}
		}
		if j.Name != FillJob && !j.Timed {
			t.Errorf("%s not timed", j.Name)
		}
	}
	sync := jobs[len(jobs)-1]
	if sync.Name != "sync" || !sync.Fsync() || !sync.Write() || sync.Read() {
		t.Errorf("sync job %+v: fsync %v write %v read %v", sync, sync.Fsync(), sync.Write(), sync.Read())
	}
	if rr := jobs[1]; rr.Name != "rr4k" || !rr.Read() || rr.Write() || rr.Fsync() {
		t.Errorf("rr4k %+v", rr)
	}
}

func TestScheduleInterleaves(t *testing.T) {
	jobs, err := Pick(LabJobSet(), []string{"rr4k", "sync"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMethod(jobs, 2, 2*time.Second, time.Second, "32M")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m.Schedule([]string{"a", "b", "c"}) {
		got = append(got, s.File())
	}
	want := "a-fill.json b-fill.json c-fill.json " +
		"a-rr4k-1.json a-sync-1.json b-rr4k-1.json b-sync-1.json c-rr4k-1.json c-sync-1.json " +
		"a-rr4k-2.json a-sync-2.json b-rr4k-2.json b-sync-2.json c-rr4k-2.json c-sync-2.json"
	if strings.Join(got, " ") != want {
		t.Errorf("schedule\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	steps := m.Schedule([]string{"a"})
	if m.Estimate(steps[0]) != 0 || m.Estimate(steps[1]) != 3*time.Second {
		t.Errorf("estimates %v %v", m.Estimate(steps[0]), m.Estimate(steps[1]))
	}
	if noFill, _ := Pick(LabJobSet(), nil, true); len(noFill) != 6 || noFill[0].Name != "rr4k" {
		t.Errorf("--no-precondition: %+v", noFill)
	}
}

func TestArgv(t *testing.T) {
	m, _ := NewMethod(LabJobSet(), 2, 20*time.Second, 3*time.Second, "2G")
	steps := m.Schedule([]string{"scsi1"})
	if got := Shell(m.Argv(steps[0], "/dev/sdb")); got != "fio --name=fill --filename=/dev/sdb --direct=1 --ioengine=libaio --size=2G --rw=write --bs=1M --iodepth=16 --output-format=json" {
		t.Errorf("fill: %s", got)
	}
	sync := steps[6]
	if got := Shell(m.Argv(sync, "/mnt/a b/x:y")); got != `fio --name=sync '--filename=/mnt/a b/x\:y' --direct=1 --ioengine=libaio --size=2G --rw=randwrite --bs=4k --iodepth=1 --fsync=1 --time_based=1 --runtime=20 --ramp_time=3 --output-format=json` {
		t.Errorf("sync: %s", got)
	}
}

func TestNewMethodEdges(t *testing.T) {
	jobs := LabJobSet()
	for _, c := range []struct {
		runs          int
		runtime, ramp time.Duration
		size          string
		ok            bool
	}{
		{2, 20 * time.Second, 3 * time.Second, "2G", true},
		{1, time.Second, 0, "1M", true},
		{0, time.Second, 0, "1M", false},
		{1, 999 * time.Millisecond, 0, "1M", false},
		{1, 1500 * time.Millisecond, 0, "1M", false},
		{1, time.Second, -time.Second, "1M", false},
		{1, time.Second, 0, "1023K", false},
		{1, time.Second, 0, "2 G", false},
		{1, time.Second, 0, "lots", false},
		{1, MaxRuntime, MaxRamp, "1M", true},
		{1, MaxRuntime + time.Second, 0, "1M", false},
		{1, time.Second, MaxRamp + time.Second, "1M", false},
		{1, 1000001 * time.Hour, 0, "1M", false},
	} {
		m, err := NewMethod(jobs, c.runs, c.runtime, c.ramp, c.size)
		if (err == nil) != c.ok || err != nil && exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%+v: %v", c, err)
		}
		if c.ok && m.SizeBytes < 1<<20 {
			t.Errorf("%+v: size %d", c, m.SizeBytes)
		}
	}
}

func TestParseJobFile(t *testing.T) {
	jobs, err := ParseJobFile("my.fio", "; mine\n[global]\nbs=8k\nnorandommap\n\n[fill]\nrw=write\n[mixed]\nrw=randrw\nrwmixread=70\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Timed || !jobs[1].Timed || !jobs[1].Read() || !jobs[1].Write() {
		t.Fatalf("%+v", jobs)
	}
	m, _ := NewMethod(jobs, 1, 5*time.Second, 0, "64M")
	got := Shell(m.Argv(Step{Disk: "d", Job: jobs[1], Run: 1}, "/dev/vdb"))
	if got != "fio --name=mixed --filename=/dev/vdb --direct=1 --ioengine=libaio --size=64M --bs=8k --norandommap --rw=randrw --rwmixread=70 --time_based=1 --runtime=5 --ramp_time=0 --output-format=json" {
		t.Errorf("argv %s", got)
	}
	for _, bad := range []string{
		"[a]\nfilename=/dev/sda\n",
		"[global]\ndirectory=/\n[a]\nrw=read\n",
		"[a]\nexec_prerun=rm -rf /\n",
		"[a]\nioengine=exec\n",
		"rw=read\n[a]\n",
		"[a-b]\nrw=read\n",
		"[a]\n[a]\n",
		"[global]\nbs=4k\n",
	} {
		if _, err := ParseJobFile("f", bad); err == nil || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := Pick(jobs, []string{"nosuch"}, false); err == nil || !strings.Contains(err.Error(), "fill, mixed") {
		t.Errorf("unknown --job: %v", err)
	}
	if _, err := Pick(jobs[:1], nil, false); err == nil {
		t.Error("a set of the fill alone has no job to run")
	}
}

func TestBootDisks(t *testing.T) {
	for _, c := range []struct {
		main map[string]string
		want string
	}{
		{map[string]string{"boot": "order=scsi0;ide2;net0"}, "scsi0 ide2"},
		{map[string]string{"boot": "order=net0"}, ""},
		{map[string]string{"boot": "cdn", "bootdisk": "virtio0"}, "virtio0"},
		{map[string]string{}, ""},
	} {
		if got := strings.Join(BootDisks(c.main), " "); got != c.want {
			t.Errorf("%v: %q, want %q", c.main, got, c.want)
		}
	}
}
