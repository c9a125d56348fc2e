package backupcfg

import (
	"reflect"
	"strconv"
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
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(pool, []string{"bypool selects VMs by pool (user.cfg, not read)"}) {
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

// Hostile jobs.cfg and vzdump.conf, read as Proxmox reads them
// (PVE::SectionConfig::parse_config, PVE::JSONSchema::parse_config): the
// VM 100's jobs and their fleecing, or that it cannot be told. Before,
// "enabled maybe" disabled a job Proxmox runs, a duplicate key kept its
// last value (Proxmox: the first), a line after a blank one still
// belonged to the job, "vmid 100,abc" backed up 100 (Proxmox refuses the
// list), and a node-bound job was judged against the analyst's host name.
func TestParseHostile(t *testing.T) {
	for _, c := range []struct {
		name, vzdump, jobs, node string
		want                     []string // job fleecing-from enabled storage
		unknown                  []string
	}{
		{"CRLF", "fleecing: 1,storage=fast\r\n", "vzdump: j\r\n\tvmid 100\r\n\tenabled 1\r\n", "pve1",
			[]string{"j vzdump.conf true fast"}, nil},
		{"CRLF: a blank line is \"\\r\", so the second header is inside the first job", "", "vzdump: a\r\n\tvmid 101\r\n\r\nvzdump: b\r\n\tvmid 100\r\n", "pve1", nil, nil},
		{"a header right after a property is ignored", "", "vzdump: a\n\tvmid 101\nvzdump: b\n\tfleecing 1,storage=x\n\tall 1\n", "pve1",
			[]string{"a job true x"}, nil},
		{"whitespace-only line does not end the section", "", "vzdump: a\n\tvmid 100\n  \n\tfleecing 1,storage=x\n", "pve1",
			[]string{"a job true x"}, nil},
		{"comment inside a section", "", "vzdump: a\n# note\n\tvmid 100\n\t# fleecing 1,storage=x\n", "pve1",
			[]string{"a default false "}, nil},
		{"BOM before the header: no section Proxmox knows", "", "\ufeffvzdump: j\n\tvmid 100\n", "pve1", nil, nil},
		{"bad enabled keeps the default (on)", "", "vzdump: j\n\tvmid 100\n\tenabled maybe\n", "pve1",
			[]string{"j default false "}, nil},
		{"duplicate enabled: the first wins", "", "vzdump: j\n\tvmid 100\n\tenabled 0\n\tenabled 1\n", "pve1", nil, nil},
		{"duplicate fleecing: the first wins", "", "vzdump: j\n\tvmid 100\n\tfleecing 1,storage=a\n\tfleecing 0\n", "pve1",
			[]string{"j job true a"}, nil},
		{"a bad first value lets a second set it", "", "vzdump: j\n\tvmid 100\n\tfleecing 1,speed=2\n\tfleecing 1,storage=b\n", "pve1",
			[]string{"j job true b"}, nil},
		{"blank line ends the section", "", "vzdump: j\n\tvmid 100\n\n\tfleecing 1,storage=a\n", "pve1",
			[]string{"j default false "}, nil},
		{"a VMID list with garbage is refused whole", "", "vzdump: j\n\tvmid 100,abc\n", "pve1", nil, nil},
		{"a VMID with a leading zero", "", "vzdump: j\n\tvmid 0100\n", "pve1", nil, nil},
		{"huge VMID", "", "vzdump: j\n\tvmid 99999999999999999999999\n", "pve1", nil, nil},
		{"header with two ids", "", "vzdump: j k\n\tvmid 100\n", "pve1", nil, nil},
		{"unknown keys and a truncated line", "", "vzdump: j\n\tvmid 100\n\tfrobnicate 7\n\tfleec", "pve1",
			[]string{"j default false "}, nil},
		{"unicode job id", "", "vzdump: sauvegarde-é\n\tvmid 100\n", "pve1", []string{"sauvegarde-é default false "}, nil},
		{"node-bound job, this node", "", "vzdump: j\n\tvmid 100\n\tnode pve1\n", "pve1", []string{"j default false "}, nil},
		{"node-bound job, another node", "", "vzdump: j\n\tvmid 100\n\tnode pve2\n", "pve1", nil, nil},
		{"node-bound job, this node's name unknown", "", "vzdump: j\n\tvmid 100\n\tnode pve2\n", "", nil,
			[]string{"j runs on node pve2 only, and this node's name is unknown (no /etc/pve/local or /etc/hostname below the root)"}},
		{"node-bound job not for this VM, name unknown", "", "vzdump: j\n\tvmid 101\n\tnode pve2\n", "", nil, nil},
		{"vzdump.conf: the last line wins", "fleecing: 1,storage=a\nfleecing: 1,storage=b\n", "vzdump: j\n\tvmid 100\n", "pve1",
			[]string{"j vzdump.conf true b"}, nil},
		{"vzdump.conf: a bad last line drops the key", "fleecing: 1,storage=a\nfleecing: bogus\n", "vzdump: j\n\tvmid 100\n", "pve1",
			[]string{"j default false "}, nil},
		{"vzdump.conf: duplicate key inside the value", "fleecing: enabled=1,enabled=0,storage=a\n", "vzdump: j\n\tvmid 100\n", "pve1",
			[]string{"j default false "}, nil},
		{"vzdump.conf: BOM makes the first key unknown", "\ufefffleecing: 1,storage=a\n", "vzdump: j\n\tvmid 100\n", "pve1",
			[]string{"j default false "}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Defaults: ParseVzdumpConf(c.vzdump), Jobs: ParseJobs(c.jobs)}
			b, unknown := cfg.ForVM(100, c.node)
			var got []string
			for _, x := range b {
				got = append(got, x.Job+" "+x.From+" "+strconv.FormatBool(x.Fleecing.Enabled)+" "+x.Fleecing.Storage)
			}
			if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(unknown, c.unknown) {
				t.Errorf("got %q unknown %q, want %q %q", got, unknown, c.want, c.unknown)
			}
		})
	}
}
