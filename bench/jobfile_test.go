package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
)

// Issue 31's job files, and their neighbours: each refused (exit 2) naming
// its line and what fio's command line would have made of it; a file that
// is not a job file is refused quoting nothing of it.
func TestJobFileHostile(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string // in the message
	}{
		// Prefixes fio's command line takes (the campaign's two first).
		{"exec_prer", "[a]\nrw=read\nexec_prer=touch /tmp/PWNED\n", []string{"f:3", "exec_prer", "exec_prerun", "runs a command in the guest"}},
		{"opendi", "[a]\nopendi=/mnt/data\n", []string{"f:2", "opendir", "bench sets the target"}},
		{"exec_po", "[a]\nexec_po=reboot\n", []string{"exec_postrun", "runs a command"}},
		{"filen", "[a]\nfilen=/dev/sdc\n", []string{"filename, filename_format", "ambiguous"}},
		{"filename_f", "[a]\nfilename_f=/dev/sdc\n", []string{"filename_format", "bench sets the target"}},
		{"direc", "[global]\ndirec=/mnt\n[a]\n", []string{"f:2", "not a fio option", "direct, directory"}},
		{"nam", "[a]\nnam=other\n", []string{"name", "starts another job"}},
		{"iodepth_lo", "[a]\niodepth_lo=2\n", []string{"iodepth_low", "write it whole"}},
		{"iodep", "[a]\niodep=2\n", []string{"ambiguous", "iodepth_low"}},
		{"user", "[a]\nuser=1\n", []string{"userspace_reap", "write it whole"}},
		// fio's own options: exactly, as a prefix, ambiguous.
		{"trigger", "[a]\ntrigger=touch /tmp/x\n", []string{"trigger", "fio's own option"}},
		{"trig", "[a]\ntrig=x\n", []string{"trigger-file", "ambiguous"}},
		{"aux-path", "[a]\naux-path=/etc\n", []string{"fio's own option"}},
		{"daemoniz", "[a]\ndaemoniz=/etc/x.pid\n", []string{"daemonize", "fio's own option"}},
		{"output", "[a]\noutput=/etc/passwd\n", []string{"fio's own option"}},
		{"output-format", "[a]\noutput-format=normal\n", []string{"fio's own option"}},
		{"out", "[a]\nout=/etc/passwd\n", []string{"output, output-format"}},
		// Whole names bench refuses.
		{"filename", "[a]\nfilename=/dev/sda\n", []string{"bench sets the target"}},
		{"directory", "[global]\ndirectory=/\n[a]\nrw=read\n", []string{"bench sets the target"}},
		{"exec_prerun", "[a]\nexec_prerun=rm -rf /\n", []string{"runs a command"}},
		{"ioengine=exec", "[a]\nioengine=exec\n", []string{"ioengine=exec", "one of libaio"}},
		{"ioengine=external", "[a]\nioengine=external:/tmp/x.so\n", []string{"one of libaio"}},
		{"ioengine=filedelete", "[a]\nioengine=filedelete\n", []string{"one of libaio"}},
		{"ioengine=sg", "[a]\nioengine=sg\n", []string{"one of libaio"}},
		{"size", "[a]\nsize=1G\n", []string{"size", "use --size"}},
		{"filesize", "[a]\nfilesize=1G\n", []string{"use --size"}},
		{"io_size", "[a]\nio_size=10G\n", []string{"use --size"}},
		{"io_limit", "[a]\nio_limit=10G\n", []string{"use --size"}},
		{"offset", "[a]\noffset=100G\n", []string{"use --size"}},
		{"fill_fs", "[a]\nfill_fs=1\n", []string{"use --size"}},
		{"nrfiles", "[a]\nnrfiles=100\n", []string{"one target"}},
		{"unlink", "[a]\nunlink=1\n", []string{"removes the test file"}},
		{"allow_mounted_write", "[a]\nallow_mounted_write=1\n", []string{"mounted device"}},
		{"buffer_pattern", "[a]\nbuffer_pattern='/etc/shadow'\n", []string{"guest file"}},
		{"mem", "[a]\nmem=mmap:/etc/passwd\n", []string{"guest file"}},
		{"iomem", "[a]\niomem=mmapshared:/etc/passwd\n", []string{"guest file"}},
		{"write_bw_log", "[a]\nwrite_bw_log=/etc/cron.d/x\n", []string{"log files"}},
		{"write_iolog", "[a]\nwrite_iolog=/etc/x\n", []string{"writes a file"}},
		{"read_iolog", "[a]\nread_iolog=/etc/shadow\n", []string{"reads a file"}},
		{"verify_state_save", "[a]\nverify_state_save=1\n", []string{"writes a file"}},
		{"ioscheduler", "[a]\nioscheduler=none\n", []string{"scheduler"}},
		{"cgroup", "[a]\ncgroup=x\n", []string{"cgroup"}},
		{"profile", "[a]\nprofile=act\n", []string{"fio's own option"}}, // l_opts' profile comes first
		{"tiobench dir", "[a]\ndir=/etc\n", []string{"not one bench lets a job file set"}},
		{"numjobs", "[a]\nnumjobs=1000\n", []string{"1 to 64"}},
		{"bare bs", "[a]\nbs\n", []string{"needs a value"}},
		{"hipri under libaio", "[a]\nhipri\n", []string{"hipri", "io_uring's"}},
		{"include", "[a]\ninclude other.fio\n", []string{"include"}},
		{"global after a job", "[a]\nrw=read\n[global]\nbs=4k\n", []string{"[global] after a job"}},
		{"unknown", "[a]\nnosuch=1\n", []string{"not an option of fio 3.33"}},
	} {
		_, err := ParseJobFile("f", c.text)
		if err == nil || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%s: %v, want exit 2", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// A file that is not a job file is refused without a byte of it: a
// root-only secret named by mistake must not reach the terminal.
func TestJobFileSecretNotQuoted(t *testing.T) {
	for _, c := range []struct{ name, text, secret string }{
		{"shadow", "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n", "hashhash"},
		{"env", "API_TOKEN=s3cr3t-value\n[a]\n", "s3cr3t"},
		{"ssh key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", "b3Blbn"},
		{"binary", "[a]\n\x00\x01secretbytes\n", "secretbytes"},
		{"not utf-8", "[a]\nrw=\xff\xfeprivate\n", "private"},
		{"a line of words later", "[a]\nrw=read\nhunter2 is the password\n", "hunter2"},
		// Job-file shaped: the key is named, never the value.
		{"my.cnf", "[client]\npassword=hunter2\n", "hunter2"},
	} {
		_, err := ParseJobFile("/root/secret", c.text)
		if err == nil || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if strings.Contains(err.Error(), c.secret) {
			t.Errorf("%s: the message quotes the file: %q", c.name, err)
		}
		if c.name != "my.cnf" && !strings.Contains(err.Error(), "not a fio job file") {
			t.Errorf("%s: %q", c.name, err)
		}
	}
}

// Allowed options pass by fio's name (an alias becomes the name), the
// engine's options under their engine; nothing outside bench's area.
func TestJobFileAllowed(t *testing.T) {
	jobs, err := ParseJobFile("ok.fio", "; mine\n[global]\nreadwrite=randrw\nblocksize=8k\nthread\n[a]\nioengine=io_uring\nhipri\nfixedbufs\niodepth=64\nnumjobs=4\n[b]\nuserspace_reap\nrw=randread:8\n")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		for _, o := range j.Opts {
			got = append(got, j.Name+":"+o.Key+"="+o.Value)
		}
	}
	if want := "a:rw=randrw a:bs=8k a:thread= a:ioengine=io_uring a:hipri= a:fixedbufs= a:iodepth=64 a:numjobs=4 " +
		"b:rw=randrw b:bs=8k b:thread= b:userspace_reap= b:rw=randread:8"; strings.Join(got, " ") != want {
		t.Errorf("options %s", strings.Join(got, " "))
	}
	if !jobs[0].Read() || !jobs[0].Write() {
		t.Errorf("readwrite=randrw is rw: %+v", jobs[0])
	}
	m, _ := NewMethod(jobs, 1, 5*time.Second, 0, "64M")
	if a := Shell(m.Argv(Step{Disk: "d", Job: jobs[0], Run: 1}, "/dev/vdb")); !strings.Contains(a, "--size=64M --rw=randrw --bs=8k --thread --ioengine=io_uring --hipri") ||
		strings.Count(a, "--size") != 1 {
		t.Errorf("argv %s", a)
	}
}

// Every option bench allows is one of fio 3.33's (a job's or an allowed
// engine's), none is fio's own, and every refusal reason names an option
// fio has.
func TestJobFileListsAreFios(t *testing.T) {
	for name := range allowed {
		ok := slices.Contains(fio.JobOptions(), name)
		for _, e := range Engines {
			ok = ok || slices.Contains(fio.EngineOptions(e), name)
		}
		if !ok {
			t.Errorf("allowed %s is not an option of fio 3.33", name)
		}
		if _, refused := refusedWhy[name]; refused {
			t.Errorf("%s is allowed and refused", name)
		}
	}
	for name := range refusedWhy {
		if !slices.Contains(fio.JobOptions(), name) && !fio.Resolve(name, "libaio").Exact {
			t.Errorf("refused %s is not an option of fio 3.33", name)
		}
	}
}
