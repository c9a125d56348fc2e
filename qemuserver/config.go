// Package qemuserver models a Proxmox VE virtual machine the way qemu-server
// does: config files, drive property strings, storage definitions, QEMU command
// lines of both generations, and the rules that turn one into the other.
package qemuserver

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
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
	// Skipped says what parse_vm_config skips with a warning and the VM
	// starts without: a line that is not `key: value` (an empty `boot:`,
	// a pasted warning), a value its schema refuses (that key is dropped),
	// `delete:` outside [PENDING]. One sentence each, naming the line.
	Skipped []string
	// FleecingImages are the volumes of [special:fleecing]'s
	// fleecing-images: vzdump records the fleecing images it allocates
	// there for the time of a backup, and keeps those it failed to remove
	// ("left-overs that failed to be removed" when no backup runs,
	// qemu-server's $fleecing_section_schema).
	FleecingImages []string
	// Reads is the reading of each non-blank line of the file, in order:
	// what the tool does with it (TestParseAsProxmox compares it with
	// parse_vm_config's verdict on the same line).
	Reads []LineRead
	// DroppedDisks are lines Proxmox drops that name a disk slot (a key
	// of no `key: value` shape such as "scsi0 :" or "SCSI0:", or an index
	// past its bus's last, "scsi31"): the VM starts without the disk, so
	// check reports each as an error, one sentence naming the line.
	DroppedDisks []string
	// Digest is the SHA-1 (hex) of the file as read: qemu-server's
	// $conf->{digest} (parse_vm_config), which `qm set --digest` compares
	// with the file it is about to change (see Digest).
	Digest string
}

// MinVMID and MaxVMID are Proxmox's accepted VMID range.
const (
	MinVMID = 100
	MaxVMID = 999999999
)

// vmidRe is Proxmox's pve-vmid format (PVE::JSONSchema): no sign, no
// blank, no leading zero, 3 to 9 digits.
var vmidRe = regexp.MustCompile(`^[1-9][0-9]{2,8}$`)

// ParseVMID is the one VMID parser: every VMID the tool reads (an
// argument, a config file's name, a .vmlist key, qm's argv) is validated
// as Proxmox's pve-vmid format does it (pve_verify_vmid): "0370" and
// "+370" are not VMIDs. A bad one is bad input (exit 2), in one text.
func ParseVMID(s string) (int, error) {
	if !vmidRe.MatchString(s) {
		if _, err := strconv.Atoi(s); err == nil && !strings.HasPrefix(s, "0") && !strings.HasPrefix(s, "+") {
			return 0, exitcode.Usagef("invalid VMID %s: out of range %d-%d", clip(s), MinVMID, MaxVMID)
		}
		return 0, exitcode.Usagef("invalid VMID %s: not a number of 3 to 9 digits without a leading zero (Proxmox's pve-vmid)", clip(s))
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

// The line shapes of parse_vm_config (QemuServer.pm).
var (
	sectionRe = regexp.MustCompile(`^\[([^\]]*)\]\s*$`)
	keyRe     = regexp.MustCompile(`^([a-z][a-z_\-]*\d*):\s*(.+?)\s*$`)
)

// MaxLineBytes bounds one line of a config or of storage.cfg.
const MaxLineBytes = 4 << 20

// ErrLineTooLong is a line beyond MaxLineBytes: not a file Proxmox wrote,
// bad input (exit 2) rather than a line to report.
var ErrLineTooLong = exitcode.New(exitcode.Usage, fmt.Sprintf("longer than %d MiB: not a file Proxmox wrote", MaxLineBytes>>20))

// scanErr is a line scanner's error, naming the file, and the line when it
// is one beyond MaxLineBytes.
func scanErr(err error, name string, line int) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("%s line %d: %w", name, line, ErrLineTooLong)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// LoadConfig reads and parses a VM config file: for fixtures and test
// doubles; the tool reads a node's files through node.Node.ReadFile (vm.ReadConfig).
func LoadConfig(path string, vmid int) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfigFile(data, path, vmid)
}

// ParseConfigFile parses the raw bytes of VM vmid's config file name, with
// the digest qemu-server computes over them (Config.Digest): the one way a
// whole config file becomes a Config, whoever read it.
func ParseConfigFile(data []byte, name string, vmid int) (*Config, error) {
	c, err := ParseConfig(bytes.NewReader(data), name)
	if err != nil {
		return nil, err
	}
	c.VMID = vmid
	c.Digest = Digest(data)
	return c, nil
}

// Digest is qemu-server's digest of a raw config file: sha1_hex of its bytes
// (parse_vm_config). `qm set VMID --digest D` refuses to change a config whose
// digest is no longer D (update_vm_api: "checksum mismatch (file change by
// other user?)"), so a change built from the file as read cannot undo an
// edit that landed in between.
func Digest(raw []byte) string {
	sum := sha1.Sum(raw)
	return hex.EncodeToString(sum[:])
}

// DigestMismatch reports whether qm's error message is Proxmox refusing a
// --digest that no longer matches the config: update_vm_api's "checksum
// mismatch (file change by other user?)", or PVE::Tools::assert_if_modified's
// "detected modified configuration - file changed by other user? Try again."
// (the API calls that change a config through it).
func DigestMismatch(msg string) bool {
	return strings.Contains(msg, "checksum mismatch (file change by other user?)") ||
		strings.Contains(msg, "detected modified configuration - file changed by other user?")
}

// Reading is what the tool does with one line of a config.
type Reading string

// Readings of a line.
const (
	// ReadUsed: the value is kept, as Proxmox keeps it (a disk line is
	// then judged by ParseDrive: config-invalid where Proxmox drops it).
	ReadUsed Reading = "used"
	// ReadSkipped: skipped with a note (Config.Skipped), its default
	// applies, as Proxmox skips it.
	ReadSkipped Reading = "skipped"
	// ReadDiskDropped: a line Proxmox drops that takes a disk away
	// (Config.DroppedDisks): an error finding.
	ReadDiskDropped Reading = "disk-dropped"
	// ReadNotRead: a line the tool does not read: a section header, a
	// snapshot's or a special section's line, the description, a key no
	// decision of the tool rests on (VMKeysRead lists the ones it reads).
	ReadNotRead Reading = "not-read"
)

// LineRead is the reading of one line.
type LineRead struct {
	Line    int
	Section string // "" for the main section, "PENDING", or "[name]"
	Key     string // "" for a line that is not `key: value`
	Value   string // the value of a `key: value` line
	Read    Reading
}

// VMKeysRead are the VM-level keys (beside the disk and unusedN keys) whose
// values a decision of the tool reads; any other key's value is kept but
// never read (ReadNotRead).
var VMKeysRead = []string{"agent", "args", "boot", "bootdisk", "lock", "machine", "meta", "name", "ostype", "protection", "scsihw", "tags", "template"}

// mangledDiskRe is a line that is no `key: value` for parse_vm_config but
// names a disk slot: another case, blanks or "_" before the colon, "="
// for ":".
var mangledDiskRe = regexp.MustCompile(`(?i)^\s*(ide|sata|scsi|virtio|efidisk|tpmstate)\s*\d+[\s_\-]*[:=]`)

// looksLikeDiskKey: a key of a disk bus with an index (scsi31, virtio016).
var looksLikeDiskKey = regexp.MustCompile(`^(ide|sata|scsi|virtio|efidisk|tpmstate)\d+$`)

// ParseConfig parses a config file the way parse_vm_config does; name is
// used in error messages. Only the main section and [PENDING] are kept:
// snapshots, [special:cloudinit] and unknown sections are skipped, and of
// [special:fleecing] only its fleecing-images are kept (FleecingImages).
// As in Proxmox, a key given twice keeps its last value, and "cdrom" is
// IDE2. Proxmox reads a config leniently (parse_vm_config in
// QemuServer.pm, non-strict): a line of no known shape is skipped with a
// warning ("unable to parse config: LINE"), and so is a value that fails
// its schema ("unable to parse value of 'KEY'": the key is dropped, its
// default applies); the VM starts. Both are skipped here too and said in
// Skipped. The error is for a file that is no config at all.
func ParseConfig(r io.Reader, name string) (*Config, error) {
	c := &Config{Path: name, Main: map[string]string{}, Lines: map[string]int{}, Pending: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLineBytes)
	section := ""
	lineNo := 0
	var desc []string
	val := ""
	read := func(key string, r Reading) {
		c.Reads = append(c.Reads, LineRead{Line: lineNo, Section: section, Key: key, Value: val, Read: r})
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		val = ""
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := sectionRe.FindStringSubmatch(line); m != nil {
			section = "[" + m[1] + "]" // never "", the main section's name
			if strings.EqualFold(m[1], "PENDING") {
				section = "PENDING"
			}
			read("", ReadNotRead)
			continue
		}
		if strings.EqualFold(section, "[special:fleecing]") {
			if m := keyRe.FindStringSubmatch(line); m != nil && m[1] == "fleecing-images" {
				c.FleecingImages = splitList(m[2])
				read(m[1], ReadUsed)
				continue
			}
			read("", ReadNotRead)
			continue
		}
		if section != "" && section != "PENDING" {
			read("", ReadNotRead)
			continue // snapshots, other special and unknown sections
		}
		if strings.HasPrefix(line, "#") {
			if section == "" {
				desc = append(desc, strings.TrimPrefix(line, "#"))
			}
			read("", ReadNotRead)
			continue
		}
		m := keyRe.FindStringSubmatch(line)
		if m == nil {
			if mangledDiskRe.MatchString(line) {
				c.DroppedDisks = append(c.DroppedDisks, fmt.Sprintf("%s line %d: %s is not a `key: value` line: Proxmox drops it (\"unable to parse config\") and starts the VM without this disk", name, lineNo, clip(line)))
				read("", ReadDiskDropped)
				continue
			}
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s line %d: %s is not a `key: value` line: Proxmox skips it (\"unable to parse config\") and starts the VM without it", name, lineNo, clip(line)))
			read("", ReadSkipped)
			continue
		}
		key := m[1]
		val = m[2]
		switch {
		case key == "description":
			if section == "" {
				desc = append(desc, val)
			}
			read(key, ReadNotRead)
			continue
		case key == "snapstate":
			read(key, ReadNotRead)
			continue // a snapshot's state, never the VM's
		case key == "delete":
			if section == "PENDING" {
				for _, k := range strings.Split(val, ",") {
					if k = strings.TrimPrefix(strings.TrimSpace(k), "!"); k != "" {
						c.PendingDelete = append(c.PendingDelete, k)
					}
				}
				read(key, ReadUsed)
				continue
			}
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s line %d: delete: outside [PENDING]: Proxmox skips it (\"property 'delete' is only allowed in [PENDING]\")", name, lineNo))
			read(key, ReadSkipped)
			continue
		case key == "cdrom":
			key = "ide2" // the old alias of ide2
		}
		if looksLikeDiskKey.MatchString(key) && !IsDiskKey(key) {
			// scsi31, virtio16, scsi01: no slot of its bus; Proxmox drops
			// it as an unknown setting, and the disk with it.
			c.DroppedDisks = append(c.DroppedDisks, fmt.Sprintf("%s line %d: %s is no disk slot (ide0-3, sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0): Proxmox drops the line (\"unknown setting '%s'\") and starts the VM without this disk", name, lineNo, key, key))
			read(key, ReadDiskDropped)
			continue
		}
		if why := checkValue(key, val); why != "" {
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s line %d: %s: %s: Proxmox drops the key (\"unable to parse value of '%s'\") and uses its default", name, lineNo, key, why, key))
			read(key, ReadSkipped)
			continue
		}
		if section == "PENDING" && (IsDiskKey(key) || IsUnusedKey(key)) {
			if _, err := ParseDrive(key, val); err != nil {
				// Proxmox drops it: the next start keeps the disk as the
				// main section has it (or has none).
				c.Skipped = append(c.Skipped, fmt.Sprintf("%s line %d: [PENDING] %s: %v: Proxmox drops the pending change (\"unable to parse value of '%s'\"); the next start keeps what the main section says", name, lineNo, key, err, key))
				read(key, ReadSkipped)
				continue
			}
		}
		if IsDiskKey(key) || IsUnusedKey(key) || slices.Contains(VMKeysRead, key) {
			read(key, ReadUsed)
		} else {
			read(key, ReadNotRead)
		}
		if section == "PENDING" {
			c.Pending[key] = val
			continue
		}
		c.Main[key] = val
		c.Lines[key] = lineNo
	}
	if err := scanErr(sc.Err(), name, lineNo+1); err != nil {
		return nil, err
	}
	c.Description = strings.Join(desc, "\n")
	return c, nil
}

// splitList is PVE::Tools::split_list: items separated by commas,
// semicolons or blanks.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
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
// scsi, virtio, efidisk, tpmstate), from the given key set. unusedN keys
// are not disks (UnusedKeys lists them).
func DiskKeys(keys map[string]string) []string { return driveKeys(keys, IsDiskKey) }

// UnusedKeys returns the config's unusedN keys, in index order.
func UnusedKeys(keys map[string]string) []string { return driveKeys(keys, IsUnusedKey) }

func driveKeys(keys map[string]string, want func(string) bool) []string {
	var out []string
	for k := range keys {
		if want(k) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return diskOrder(out[i]) < diskOrder(out[j]) })
	return out
}

// Drive keys as qemu-server defines them (Drive.pm: 4 IDE, 6 SATA, 31 SCSI,
// 16 VirtIO, efidisk0, tpmstate0, 256 unused). "scsi01" or "scsi31" are no
// drive keys: Proxmox drops them as unknown settings.
var driveKeyRe = regexp.MustCompile(`^(ide|sata|scsi|virtio|efidisk|tpmstate|unused)(0|[1-9][0-9]{0,2})$`)

var busLimit = map[string]int{"ide": 3, "sata": 5, "scsi": 30, "virtio": 15, "efidisk": 0, "tpmstate": 0, "unused": 255}

// IsDiskKey reports whether key names a disk slot (scsi0..30, virtio0..15,
// sata0..5, ide0..3, efidisk0, tpmstate0).
func IsDiskKey(key string) bool {
	bus, _, ok := splitDriveKey(key)
	return ok && bus != "unused"
}

// IsUnusedKey reports unused0..unused255: volumes the VM owns but does not
// attach.
func IsUnusedKey(key string) bool {
	bus, _, ok := splitDriveKey(key)
	return ok && bus == "unused"
}

// SplitDiskKey splits "scsi12" into ("scsi", 12); false for anything that
// is not a disk key.
func SplitDiskKey(key string) (string, int, bool) {
	bus, idx, ok := splitDriveKey(key)
	if !ok || bus == "unused" {
		return "", 0, false
	}
	return bus, idx, true
}

// splitDriveKey is SplitDiskKey with unusedN.
func splitDriveKey(key string) (string, int, bool) {
	m := driveKeyRe.FindStringSubmatch(key)
	if m == nil {
		return "", 0, false
	}
	n, _ := strconv.Atoi(m[2])
	if n > busLimit[m[1]] {
		return "", 0, false
	}
	return m[1], n, true
}

var busOrder = map[string]int{"ide": 0, "sata": 1, "scsi": 2, "virtio": 3, "efidisk": 4, "tpmstate": 5, "unused": 6}

func diskOrder(key string) int {
	bus, idx, _ := splitDriveKey(key)
	return busOrder[bus]*1000 + idx
}
