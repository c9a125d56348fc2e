package advisory

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// TestTable: the shipped table loads, and every entry has what a finding
// needs, above all a source and a fixed version (Validate).
func TestTable(t *testing.T) {
	tab := Known()
	if len(tab) < 10 {
		t.Fatalf("%d advisories", len(tab))
	}
	for _, a := range tab {
		if err := a.Validate(); err != nil {
			t.Error(err)
		}
		if a.Package != "pve-qemu-kvm" {
			t.Errorf("%s: package %s", a.ID, a.Package)
		}
		hasChangelog := false
		for _, s := range a.Sources {
			hasChangelog = hasChangelog || s.Changelog != ""
		}
		if !hasChangelog {
			t.Errorf("%s: no pve-qemu changelog entry among its sources", a.ID)
		}
		if strings.HasSuffix(a.Effect, ".") || strings.HasSuffix(a.Trigger, ".") || strings.HasSuffix(a.Avoid, ".") {
			t.Errorf("%s: a sentence of the finding ends in a full stop (the finding goes on after it)", a.ID)
		}
	}
}

// entry is a valid advisory to break one field at a time.
const entry = `{"id": "x", "package": "pve-qemu-kvm", "affected": [{"introduced": "1.0-1", "fixed": "1.0-2"}], "severity": "warning",
 "title": "t", "effect": "e", "trigger": "g", "needs": {"aio": "io_uring"}, "sources": [{"changelog": "1.0-2", "text": "fix"}]}`

func TestValidate(t *testing.T) {
	if _, err := Load([]byte("[" + entry + "]")); err != nil {
		t.Fatalf("the valid entry: %v", err)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"no source", `"sources": [{"changelog": "1.0-2", "text": "fix"}]`, `"sources": []`, "no source"},
		{"no sources field", `, "sources": [{"changelog": "1.0-2", "text": "fix"}]`, ``, "no source"},
		{"a range without a fixed version", `"fixed": "1.0-2"`, `"fixed": ""`, "without a fixed version"},
		{"a range without the fixed field", `, "fixed": "1.0-2"`, ``, "without a fixed version"},
		{"no range", `[{"introduced": "1.0-1", "fixed": "1.0-2"}]`, `[]`, "no affected range"},
		{"a fixed version dpkg refuses", `"fixed": "1.0-2"`, `"fixed": "x.0"`, "fixed: not a Debian version"},
		{"introduced not below fixed", `"introduced": "1.0-1"`, `"introduced": "1.0-2"`, "is not below fixed"},
		{"overlapping ranges", `[{"introduced": "1.0-1", "fixed": "1.0-2"}]`, `[{"introduced": "1.0-1", "fixed": "1.0-3"}, {"fixed": "1.0-2"}]`, "overlaps"},
		{"a range open below, then one inside it", `[{"introduced": "1.0-1", "fixed": "1.0-2"}]`, `[{"fixed": "1.0-3"}, {"introduced": "1.0-2", "fixed": "1.0-4"}]`, "overlaps"},
		{"two ranges open below", `[{"introduced": "1.0-1", "fixed": "1.0-2"}]`, `[{"fixed": "1.0-3"}, {"fixed": "2.0-1"}]`, "overlaps"},
		{"a source naming two places", `{"changelog": "1.0-2", "text": "fix"}`, `{"changelog": "1.0-2", "bug": 1}`, "names 2 places"},
		{"a source naming none", `{"changelog": "1.0-2", "text": "fix"}`, `{"text": "fix"}`, "names 0 places"},
		{"a plain-http url", `{"changelog": "1.0-2", "text": "fix"}`, `{"url": "http://example.org/"}`, "is not https"},
		{"a commit that is no commit id", `{"changelog": "1.0-2", "text": "fix"}`, `{"commit": "HEAD"}`, "not a commit id"},
		{"a changelog that is no version", `{"changelog": "1.0-2", "text": "fix"}`, `{"changelog": "latest"}`, "source changelog"},
		{"no needs", `"needs": {"aio": "io_uring"}`, `"needs": {}`, "needs:"},
		{"any_disk with a setting", `"needs": {"aio": "io_uring"}`, `"needs": {"aio": "io_uring", "any_disk": true}`, "needs:"},
		{"no severity", `"severity": "warning"`, `"severity": "critical"`, "severity"},
		{"no effect", `"effect": "e"`, `"effect": ""`, "must all be set"},
		{"no package", `"package": "pve-qemu-kvm"`, `"package": ""`, "no package"},
		{"a field the table does not have", `"title": "t"`, `"title": "t", "cve": "x"`, "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(entry, c.old, c.new, 1)
			if broken == entry {
				t.Fatal("nothing replaced")
			}
			if _, err := Load([]byte("[" + broken + "]")); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load: %v, want %q", err, c.want)
			}
		})
	}
	// Ranges that touch do not overlap: a fix, then the bug again on a
	// later branch (the SATA entry's shape), in either order.
	for _, r := range []string{`[{"fixed": "1.0-2"}, {"introduced": "1.0-2", "fixed": "1.0-4"}]`, `[{"introduced": "1.0-2", "fixed": "1.0-4"}, {"fixed": "1.0-2"}]`} {
		if _, err := Load([]byte("[" + strings.Replace(entry, `[{"introduced": "1.0-1", "fixed": "1.0-2"}]`, r, 1) + "]")); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	if _, err := Load([]byte("[" + entry + "," + entry + "]")); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("a duplicate id: %v", err)
	}
}

func TestParseBuild(t *testing.T) {
	for _, c := range []struct {
		raw, pkg, version, str string
		exact                  bool
	}{
		{"pve-qemu-kvm_11.0.0-1", "pve-qemu-kvm", "11.0.0-1", "pve-qemu-kvm 11.0.0-1", true},
		{"pve-qemu-kvm_10.2.1-1", "pve-qemu-kvm", "10.2.1-1", "pve-qemu-kvm 10.2.1-1", true},
		{"pve-qemu-kvm_6.2.0", "pve-qemu-kvm", "6.2.0", "pve-qemu-kvm 6.2.0", false},
		{"pve-qemu-kvm_2.9.1-9~pve4", "pve-qemu-kvm", "2.9.1-9~pve4", "pve-qemu-kvm 2.9.1-9~pve4", true},
		{"Debian 1:7.2+dfsg-7+deb12u18+b3", "qemu-system-x86", "1:7.2+dfsg-7+deb12u18+b3", "qemu-system-x86 1:7.2+dfsg-7+deb12u18+b3", true},
		{"Debian 1:11.1.3+ds-1~bpo13+1", "qemu-system-x86", "1:11.1.3+ds-1~bpo13+1", "qemu-system-x86 1:11.1.3+ds-1~bpo13+1", true},
		{"", "", "", "an unnamed build", false},
		{"my-build", "", "", "build my-build", false},
		{"pve-qemu-kvm_", "", "", "build pve-qemu-kvm_", false},
		{"_11.0.0-1", "", "", "build _11.0.0-1", false},
		{"PVE_11.0.0-1", "", "", "build PVE_11.0.0-1", false},
		{"pve-qemu-kvm_next", "", "", "build pve-qemu-kvm_next", false},
		{"Debian", "", "", "build Debian", false},
	} {
		b := ParseBuild(c.raw)
		got := ""
		if b.Version != nil {
			got = b.Version.String()
		}
		if b.Raw != c.raw || b.Package != c.pkg || got != c.version || b.Exact != c.exact || b.String() != c.str {
			t.Errorf("ParseBuild(%q) = %+v %q %q", c.raw, b, got, b.String())
		}
	}
}

// The disks of the shapes the advisories name, as the running command
// line gives them (qemuserver.ParseCmdline's DiskSettings): Proxmox's
// defaults are raw, aio=io_uring, discard ignore, detect-zeroes on.
func disk(id, controller string, set ...func(*qemuserver.DiskSettings)) qemuserver.DiskSettings {
	d := qemuserver.DiskSettings{ID: id, Controller: controller, Format: "raw", AIO: "io_uring", Discard: "ignore", DetectZeroes: "on", Device: "scsi-hd"}
	for _, f := range set {
		f(&d)
	}
	return d
}

var (
	iothread = func(d *qemuserver.DiskSettings) { d.IOThread = true }
	discard  = func(d *qemuserver.DiskSettings) { d.Discard, d.DetectZeroes = "unmap", "unmap" }
	qcow2    = func(d *qemuserver.DiskSettings) { d.Format = "qcow2" }
	native   = func(d *qemuserver.DiskSettings) { d.AIO = "native" }
	threads  = func(d *qemuserver.DiskSettings) { d.AIO = "threads" }
	noDZ     = func(d *qemuserver.DiskSettings) { d.DetectZeroes = "off" }
	cdrom    = func(d *qemuserver.DiskSettings) {
		d.CDROM, d.Device, d.Discard, d.DetectZeroes = true, "ide-cd", "", ""
	}
)

func ids(hits []Hit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, h.Advisory.ID+" "+strings.Join(h.Disks, ","))
	}
	sort.Strings(out)
	return out
}

// TestMatch: each advisory on the config shapes it names, affected and
// not, at the edges of its ranges; the exact set of hits (advisory and
// disks) for each build and set of disks.
func TestMatch(t *testing.T) {
	tab := Known()
	for _, c := range []struct {
		name  string
		build string
		disks []qemuserver.DiskSettings
		want  []string
	}{
		// qcow2-discard-during-cow-write: qcow2 with discard=on, every
		// build before 11.0.0-1.
		{"qcow2 with discard on the last build before the fix", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, discard, native)},
			[]string{"qcow2-discard-during-cow-write scsi0"}},
		{"qcow2 with discard on PVE 8's last build", "pve-qemu-kvm_9.2.0-7", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, discard, native)},
			[]string{"qcow2-discard-during-cow-write scsi0"}},
		{"qcow2 with discard on the fixed build", "pve-qemu-kvm_11.0.0-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, discard, native)}, []string{}},
		{"qcow2 without discard", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, native)}, []string{}},
		{"raw with discard", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", discard, native)}, []string{}},
		{"two disks, one qcow2 with discard", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", discard, native), disk("scsi1", "virtio-scsi-single", qcow2, discard, native)},
			[]string{"qcow2-discard-during-cow-write scsi1"}},

		// iothread-io-pressure-accounting: an iothread on 10.2.1-1 only.
		{"iothread on 10.2.1-1", "pve-qemu-kvm_10.2.1-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread), disk("scsi1", "virtio-scsi-single")},
			[]string{"iothread-io-pressure-accounting scsi0"}},
		{"iothread on 10.2.1-2", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread)}, []string{}},
		{"iothread on 10.1.2-7", "pve-qemu-kvm_10.1.2-7", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread)}, []string{}},
		{"VirtIO Block with iothread on 10.2.1-1", "pve-qemu-kvm_10.2.1-1", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", iothread, native)},
			[]string{"iothread-io-pressure-accounting virtio0"}},
		{"no iothread on 10.2.1-1", "pve-qemu-kvm_10.2.1-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single"), disk("sata0", "sata")}, []string{}},

		// io_uring-resubmit-stuck: aio=io_uring from 6.0.0-2 to 10.1.2-5.
		{"io_uring on 10.1.2-4", "pve-qemu-kvm_10.1.2-4", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single"), disk("scsi1", "virtio-scsi-single", native), disk("scsi2", "virtio-scsi-single", threads)},
			[]string{"io_uring-resubmit-stuck scsi0", "mirror-short-zero-write-abort scsi0,scsi1,scsi2"}},
		{"io_uring on 10.1.2-5", "pve-qemu-kvm_10.1.2-5", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")}, []string{"mirror-short-zero-write-abort scsi0"}},
		{"io_uring on 10.2.1-2", "pve-qemu-kvm_10.2.1-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")}, []string{}},
		{"io_uring on 6.0.0-2", "pve-qemu-kvm_6.0.0-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")}, []string{"io_uring-resubmit-stuck scsi0"}},
		{"io_uring on a 6.0.0 build that names no revision", "pve-qemu-kvm_6.0.0", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")}, []string{}},
		{"io_uring on a 6.2.0 build that names no revision", "pve-qemu-kvm_6.2.0", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")}, []string{"io_uring-resubmit-stuck scsi0"}},

		// virtio-scsi-tmf-cancel-deadlock: VirtIO SCSI from 10.0.2-1 to
		// 10.1.2-1, either controller, iothread or not.
		{"VirtIO SCSI single on 10.1.0-1", "pve-qemu-kvm_10.1.0-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", native), disk("scsi1", "virtio-scsi-pci", native), disk("scsi2", "lsi", native), disk("virtio0", "virtio-blk", native)},
			[]string{"mirror-short-zero-write-abort scsi0,scsi1,scsi2,virtio0", "virtio-scsi-tmf-cancel-deadlock scsi0,scsi1"}},
		{"VirtIO SCSI on 10.0.2-1", "pve-qemu-kvm_10.0.2-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", native)}, []string{"virtio-scsi-tmf-cancel-deadlock scsi0"}},
		{"VirtIO SCSI on 9.2.0-7", "pve-qemu-kvm_9.2.0-7", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", native)}, []string{}},
		{"VirtIO SCSI on 10.1.2-1", "pve-qemu-kvm_10.1.2-1", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", native)}, []string{"mirror-short-zero-write-abort scsi0"}},
		{"a SCSI CD-ROM on VirtIO SCSI", "pve-qemu-kvm_10.0.2-4", []qemuserver.DiskSettings{disk("scsi5", "virtio-scsi-single", native, cdrom)}, []string{}},

		// mirror-short-zero-write-abort: any disk, 10.1.0-1 to 10.1.2-7.
		{"any disk on 10.1.2-6", "pve-qemu-kvm_10.1.2-6", []qemuserver.DiskSettings{disk("sata0", "sata", native), disk("ide2", "ide", native, cdrom), disk("efidisk0", "efi", threads)},
			[]string{"mirror-short-zero-write-abort sata0"}},
		{"any disk on 10.1.2-7", "pve-qemu-kvm_10.1.2-7", []qemuserver.DiskSettings{disk("sata0", "sata", native)}, []string{}},
		{"any disk on 10.0.2-4", "pve-qemu-kvm_10.0.2-4", []qemuserver.DiskSettings{disk("sata0", "sata", native)}, []string{}},
		{"no disk but a CD-ROM on 10.1.2-6", "pve-qemu-kvm_10.1.2-6", []qemuserver.DiskSettings{disk("ide2", "ide", native, cdrom)}, []string{}},

		// iothread-drain-stuck-io and virtio-scsi-event-poll-cpu-loop: the
		// 8.1 series, two ranges around 8.1.2-5.
		{"iothread on 8.1.2-4", "pve-qemu-kvm_8.1.2-4", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread), disk("virtio0", "virtio-blk", iothread), disk("scsi1", "virtio-scsi-single")},
			[]string{"io_uring-resubmit-stuck scsi0,virtio0,scsi1", "iothread-drain-stuck-io scsi0,virtio0"}},
		{"iothread on 8.1.2-5: the workaround's busy loop instead", "pve-qemu-kvm_8.1.2-5", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread, native), disk("virtio0", "virtio-blk", iothread, native)},
			[]string{"virtio-scsi-event-poll-cpu-loop scsi0"}},
		{"iothread on 8.1.2-6: the stuck I/O again", "pve-qemu-kvm_8.1.2-6", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread, native)},
			[]string{"iothread-drain-stuck-io scsi0"}},
		{"iothread on 8.1.5-2", "pve-qemu-kvm_8.1.5-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread, native)}, []string{}},
		{"iothread on 8.0.2-7", "pve-qemu-kvm_8.0.2-7", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", iothread, native)}, []string{}},

		// sata-reset-pending-dma-sector0: SATA, two branches.
		{"SATA on PVE 7's 7.2.0-8", "pve-qemu-kvm_7.2.0-8", []qemuserver.DiskSettings{disk("sata0", "sata", native), disk("ide0", "ide", native)},
			[]string{"sata-reset-pending-dma-sector0 sata0"}},
		{"SATA on PVE 7's 7.2.10-1 (QEMU 7.2.7's fix)", "pve-qemu-kvm_7.2.10-1", []qemuserver.DiskSettings{disk("sata0", "sata", native)}, []string{}},
		{"SATA on 8.0.0-1", "pve-qemu-kvm_8.0.0-1", []qemuserver.DiskSettings{disk("sata0", "sata", native)}, []string{"sata-reset-pending-dma-sector0 sata0"}},
		{"SATA on 8.0.2-7", "pve-qemu-kvm_8.0.2-7", []qemuserver.DiskSettings{disk("sata0", "sata", native)}, []string{}},
		{"a SATA CD-ROM on 8.0.2-6", "pve-qemu-kvm_8.0.2-6", []qemuserver.DiskSettings{disk("sata2", "sata", native, cdrom)}, []string{}},

		// virtio-blk-detect-zeroes-unmap-write-error: VirtIO Block with
		// discard and detect-zeroes unmap, 7.2.0-1 to 7.2.0-4.
		{"VirtIO Block with discard on 7.2.0-3", "pve-qemu-kvm_7.2.0-3", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", discard, native), disk("virtio1", "virtio-blk", native), disk("scsi0", "virtio-scsi-single", discard, native)},
			[]string{"virtio-blk-detect-zeroes-unmap-write-error virtio0"}},
		{"VirtIO Block with discard and detect_zeroes=0 on 7.2.0-3", "pve-qemu-kvm_7.2.0-3", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", discard, noDZ, native)}, []string{}},
		{"VirtIO Block with discard on 7.2.0-4", "pve-qemu-kvm_7.2.0-4", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", discard, native)}, []string{}},
		{"VirtIO Block with discard on 7.1.0-4", "pve-qemu-kvm_7.1.0-4", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", discard, native)}, []string{}},

		// ide-trim-drain-deadlock: IDE or SATA with discard, 7.0.0-1 to
		// 7.2.0-7.
		{"IDE and SATA with discard on 7.2.0-6", "pve-qemu-kvm_7.2.0-6", []qemuserver.DiskSettings{disk("ide0", "ide", discard, native), disk("sata0", "sata", discard, native), disk("sata1", "sata", native)},
			[]string{"ide-trim-drain-deadlock ide0,sata0", "sata-reset-pending-dma-sector0 sata0,sata1"}},
		{"SATA with discard on 7.2.0-7", "pve-qemu-kvm_7.2.0-7", []qemuserver.DiskSettings{disk("sata0", "sata", discard, native)}, []string{"sata-reset-pending-dma-sector0 sata0"}},
		{"IDE with discard on 6.2.0-11", "pve-qemu-kvm_6.2.0-11", []qemuserver.DiskSettings{disk("ide0", "ide", discard, native)}, []string{}},

		// io_uring-hotplug-resize-crash: io_uring on 9.0.0-1 and -2.
		{"io_uring on 9.0.0-2", "pve-qemu-kvm_9.0.0-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")},
			[]string{"io_uring-hotplug-resize-crash scsi0", "io_uring-resubmit-stuck scsi0"}},
		{"io_uring on 9.0.0-3", "pve-qemu-kvm_9.0.0-3", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single")},
			[]string{"io_uring-resubmit-stuck scsi0"}},

		// snapshot-without-ram-iothread-crash: VirtIO Block with iothread,
		// 9.0.0-1 to 9.0.0-4.
		{"VirtIO Block with iothread on 9.0.0-3", "pve-qemu-kvm_9.0.0-3", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", iothread, native), disk("scsi0", "virtio-scsi-single", iothread, native)},
			[]string{"snapshot-without-ram-iothread-crash virtio0"}},
		{"VirtIO Block with iothread on 9.0.0-4", "pve-qemu-kvm_9.0.0-4", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", iothread, native)}, []string{}},
		{"VirtIO Block with iothread on 8.2.2-1", "pve-qemu-kvm_8.2.2-1", []qemuserver.DiskSettings{disk("virtio0", "virtio-blk", iothread, native)}, []string{}},

		// Builds the table is not about.
		{"Debian's QEMU, old and with everything", "Debian 1:7.2+dfsg-7+deb12u18+b3", []qemuserver.DiskSettings{disk("sata0", "sata", qcow2, discard, iothread)}, []string{}},
		{"a build of one's own", "qemu-custom", []qemuserver.DiskSettings{disk("sata0", "sata", qcow2, discard)}, []string{}},
		{"no package string", "", []qemuserver.DiskSettings{disk("sata0", "sata", qcow2, discard)}, []string{}},
		{"no disk", "pve-qemu-kvm_10.2.1-1", nil, []string{}},
		{"the current build with everything", "pve-qemu-kvm_11.0.0-2", []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, discard, iothread), disk("sata0", "sata"), disk("virtio0", "virtio-blk", iothread, discard)}, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(tab.Match(ParseBuild(c.build), c.disks)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Match(%s) = %q, want %q", c.build, got, c.want)
			}
		})
	}
}

// TestEveryAdvisoryMatched: TestMatch covers each entry of the table, at
// least once affected.
func TestEveryAdvisoryMatched(t *testing.T) {
	covered := map[string]bool{}
	for _, b := range []string{"10.2.1-2", "10.2.1-1", "10.1.2-4", "10.1.0-1", "10.1.2-6", "8.1.2-4", "8.1.2-5", "7.2.0-8", "7.2.0-3", "7.2.0-6", "9.0.0-2", "9.0.0-3"} {
		all := []qemuserver.DiskSettings{disk("scsi0", "virtio-scsi-single", qcow2, discard, iothread), disk("sata0", "sata", discard), disk("virtio0", "virtio-blk", iothread, discard)}
		for _, h := range Known().Match(ParseBuild("pve-qemu-kvm_"+b), all) {
			covered[h.Advisory.ID] = true
		}
	}
	for _, a := range Known() {
		if !covered[a.ID] {
			t.Errorf("%s: no case matches it", a.ID)
		}
	}
}

func TestHitRange(t *testing.T) {
	tab := Known()
	for _, c := range []struct{ build, fixed string }{
		{"pve-qemu-kvm_7.2.0-8", "7.2.10-1"},
		{"pve-qemu-kvm_8.0.2-6", "8.0.2-7"},
	} {
		hits := tab.Match(ParseBuild(c.build), []qemuserver.DiskSettings{disk("sata0", "sata", native)})
		if len(hits) != 1 || hits[0].Range.Fixed != c.fixed {
			t.Errorf("%s: %+v, want the range fixed in %s", c.build, hits, c.fixed)
		}
	}
}

func TestNeedsString(t *testing.T) {
	for _, c := range []struct {
		n    Needs
		want string
	}{
		{Needs{AnyDisk: true}, "any disk"},
		{Needs{Format: "qcow2", Discard: true}, "qcow2, discard=on"},
		{Needs{Controllers: []string{"virtio-blk"}, Discard: true, DetectZeroes: "unmap"}, "on virtio-blk, discard=on, detect-zeroes=unmap"},
		{Needs{Controllers: []string{"virtio-scsi-single", "virtio-scsi-pci"}, IOThread: true}, "on virtio-scsi-single or virtio-scsi-pci, iothread=1"},
		{Needs{AIO: "io_uring"}, "aio=io_uring"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}

func TestSourceString(t *testing.T) {
	for _, c := range []struct {
		s    Source
		want string
	}{
		{Source{Changelog: "10.2.1-2", Text: "fix"}, "pve-qemu changelog 10.2.1-2"},
		{Source{Bug: 6810}, "Proxmox bug #6810"},
		{Source{Commit: "775e41b", File: "debian/patches/x.patch"}, "pve-qemu commit 775e41b (debian/patches/x.patch)"},
		{Source{Commit: "c1cd6a6"}, "pve-qemu commit c1cd6a6"},
		{Source{URL: "https://forum.proxmox.com/threads/170045/"}, "https://forum.proxmox.com/threads/170045/"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

func TestLaterAndFixes(t *testing.T) {
	byID := map[string]*Advisory{}
	for i, a := range Known() {
		byID[a.ID] = &Known()[i]
	}
	stuck, sata, psi := byID["iothread-drain-stuck-io"], byID["sata-reset-pending-dma-sector0"], byID["iothread-io-pressure-accounting"]
	v := func(s string) dpkg.Version {
		x, err := dpkg.ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		a     *Advisory
		r     int
		later []Range
		fixes map[string]bool
	}{
		{stuck, 0, []Range{{"8.1.2-6", "8.1.5-2"}}, map[string]bool{"8.1.2-4": false, "8.1.2-5": true, "8.1.2-6": false, "8.1.5-1": false, "8.1.5-2": true, "9.0.0-1": true}},
		{stuck, 1, nil, map[string]bool{"8.1.2-5": false, "8.1.5-2": true}},
		{sata, 0, []Range{{"8.0.0-1", "8.0.2-7"}}, map[string]bool{"7.2.0-8": false, "7.2.10-1": true, "8.0.2-6": false, "8.0.2-7": true}},
		{psi, 0, nil, map[string]bool{"10.2.1-1": false, "10.2.1-2": true, "10.2.1-1~rc1": false, "11.0.0-1": true}},
	} {
		r := c.a.Affected[c.r]
		if got := c.a.Later(r); !reflect.DeepEqual(got, c.later) {
			t.Errorf("%s up to %s: later %v, want %v", c.a.ID, r.Fixed, got, c.later)
		}
		for ver, want := range c.fixes {
			if got := c.a.Fixes(r, v(ver)); got != want {
				t.Errorf("%s up to %s: Fixes(%s) = %v", c.a.ID, r.Fixed, ver, got)
			}
		}
	}
}
