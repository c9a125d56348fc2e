// Package qemuserver models a Proxmox VE virtual machine the way qemu-server
// does: config files, drive property strings, storage definitions, QEMU command
// lines of both generations, and the rules that turn one into the other.
package qemuserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ErrParse wraps every config, drive and storage.cfg syntax error.
var ErrParse = exitcode.New(exitcode.Usage, "parse error")

// Config is a VM config file: the main section and [PENDING]. Snapshot and
// special sections are skipped: only the main section describes the VM now.
type Config struct {
	VMID    int
	Path    string
	Main    map[string]string
	Lines   map[string]int // line number of each main-section key
	Pending map[string]string
	// PendingDelete lists keys that the next start (or hotplug) removes.
	PendingDelete []string
	Description   string
}

// MinVMID and MaxVMID are Proxmox's accepted VMID range.
const (
	MinVMID = 100
	MaxVMID = 999999999
)

// ParseVMID validates a VMID argument as Proxmox does.
func ParseVMID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strings.TrimSpace(s) != s || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("invalid VMID %s: not a number", units.Clip(s, 20))
	}
	if n < MinVMID || n > MaxVMID {
		return 0, fmt.Errorf("invalid VMID %s: out of range %d-%d", units.Clip(s, 20), MinVMID, MaxVMID)
	}
	return n, nil
}

var (
	sectionRe = regexp.MustCompile(`^\[([^\]]+)\]\s*$`)
	keyRe     = regexp.MustCompile(`^([a-z][a-z0-9_\-]*):\s*(.*?)\s*$`)
)

// LoadConfig reads and parses a VM config file.
func LoadConfig(path string, vmid int) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(bytes.NewReader(data), path)
	if err != nil {
		return nil, err
	}
	c.VMID = vmid
	return c, nil
}

// ParseConfig parses a config file; name is used in error messages.
func ParseConfig(r io.Reader, name string) (*Config, error) {
	c := &Config{Path: name, Main: map[string]string{}, Lines: map[string]int{}, Pending: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	section := ""
	lineNo := 0
	var desc []string
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := sectionRe.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if section != "" && section != "PENDING" {
			continue // snapshots, [special:cloudinit], [special:fleecing]
		}
		if strings.HasPrefix(line, "#") {
			if section == "" {
				desc = append(desc, strings.TrimPrefix(line, "#"))
			}
			continue
		}
		m := keyRe.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%w: %s line %d: cannot parse %q", ErrParse, name, lineNo, line)
		}
		key, val := m[1], m[2]
		if section == "PENDING" {
			if key == "delete" {
				for _, k := range strings.Split(val, ",") {
					if k = strings.TrimPrefix(strings.TrimSpace(k), "!"); k != "" {
						c.PendingDelete = append(c.PendingDelete, k)
					}
				}
				continue
			}
			c.Pending[key] = val
			continue
		}
		if _, dup := c.Main[key]; dup {
			return nil, fmt.Errorf("%w: %s line %d: duplicate key %q", ErrParse, name, lineNo, key)
		}
		c.Main[key] = val
		c.Lines[key] = lineNo
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.Description = strings.Join(desc, "\n")
	return c, nil
}

// Get returns a main-section value.
func (c *Config) Get(key string) (string, bool) {
	v, ok := c.Main[key]
	return v, ok
}

// Next returns the config as the next start applies it: the main section with
// [PENDING] values and deletions applied (what `qm config` prints).
func (c *Config) Next() map[string]string {
	out := make(map[string]string, len(c.Main))
	for k, v := range c.Main {
		out[k] = v
	}
	for _, k := range c.PendingDelete {
		delete(out, k)
	}
	for k, v := range c.Pending {
		out[k] = v
	}
	return out
}

// DiskKeys returns the config's disk keys in Proxmox's order (ide, sata,
// scsi, virtio, efidisk, tpmstate), from the given key set.
func DiskKeys(keys map[string]string) []string {
	var out []string
	for k := range keys {
		if IsDiskKey(k) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return diskOrder(out[i]) < diskOrder(out[j]) })
	return out
}

var diskKeyRe = regexp.MustCompile(`^(ide|sata|scsi|virtio|efidisk|tpmstate)(\d+)$`)

var busLimit = map[string]int{"ide": 3, "sata": 5, "scsi": 30, "virtio": 15, "efidisk": 0, "tpmstate": 0}

// IsDiskKey reports whether key names a disk slot (scsi0..30, virtio0..15,
// sata0..5, ide0..3, efidisk0, tpmstate0).
func IsDiskKey(key string) bool {
	bus, idx, ok := SplitDiskKey(key)
	return ok && idx <= busLimit[bus]
}

// SplitDiskKey splits "scsi12" into ("scsi", 12).
func SplitDiskKey(key string) (string, int, bool) {
	m := diskKeyRe.FindStringSubmatch(key)
	if m == nil {
		return "", 0, false
	}
	n, _ := strconv.Atoi(m[2])
	return m[1], n, true
}

func diskOrder(key string) int {
	bus, idx, _ := SplitDiskKey(key)
	order := map[string]int{"ide": 0, "sata": 1, "scsi": 2, "virtio": 3, "efidisk": 4, "tpmstate": 5}
	return order[bus]*100 + idx
}
