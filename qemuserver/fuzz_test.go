package qemuserver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// The fuzz targets of the VM model's parsers. `go test` runs their seeds:
// the lines below, and at test time every file of the cfg2cmd corpus
// ($PVE_CFG2CMD_DIR or ../../shared/pve-cfg2cmd), the real-world corpus
// ($PVE_REALWORLD_DIR or ../../shared/real-world) and testdata/shapes.
// `go test -fuzz FuzzParseDrive ./qemuserver` (or `make fuzz`) explores.

// seedFiles lists the corpus files matching pattern below each seed
// directory that exists.
func seedFiles(pattern string) []string {
	var dirs []string
	for _, name := range []string{corpus.CFG2CMD, corpus.RealWorld} {
		if dir := corpus.Find(name); dir != "" {
			dirs = append(dirs, dir, filepath.Join(dir, "configs"), filepath.Join(dir, "storage"))
		}
	}
	dirs = append(dirs, filepath.Join("testdata", "shapes"))
	var out []string
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, pattern))
		out = append(out, m...)
	}
	return out
}

func readSeeds(pattern string) [][]byte {
	var out [][]byte
	for _, f := range seedFiles(pattern) {
		if b, err := os.ReadFile(f); err == nil {
			out = append(out, b)
		}
	}
	return out
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("scsi0: local-lvm:vm-100-disk-0,size=4G\n[PENDING]\ndelete: scsi0\n[snap]\nscsi0: x\n"))
	f.Add([]byte("#desc\ncdrom: none,media=cdrom\n[]\nfoo\n"))
	for _, b := range readSeeds("*.conf") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(bytes.NewReader(data), "fuzz.conf")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.conf") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for k, v := range c.Main {
			if !keyRe.MatchString(k+": "+v) && k != "ide2" {
				t.Fatalf("main key %q value %q is no config line", k, v)
			}
			if line, ok := c.Lines[k]; !ok || line < 1 {
				t.Fatalf("%s has no line number", k)
			}
		}
		for _, k := range DiskKeys(c.Next()) {
			checkDriveInvariants(t, k, c.Next()[k])
		}
	})
}

// driveSeeds are the drive lines of every corpus config, all sections.
func driveSeeds() [][2]string {
	var out [][2]string
	for _, b := range readSeeds("*.conf") {
		for _, line := range strings.Split(string(b), "\n") {
			if m := keyRe.FindStringSubmatch(line); m != nil {
				if _, _, ok := splitDriveKey(m[1]); ok {
					out = append(out, [2]string{m[1], m[2]})
				}
			}
		}
	}
	return out
}

func FuzzParseDrive(f *testing.F) {
	for _, s := range [][2]string{
		{"scsi1", "local-lvm:vm-100-disk-1,cache=writeback,discard=on,iothread=1,size=32G,mbps_wr=20"},
		{"efidisk0", "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=1,ms-cert=2023k,size=4M"},
		{"tpmstate0", "local-lvm:vm-100-disk-2,size=4M,version=v2.0"},
		{"unused0", "local-lvm:vm-100-disk-9"},
		{"ide2", "none,media=cdrom"},
		{"virtio0", "file=/dev/disk/by-id/x=y,bps_rd=1048576,iops_rd_length=2,iops_rd_max=9"},
		{"sata0", "cache=none,local:100/vm-100-disk-0.qcow2"},
	} {
		f.Add(s[0], s[1])
	}
	for _, s := range driveSeeds() {
		f.Add(s[0], s[1])
	}
	f.Fuzz(checkDriveInvariants)
}

// checkDriveInvariants: an accepted drive prints back to a line that parses
// to the same drive; a refused one is an ErrParse naming the key.
func checkDriveInvariants(t *testing.T, key, value string) {
	d, err := ParseDrive(key, value)
	if err != nil {
		var de *DriveError
		if !errors.Is(err, ErrParse) || !errors.As(err, &de) || de.Key != key {
			t.Fatalf("%s: %q: error %v is no DriveError for the key", key, value, err)
		}
		if len(err.Error()) > 600 {
			t.Fatalf("%s: error of %d bytes", key, len(err.Error()))
		}
		return
	}
	line := d.String()
	d2, err := ParseDrive(key, line)
	if err != nil {
		t.Fatalf("%s: %q accepted, printed back as %q, which is refused: %v", key, value, line, err)
	}
	if d2.Key != d.Key || d2.Bus != d.Bus || d2.Index != d.Index || d2.Volume != d.Volume || !reflect.DeepEqual(d2.Opts, d.Opts) {
		t.Fatalf("%s: %q -> %q parses to %+v, was %+v", key, value, line, d2, d)
	}
	if d.Kind().String() == "" || !Accepts(d.Bus, "file") {
		t.Fatalf("%s: kind %d bus %s", key, d.Kind(), d.Bus)
	}
	for k := range d.Opts {
		if !Accepts(d.Bus, k) {
			t.Fatalf("%s: kept option %s its format lacks", key, k)
		}
	}
}

func FuzzParseStorages(f *testing.F) {
	f.Add([]byte(storageCfg))
	f.Add([]byte("dir: local\n\tpath /var/lib/vz\n\tshared\n\nlvmthin: x\n thinpool data\n"))
	for _, b := range readSeeds("*storage.cfg") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStorages(bytes.NewReader(data), "fuzz.cfg")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.cfg") && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for id, s := range st {
			if id == "" || s.ID != id || s.Type == "" || s.Props == nil {
				t.Fatalf("storage %q: %+v", id, s)
			}
			// Resolving a volume on it never panics, whatever the type.
			d := &Drive{Key: "scsi0", Bus: "scsi", Volume: id + ":vm-100-disk-0", Opts: map[string]string{}}
			_, _ = ResolveVolume(st, d, nil)
			d.Volume = id + ":100/vm-100-disk-0.qcow2"
			_, _ = ResolveVolume(st, d, nil)
		}
	})
}

func FuzzSplitShell(f *testing.F) {
	f.Add(`/usr/bin/kvm \` + "\n" + `  -id 8006 -name 'vm8006,debug-threads=on' -drive "file=/a b,if=none"`)
	f.Add(`a 'b c' "d\"e" f\ g`)
	for _, b := range readSeeds("*.conf.cmd") {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitShell(s)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("%v is no ErrParse", err)
			}
			return
		}
		// Quoting each word again gives the same words back.
		var q []string
		for _, w := range words {
			q = append(q, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := SplitShell(strings.Join(q, " "))
		if err != nil || !reflect.DeepEqual(again, words) && len(words) > 0 {
			t.Fatalf("%q: %q requoted gives %q, %v", s, words, again, err)
		}
	})
}

// FuzzParseCmdline covers both generations: -blockdev JSON and -drive
// options, from `qm showcmd` text and from /proc/PID/cmdline bytes.
func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("-blockdev\x00{\"node-name\":\"drive-scsi0\",\"driver\":\"throttle\",\"file\":{\"driver\":\"raw\",\"file\":{\"driver\":\"host_device\",\"filename\":\"/dev/x\"}}}\x00-device\x00scsi-hd,drive=drive-scsi0,id=scsi0"))
	f.Add([]byte("-drive\x00file=/dev/pve/vm-1-disk-0,if=none,id=drive-virtio0,cache=writeback,aio=threads,throttling.bps-write=1\x00-device\x00virtio-blk-pci,drive=drive-virtio0,id=virtio0,iothread=iothread-virtio0"))
	f.Add([]byte("-object\x00{\"id\":\"throttle-drive-scsi0\",\"limits\":{\"bps-write\":5},\"qom-type\":\"throttle-group\"}"))
	for _, b := range readSeeds("*.conf.cmd") {
		if argv, err := SplitShell(string(b)); err == nil {
			f.Add([]byte(strings.Join(argv, "\x00")))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseCmdline(SplitNUL(raw))
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("%v is no ErrParse", err)
			}
			return
		}
		for id, d := range c.Disks {
			if !IsDiskKey(id) || d == nil {
				t.Fatalf("disk %q: %+v", id, d)
			}
		}
		for _, id := range c.DiskIDs() {
			if c.Disks[id] == nil {
				t.Fatalf("DiskIDs lists %s", id)
			}
		}
	})
}
