package check

import (
	"reflect"
	"strings"
	"testing"
)

// TestZFSRules: the zvols' sync property as `zfs get` reports it (one
// call for all of a VM's zvols), and the zfspool blocksize pve-storage
// 9.1.4 refuses: the exact findings, the fix, and what a zfs that cannot
// answer leaves unchecked.
func TestZFSRules(t *testing.T) {
	conf := "scsi0: local-zfs:vm-100-disk-0,discard=on\nscsi1: zfs-thick:vm-100-disk-1\nscsi2: local-lvm:vm-100-disk-0,discard=on\n"
	for _, c := range []struct {
		name       string
		sync       map[string]string
		want       []string
		notChecked []Code
		contains   []string
	}{
		{"standard everywhere: nothing", nil, []string{}, nil, nil},
		{"disabled: an error with its fix", map[string]string{"rpool/thick/vm-100-disk-1": "disabled"},
			[]string{"error zfs-sync-disabled scsi1"}, nil,
			[]string{"zvol rpool/thick/vm-100-disk-1: ZFS completes the guest's flushes without writing anything (sync=disabled)", "| zfs set sync=standard rpool/thick/vm-100-disk-1"}},
		{"always: an info", map[string]string{"rpool/data/vm-100-disk-0": "always"},
			[]string{"info zfs-sync-always scsi0"}, nil, []string{"commits every write to its intent log (ZIL)"}},
		{"both", map[string]string{"rpool/data/vm-100-disk-0": "always", "rpool/thick/vm-100-disk-1": "disabled"},
			[]string{"info zfs-sync-always scsi0", "error zfs-sync-disabled scsi1"}, nil, nil},
		{"a zvol gone: unknown, not checked, nothing guessed", map[string]string{"rpool/thick/vm-100-disk-1": "gone"},
			[]string{}, []Code{CodeZFSSyncDisabled, CodeZFSSyncAlways}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.conf(100, conf)
			r := quietRunner()
			r.Do["zfs get name,property,value"] = zvolProps(c.sync)
			v := tn.check(100, r, Options{})
			got := []string{}
			all := ""
			for _, f := range v.Findings {
				if strings.HasPrefix(string(f.Code), "zfs-") {
					got = append(got, string(f.Severity)+" "+string(f.Code)+" "+f.Disk)
				}
				all += f.Message + " | " + f.Fix + "\n"
			}
			if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(v.NotChecked, c.notChecked) {
				t.Errorf("findings %q not checked %v, want %q %v", got, v.NotChecked, c.want, c.notChecked)
			}
			for _, s := range c.contains {
				if !strings.Contains(all, s) {
					t.Errorf("%q not in\n%s", s, all)
				}
			}
			calls := 0
			for _, s := range r.Calls() {
				if strings.Contains(s, "name,property,value") {
					calls++
					if !strings.HasSuffix(s, " rpool/data/vm-100-disk-0 rpool/thick/vm-100-disk-1") {
						t.Errorf("call %q", s)
					}
				}
			}
			if calls != 1 {
				t.Errorf("%d zfs get calls, want one for the VM", calls)
			}
			if c.notChecked != nil && (len(v.Notes) != 2 || !strings.Contains(v.Notes[1], "dataset does not exist")) {
				t.Errorf("notes %q", v.Notes)
			}
		})
	}
	t.Run("no zvol: zfs is not run", func(t *testing.T) {
		tn := newNode(t)
		tn.conf(100, "scsi2: local-lvm:vm-100-disk-0,discard=on\n")
		r := quietRunner()
		tn.check(100, r, Options{})
		for _, s := range r.Calls() {
			if strings.HasPrefix(s, "zfs") {
				t.Errorf("ran %q", s)
			}
		}
	})
}

func TestZFSBlocksizeRule(t *testing.T) {
	for _, c := range []struct {
		blocksize string
		want      []string
	}{
		{"16k", []string{}},
		{"", []string{}},
		{"12k", []string{"warning zfs-blocksize-invalid -"}},
		{"32m", []string{"warning zfs-blocksize-invalid -"}},
		{"08k", []string{"warning zfs-blocksize-invalid -"}},
	} {
		tn := newNode(t)
		cfg := strings.Replace(storageCfg, "\tpool rpool/thick\n", "\tpool rpool/thick\n\tblocksize "+c.blocksize+"\n", 1)
		if c.blocksize == "" {
			cfg = storageCfg
		}
		tn.write("etc/pve/storage.cfg", cfg)
		tn.conf(100, "scsi1: zfs-thick:vm-100-disk-1\n[PENDING]\nscsi0: local-zfs:vm-100-disk-0,discard=on\n")
		v := tn.check(100, quietRunner(), Options{})
		got := []string{}
		for _, f := range v.Findings {
			if f.Code == CodeZFSBlocksizeInvalid {
				got = append(got, string(f.Severity)+" "+string(f.Code)+" -")
				if !strings.HasPrefix(f.Message, "storage zfs-thick (zfspool): blocksize \""+c.blocksize+"\": pve-storage refuses it") || !strings.Contains(f.Fix, "pvesm set zfs-thick --blocksize 16k") {
					t.Errorf("%+v", f)
				}
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("blocksize %q: %q, want %q", c.blocksize, got, c.want)
		}
	}
}
