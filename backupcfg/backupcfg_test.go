package backupcfg

import (
	"reflect"
	"testing"
)

// pve-manager's configs/vzdump.conf as Debian's package ships it (commit
// 14a22df3): every setting commented out, fleecing among them.
const shippedVzdumpConf = `# vzdump default settings

#tmpdir: DIR
#dumpdir: DIR
#storage: STORAGE_ID
#mode: snapshot|suspend|stop
#bwlimit: KBPS
#performance: [max-workers=N][,pbs-entries-max=N]
#ionice: PRI
#lockwait: MINUTES
#stopwait: MINUTES
#stdexcludes: BOOLEAN
#mailto: ADDRESSLIST
#prune-backups: keep-INTERVAL=N[,...]
#script: FILENAME
#exclude-path: PATHLIST
#pigz: N
#notes-template: {{guestname}}
#pbs-change-detection-mode: legacy|data|metadata
#fleecing: enabled=BOOLEAN,storage=STORAGE_ID
`

// A real node's jobs.cfg as the GUI writes it: brucewinter/pve-etc
// pve/jobs.cfg (commit 16a2176c), its mailto line left out.
const realJobs = "vzdump: backup-0b12dd8f-1938\n\tschedule 03:30\n\tcompress zstd\n\tenabled 1\n\tfleecing 0\n\tmailnotification always\n\tmode snapshot\n\tnotes-template {{guestname}}\n\tnotification-mode notification-system\n\tprune-backups keep-last=4\n\tstorage nas-backup\n\tvmid 100,103,102,105\n\nvzdump: backup-2580fb0a-c002\n\tschedule sun 01:00\n\tcompress zstd\n\tenabled 1\n\tfleecing 0\n\tmode snapshot\n\tnotes-template {{guestname}}\n\tnotification-mode notification-system\n\tprune-backups keep-last=4\n\tstorage nas-backup\n\tvmid 102,103,100,105\n\n"

func TestParseFleecing(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Fleecing
		ok   bool
	}{
		{"0", Fleecing{}, true},
		{"1,storage=local-lvm", Fleecing{true, "local-lvm"}, true},
		{"enabled=1,storage=local-lvm", Fleecing{true, "local-lvm"}, true},
		{" enabled=yes , storage=fast ", Fleecing{true, "fast"}, true},
		{"enabled=off,storage=x", Fleecing{false, "x"}, true},
		{"enabled=2", Fleecing{}, false},
		{"speed=1", Fleecing{}, false},
	} {
		got, ok := ParseFleecing(c.in)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%q: %+v %v, want %+v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseVzdumpConf(t *testing.T) {
	if d := ParseVzdumpConf(shippedVzdumpConf); d.Fleecing != nil {
		t.Errorf("the shipped file sets fleecing: %+v", d.Fleecing)
	}
	d := ParseVzdumpConf("storage: pbs\nfleecing: enabled=1,storage=local-lvm\n")
	if d.Fleecing == nil || *d.Fleecing != (Fleecing{true, "local-lvm"}) {
		t.Errorf("fleecing %+v", d.Fleecing)
	}
}

func TestParseJobsReal(t *testing.T) {
	jobs := ParseJobs(realJobs + "realmsync: sync-1\n\tschedule daily\n\tvmid 100\n")
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want the two vzdump ones: %+v", len(jobs), jobs)
	}
	j := jobs[0]
	if j.ID != "backup-0b12dd8f-1938" || !j.Enabled || j.All || !reflect.DeepEqual(j.VMIDs, []int{100, 103, 102, 105}) || j.Fleecing == nil || j.Fleecing.Enabled {
		t.Errorf("job %+v", j)
	}
	c := Config{Jobs: jobs}
	b, pool := c.ForVM(103, "pve")
	if len(b) != 2 || b[0].Fleecing.Enabled || b[0].From != "job" || len(pool) != 0 {
		t.Errorf("VM 103: %+v %v", b, pool)
	}
	if b, _ := c.ForVM(104, "pve"); len(b) != 0 {
		t.Errorf("VM 104 is in no job: %+v", b)
	}
}

func TestForVM(t *testing.T) {
	jobs := ParseJobs("vzdump: all-but\n\tall 1\n\texclude 101\n\tnode pve1\n\nvzdump: off\n\tenabled 0\n\tvmid 100\n\nvzdump: own\n\tvmid 100\n\tfleecing 1,storage=local-lvm\n\nvzdump: bypool\n\tpool prod\n\nvzdump: excl\n\texclude 100\n")
	c := Config{Defaults: Defaults{Fleecing: &Fleecing{true, "local"}}, Jobs: jobs}
	b, pool := c.ForVM(100, "pve1")
	got := map[string]Backup{}
	for _, x := range b {
		got[x.Job] = x
	}
	want := map[string]Backup{
		"all-but": {Job: "all-but", Fleecing: Fleecing{true, "local"}, From: "vzdump.conf"},
		"own":     {Job: "own", Fleecing: Fleecing{true, "local-lvm"}, From: "job"},
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(pool, []string{"bypool"}) {
		t.Errorf("VM 100 on pve1: %+v, pool %v", got, pool)
	}
	if b, _ := c.ForVM(101, "pve1"); len(b) != 1 || b[0].Job != "excl" {
		t.Errorf("VM 101 (excluded from all-but, in excl's all): %+v", b)
	}
	if b, _ := c.ForVM(102, "pve2"); len(b) != 1 || b[0].Job != "excl" {
		t.Errorf("VM 102 on pve2 (all-but runs on pve1 only): %+v", b)
	}
}

func TestJudge(t *testing.T) {
	facts := func(id string) (bool, bool, bool) {
		switch id {
		case "local-lvm":
			return true, true, true
		case "thick":
			return false, false, true
		case "nodiscard":
			return true, false, true
		case "thickdiscard": // no row of storagetype's table today; Judge's fourth case
			return false, true, true
		}
		return false, false, false
	}
	for _, c := range []struct {
		f      Fleecing
		unsuit string
	}{
		{Fleecing{}, ""},
		{Fleecing{Storage: "thick"}, ""}, // off: the storage does not matter
		{Fleecing{true, "local-lvm"}, ""},
		{Fleecing{true, "thick"}, "storage thick is neither thin nor does a discard return space: each fleecing image takes the disk's full size while the backup runs"},
		{Fleecing{true, "thickdiscard"}, "storage thickdiscard is not thin: each fleecing image takes the disk's full size while the backup runs"},
		{Fleecing{true, "nodiscard"}, "a discard on storage nodiscard does not return space: the fleecing image keeps what the backup already copied"},
		{Fleecing{true, "gone"}, "storage gone is not in storage.cfg"},
		{Fleecing{true, ""}, "no fleecing storage is set (vzdump refuses: 'storage' parameter is required when 'enabled' is set)"},
	} {
		got := Judge([]Backup{{Job: "j", Fleecing: c.f, From: "job"}}, facts)
		if len(got) != 1 || got[0].Unsuitable != c.unsuit || got[0].Fleecing != c.f.Enabled {
			t.Errorf("%+v: %+v", c.f, got)
		}
	}
}
