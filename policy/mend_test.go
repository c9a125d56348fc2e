package policy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// proposalOf is a disk's next start unchanged: what Mend is given when no
// other rule changes the disk.
func proposalOf(v *vm.VM, d *vm.Disk) Proposal {
	drv := d.Drive
	if d.PendingDrive != nil {
		drv = d.PendingDrive
	}
	return Proposal{Line: drv, SCSIHW: qemuserver.SCSIHW(v.Config.Next())}
}

var diskLineRe = regexp.MustCompile(`(?m)^(ide|sata|scsi|virtio)\d+: .*$`)

// applyMend writes a mended proposal into a one-disk config as qm set
// writes it: the disk's line (under scsi9 when it moves), the VM's scsihw.
func applyMend(conf string, m Mend) string {
	key := m.Line.Key
	if m.Move {
		key = "scsi9"
		m.Line = m.Line.Clone()
		delete(m.Line.Opts, "model")
	}
	conf = diskLineRe.ReplaceAllString(conf, key+": "+m.Line.String())
	conf = regexp.MustCompile(`(?m)^scsihw: .*\n`).ReplaceAllString(conf, "")
	return "scsihw: " + m.SCSIHW + "\n" + conf
}

// TestMend: each requirement's change of the line, the least one; applied,
// the disk breaks nothing (what Mend cannot fix says why, and is the one
// violation left).
func TestMend(t *testing.T) {
	for _, c := range []struct {
		name, conf, require string
		propose             func(p *Proposal) // a fix of check's, before the policy's
		want                string            // "scsihw | line [| moved]"
		unfixed             string
	}{
		{"cache set", "scsi0: local-lvm:vm-100-disk-0,size=8G", "cache: writeback", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,cache=writeback", ""},
		{"cache dropped to the default", "scsi0: local-lvm:vm-100-disk-0,cache=unsafe,size=8G", "cache: [none, directsync]", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"cache first allowed", "scsi0: local-lvm:vm-100-disk-0,cache=unsafe,size=8G", "cache: [directsync, none]", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"cache: held, check's drop undone", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,size=8G", "cache: writeback",
			func(p *Proposal) { delete(p.Line.Opts, "cache") }, "virtio-scsi-single | local-lvm:vm-100-disk-0,cache=writeback,size=8G", ""},
		{"aio set", "scsi0: local-lvm:vm-100-disk-0,size=8G", "aio: native", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,aio=native", ""},
		{"aio dropped to the default", "scsi0: local-lvm:vm-100-disk-0,aio=threads,size=8G", "aio: io_uring", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"aio native skipped without O_DIRECT", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,size=8G", "aio: [native, threads]", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,cache=writeback,size=8G,aio=threads", ""},
		{"aio native alone without O_DIRECT", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,aio=threads,size=8G", "aio: native", nil,
			"virtio-scsi-single | local-lvm:vm-100-disk-0,cache=writeback,aio=threads,size=8G", "aio=native needs cache.direct, and the disk runs cache writeback"},
		{"discard on", "scsi0: local-lvm:vm-100-disk-0,size=8G", "discard: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,discard=on", ""},
		{"discard off", "scsi0: local-lvm:vm-100-disk-0,discard=on,size=8G", "discard: off", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"iothread VirtIO Block", "virtio0: local-lvm:vm-100-disk-0,size=8G", "iothread: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,iothread=1", ""},
		{"iothread SCSI under lsi", "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,iothread=1,size=8G", "iothread: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,iothread=1,size=8G", ""},
		{"iothread SATA moves", "sata0: local-lvm:vm-100-disk-0,size=8G", "iothread: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,iothread=1 | moved", ""},
		{"iothread off", "virtio0: local-lvm:vm-100-disk-0,iothread=1,size=8G", "iothread: off", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"ssd on", "sata0: local-lvm:vm-100-disk-0,size=8G", "ssd: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,ssd=1", ""},
		{"ssd on VirtIO Block", "virtio0: local-lvm:vm-100-disk-0,size=8G", "ssd: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", "VirtIO Block has no ssd emulation"},
		{"ssd off", "scsi0: local-lvm:vm-100-disk-0,ssd=1,size=8G", "ssd: off", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"controller by scsihw", "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,size=8G", "controller: [virtio-scsi-pci, virtio-scsi-single]", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"controller: the VM's own kept", "scsihw: virtio-scsi-pci\nsata0: local-lvm:vm-100-disk-0,size=8G", "controller: [virtio-scsi-pci, megasas]", nil, "virtio-scsi-pci | local-lvm:vm-100-disk-0,size=8G | moved", ""},
		{"controller IDE moves", "scsihw: lsi\nide0: local-lvm:vm-100-disk-0,model=ABC,size=8G", "controller: virtio-scsi-single", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,model=ABC,size=8G | moved", ""},
		{"controller: no move to VirtIO Block", "scsi0: local-lvm:vm-100-disk-0,size=8G", "controller: virtio-blk", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", "a move to virtio-blk changes its key"},
		{"controller: check's move undone", "sata0: local-lvm:vm-100-disk-0,size=8G", "controller: sata", func(p *Proposal) { p.Move = true }, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"limit set", "scsi0: local-lvm:vm-100-disk-0,size=8G", "limits: {mbps_wr: {at_most: 200}}", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,mbps_wr=200", ""},
		{"limit lowered", "scsi0: local-lvm:vm-100-disk-0,mbps_wr=300,size=8G", "limits: {mbps_wr: {at_most: 200.5}}", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,mbps_wr=200.5,size=8G", ""},
		{"limit: the total split", "scsi0: local-lvm:vm-100-disk-0,mbps=300,mbps_max=400,size=8G", "limits: {mbps_wr: {at_most: 200}}", nil,
			"virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,mbps_rd=300,mbps_rd_max=400,mbps_wr=200", ""},
		{"limit: a total over directions", "scsi0: local-lvm:vm-100-disk-0,iops_rd=500,iops_wr=700,iops_wr_max=900,size=8G", "limits: {iops: {at_most: 1000}}", nil,
			"virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,iops=1000", ""},
		{"limit raised, its low burst dropped", "scsi0: local-lvm:vm-100-disk-0,iops_wr=50,iops_wr_max=80,iops_wr_max_length=5,size=8G", "limits: {iops_wr: {at_least: 100}}", nil,
			"virtio-scsi-single | local-lvm:vm-100-disk-0,iops_wr=100,size=8G", ""},
		{"limit: the total raised", "scsi0: local-lvm:vm-100-disk-0,iops=50,size=8G", "limits: {iops_wr: {at_least: 100}}", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,iops=100,size=8G", ""},
		{"limit: a total at least, from a sum", "scsi0: local-lvm:vm-100-disk-0,mbps_rd=10,mbps_wr=10,size=8G", "limits: {mbps: {at_least: 50}}", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,mbps=50", ""},
		{"limit between", "scsi0: local-lvm:vm-100-disk-0,size=8G", "limits: {iops: {at_least: 100, at_most: 1000}}", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,iops=1000", ""},
		{"backup off", "scsi0: local-lvm:vm-100-disk-0,size=8G", "backup: off", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,backup=0", ""},
		{"backup on", "scsi0: local-lvm:vm-100-disk-0,backup=0,size=8G", "backup: on", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G", ""},
		{"replicate off", "scsi0: local-lvm:vm-100-disk-0,size=8G", "replicate: off", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,size=8G,replicate=0", ""},
		{"held: nothing changes", "scsi0: local-lvm:vm-100-disk-0,discard=on,size=8G", "discard: on, cache: none", nil, "virtio-scsi-single | local-lvm:vm-100-disk-0,discard=on,size=8G", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			conf := c.conf + "\n"
			if !strings.HasPrefix(conf, "scsihw") {
				conf = "scsihw: virtio-scsi-single\n" + conf
			}
			p := mustParse(t, oneRule("", c.require))
			v := loadVM(t, 100, conf, false)
			var d *vm.Disk
			for _, x := range v.Disks {
				if len(p.Selects(v, testSite(t), x)) > 0 {
					d = x
				}
			}
			if d == nil {
				t.Fatal("no disk selected")
			}
			pr := proposalOf(v, d)
			pr.Line = pr.Line.Clone()
			if c.propose != nil {
				c.propose(&pr)
			}
			m := p.Mend(v, testSite(t), d, pr)
			got := m.SCSIHW + " | " + m.Line.String()
			if m.Move {
				got += " | moved"
			}
			if got != c.want {
				t.Errorf("mended\n got %s\nwant %s", got, c.want)
			}
			after := loadVM(t, 100, applyMend(conf, m), false)
			res := p.Judge(after, testSite(t))
			var left []Violation
			for _, xs := range res.Disks {
				left = append(left, xs...)
			}
			if c.unfixed == "" && len(left) > 0 {
				t.Errorf("after the mend: %+v", left)
			}
			if c.unfixed != "" {
				before := p.Judge(v, testSite(t)).Disks[d.ID]
				if len(before) != 1 || !strings.Contains(m.Unfixed(before[0]), c.unfixed) || len(left) != 1 {
					t.Errorf("unfixed: %q (violations before %d, after %d), want %q", m.Unfixed(before[0]), len(before), len(left), c.unfixed)
				}
			}
		})
	}
}

// TestMendConflict: two rules wanting what no line gives both: the first
// (in the file's order) is mended, the second is left, saying so; a line
// Proxmox would refuse is never proposed.
func TestMendConflict(t *testing.T) {
	p := mustParse(t, `rules:
  - name: fast
    require: {cache: writeback}
  - name: safe
    require: {cache: none}
`)
	v := loadVM(t, 100, "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,cache=unsafe,size=8G\n", false)
	d := v.Disk("scsi0")
	m := p.Mend(v, testSite(t), d, proposalOf(v, d))
	if got := m.Line.String(); got != "local-lvm:vm-100-disk-0,cache=writeback,size=8G" {
		t.Errorf("line %s", got)
	}
	xs := p.Judge(v, testSite(t)).Disks["scsi0"]
	if len(xs) != 2 || m.Unfixed(xs[0]) != "" || m.Unfixed(xs[1]) != "it conflicts with rule fast's cache (line 3), which holds" {
		t.Errorf("%d violations; unfixed %q, %q", len(xs), m.Unfixed(xs[0]), m.Unfixed(xs[1]))
	}
	// iothread on SATA would move the disk; a rule keeping it on SATA
	// (held) wins, the move is not proposed.
	p = mustParse(t, `rules:
  - name: keep
    require: {controller: sata}
  - name: thread
    require: {iothread: on}
`)
	v = loadVM(t, 100, "scsihw: virtio-scsi-single\nsata0: local-lvm:vm-100-disk-0,size=8G\n", false)
	d = v.Disk("sata0")
	m = p.Mend(v, testSite(t), d, proposalOf(v, d))
	xs = p.Judge(v, testSite(t)).Disks["sata0"]
	if m.Move || m.Line.String() != "local-lvm:vm-100-disk-0,size=8G" || len(xs) != 1 || !strings.Contains(m.Unfixed(xs[0]), "conflicts with rule keep's controller") {
		t.Errorf("move %v line %s violations %d unfixed %q", m.Move, m.Line, len(xs), m.Unfixed(xs[0]))
	}
	// Nothing selected: the proposal comes back as it was.
	p = mustParse(t, oneRule("storage: nas", "cache: none"))
	v = loadVM(t, 100, "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,cache=unsafe,size=8G\n", false)
	d = v.Disk("scsi0")
	if m := p.Mend(v, testSite(t), d, proposalOf(v, d)); m.Line.String() != d.Drive.String() || m.SCSIHW != "lsi" || m.Move {
		t.Errorf("unselected disk changed: %+v", m)
	}
}
