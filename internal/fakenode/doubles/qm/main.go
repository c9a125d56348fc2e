// Command qm is the fake node's stand-in for Proxmox's `qm set`, enough for
// the tools that persist a disk change (pvediskcheck limit --persist). It does
// what qemu-server 9 does for `qm set VMID --scsiN <drive line>`, on real
// state.
//
// Proxmox judges: every call is first put to Proxmox's own update_vm
// (pveoracle's pve-qmset, the unmodified qemu-server 9.2.6 beside the
// checkout); a change it refuses is refused with its message, as qm prints
// it, and on a stopped VM the config written is the one update_vm writes.
// What the double keeps of its own, because the oracle treats every VM as
// stopped and has no node: the running VM (limits applied live through
// QMP, other changes to [PENDING], below), the digest race file, the fault
// file and the call log; and, only where Proxmox's code is absent, its own
// reading of the checks below and its own config writer:
//
//   - the drive line is checked as Proxmox checks it (schema, and mbps with
//     mbps_rd, a *_max without its rate, an ISO image without media=cdrom:
//     "400 Parameter verification failed.");
//   - the VM is stopped: the line is written to the config's main section;
//   - the VM runs and only I/O limits changed: the new limits are applied to
//     the running QEMU first, through QMP, as vmconfig_update_disk and
//     qemu_block_set_io_throttle do (every one of the 18 fields, unset rates
//     as 0 and unset burst lengths as 1; qom-set of throttle-drive-<id>'s
//     limits under -blockdev, block_set_io_throttle on drive-<id> under
//     -drive), then the line goes to the main section;
//   - the VM runs and anything else changed: the line goes to [PENDING]
//     (qemu-server's "skip" for options that need a restart).
//
// --digest D is checked as update_vm_api checks it: when D is not the sha1
// (hex) of the config file as it is now, qm fails with "checksum mismatch
// (file change by other user?)" and changes nothing.
//
// On a stopped VM it first applies what [PENDING] holds, as qemu-server
// does. --delete KEYS removes keys (a stopped VM's disk volume stays as unusedN,
// and an unusedN a disk uses again goes, as qemu-server writes configs, so a
// move in one command leaves none; a deleted device leaves boot: order=, as
// update_vm does); on a running VM they wait in [PENDING]'s delete list. Other VM options are
// written to the main section.
//
// A locked config (lock: KIND) is refused with "VM is locked (KIND)" unless
// --skiplock 1, as update_vm's check_lock does.
//
// It prints "update VM <vmid>: -<key> <value>" as qm does.
//
// Node state, below $PVEDISKCHECK_FAKENODE_ROOT (default /):
//
//	etc/pve/qemu-server/<vmid>.conf    the config it rewrites
//	var/run/qemu-server/<vmid>.pid     how it finds a running VM (and .qmp)
//	var/log/qm-double.log              one JSON array per call: its argv
//	var/lib/qm-double/fault            optional "exit CODE MESSAGE..." (fail
//	                                   like qm does, change nothing)
//	var/lib/qm-double/race             optional, one JSON argv a line: another
//	                                   admin's qm set that lands just before
//	                                   this call (the first line is run, not
//	                                   logged, and removed; then this call)
package main

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func root() string {
	if r := os.Getenv("PVEDISKCHECK_FAKENODE_ROOT"); r != "" {
		return r
	}
	return "/"
}

func run(args []string, stdout, stderr io.Writer) int {
	r := root()
	record(r, args)
	if b, err := os.ReadFile(filepath.Join(r, "var/lib/qm-double/fault")); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 2 && f[0] == "exit" {
			code, _ := strconv.Atoi(f[1])
			fmt.Fprintln(stderr, strings.Join(f[2:], " "))
			return code
		}
	}
	if len(args) >= 2 && args[0] == "showcmd" {
		return showcmd(r, args[1:], stdout, stderr)
	}
	if other := popRace(r); other != nil {
		set(r, other, io.Discard, io.Discard)
	}
	return set(r, args, stdout, stderr)
}

// popRace removes and returns the first argv of the race file.
func popRace(r string) []string {
	p := filepath.Join(r, "var/lib/qm-double/race")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	if strings.TrimSpace(rest) == "" {
		_ = os.Remove(p)
	} else if err := os.WriteFile(p, []byte(rest), 0o644); err != nil {
		return nil
	}
	var argv []string
	if json.Unmarshal([]byte(first), &argv) != nil {
		return nil
	}
	return argv
}

// set is `qm set VMID --KEY VALUE...`.
func set(r string, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "set" {
		fmt.Fprintln(stderr, "qm (test double): only 'qm set VMID --KEY VALUE...' and 'qm showcmd VMID [--pretty]' are implemented")
		return 255
	}
	vmid, err := strconv.Atoi(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "400 Parameter verification failed.\nvmid: invalid format - value does not look like a valid VM ID\n")
		return 255
	}
	changes, order, err := parseOpts(args[2:])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	cfgPath := filepath.Join(r, "etc/pve/qemu-server", strconv.Itoa(vmid)+".conf")
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "Configuration file 'nodes/localhost/qemu-server/%d.conf' does not exist\n", vmid)
		return 2
	}
	if d, ok := changes["digest"]; ok {
		delete(changes, "digest")
		order = slices.DeleteFunc(order, func(k string) bool { return k == "digest" })
		if sum := sha1.Sum(text); d != hex.EncodeToString(sum[:]) {
			fmt.Fprintln(stderr, "checksum mismatch (file change by other user?)")
			return 255
		}
	}
	cfg := parseConfig(string(text))
	// check_lock (update_vm, unless --skiplock): a locked config takes no
	// change.
	skip := changes["skiplock"] == "1"
	if lock, ok := cfg.get("", "lock"); ok && !skip {
		fmt.Fprintf(stderr, "VM is locked (%s)\n", lock)
		return 255
	}
	delete(changes, "skiplock")
	order = slices.DeleteFunc(order, func(k string) bool { return k == "skiplock" })
	blockdev, running := runningVM(r, vmid)
	proxmox, asked, err := askProxmox(r, vmid, string(text), args[2:])
	if err != nil {
		fmt.Fprintf(stderr, "qm (test double): asking Proxmox's update_vm: %v\n", err)
		return 255
	}
	if asked && !proxmox.Accepted {
		fmt.Fprint(stderr, qmMessage(proxmox))
		return 255
	}
	if asked && !running {
		// The config update_vm writes for a stopped VM, byte for byte.
		summary := make([]string, 0, len(order))
		for _, key := range order {
			summary = append(summary, "-"+key+" "+changes[key])
		}
		fmt.Fprintf(stdout, "update VM %d: %s\n", vmid, strings.Join(summary, " "))
		if err := writeConfig(cfgPath, proxmox.NewConfig); err != nil {
			fmt.Fprintln(stderr, err)
			return 255
		}
		return 0
	}
	if !running {
		// qemu-server applies every pending change of a stopped VM when
		// it writes the new ones (vmconfig_apply_pending).
		cfg.applyPending()
	}
	var summary []string
	for _, key := range order {
		val := changes[key]
		summary = append(summary, "-"+key+" "+val)
		if key == "delete" {
			if err := cfg.remove(val, running); err != nil {
				fmt.Fprintf(stderr, "400 Parameter verification failed.\ndelete: %v\n", err)
				return 255
			}
			continue
		}
		if _, _, isDisk := qemuserver.SplitDiskKey(key); !isDisk {
			cfg.set("", key, val)
			continue
		}
		drv, err := qemuserver.ParseDrive(key, val)
		if err != nil {
			fmt.Fprintf(stderr, "400 Parameter verification failed.\n%s: %v\n", key, err)
			return 255
		}
		if p := drv.LimitProblems(); len(p) > 0 {
			fmt.Fprintf(stderr, "400 Parameter verification failed.\n%s: %s\n", key, strings.Join(p, "; "))
			return 255
		}
		// API2/Qemu.pm check_drive_param: an ISO-content volume only as
		// a CD-ROM.
		if st, err := qemuserver.LoadStorages(filepath.Join(r, "etc/pve/storage.cfg")); err == nil && st.IsISO(drv.Volume) && drv.Opts["media"] != "cdrom" {
			fmt.Fprintf(stderr, "400 Parameter verification failed.\n%s: explicit 'media=cdrom' is required for iso images\n", key)
			return 255
		}
		oldLine, had := cfg.get("", key)
		if !running || !had {
			if running {
				cfg.set("PENDING", key, val) // hotplugging a new disk is not emulated
			} else {
				cfg.set("", key, val)
			}
			continue
		}
		old, err := qemuserver.ParseDrive(key, oldLine)
		if err != nil {
			fmt.Fprintf(stderr, "unable to parse old %s: %v\n", key, err)
			return 255
		}
		if !onlyLimitsDiffer(old, drv) {
			cfg.set("PENDING", key, val)
			continue
		}
		if limitsDiffer(old, drv) {
			if err := applyLive(r, vmid, key, drv, blockdev); err != nil {
				fmt.Fprintf(stderr, "VM %d qmp command failed - %v\n", vmid, err)
				return 255
			}
		}
		cfg.set("", key, val)
		cfg.unsetPending(key)
	}
	cfg.dropReusedUnused()
	fmt.Fprintf(stdout, "update VM %d: %s\n", vmid, strings.Join(summary, " "))
	if err := writeConfig(cfgPath, cfg.String()); err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	return 0
}

// qmMessage is a refusal as qm prints it: a parameter error as
// "400 Parameter verification failed." and a "key: message" line each
// (PVE::Exception's code and errors), anything else as its message.
func qmMessage(r pveoracle.QmSetResult) string {
	msg := strings.TrimSpace(string(r.Error))
	if len(r.ParamErrors) == 0 {
		return msg + "\n"
	}
	code := strings.TrimSpace(string(r.ErrorCode))
	if code == "" {
		code = "400"
	}
	out := code + " " + msg + "\n"
	for _, k := range slices.Sorted(maps.Keys(r.ParamErrors)) {
		out += k + ": " + strings.TrimSpace(r.ParamErrors[k]) + "\n"
	}
	return out
}

func writeConfig(path, text string) error {
	if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// askProxmox puts the call to Proxmox's own update_vm (pveoracle's
// pve-qmset, the VM treated as stopped): whether it accepts the change,
// with its message if not, and the config it writes. asked is false where
// Proxmox's code is not beside the checkout ($PVE_ORACLE_DIR or
// shared/pve-oracle above the working directory): the double then judges
// by its own reading of qemu-server (ParseDrive, LimitProblems, the ISO
// rule) and writes the config itself.
func askProxmox(r string, vmid int, config string, args []string) (res pveoracle.QmSetResult, asked bool, err error) {
	st, _ := os.ReadFile(filepath.Join(r, "etc/pve/storage.cfg"))
	req := pveoracle.QmSetRequest{VMID: vmid, Args: args, Config: config, StorageCfg: string(st)}
	if res, asked, err = askServed(r, req); !asked && err == nil {
		res, asked, err = askOwn(req)
	}
	if err == nil && asked && res.Cannot() {
		// Proxmox's code cannot answer here (Ceph's librados and fsid, a
		// ZFS over iSCSI target): the double's own reading judges.
		return res, false, nil
	}
	return res, asked, err
}

// askServed asks the test process's oracle on the node's socket
// (fakenode.UseDoubles serves it); asked is false where nobody serves.
func askServed(r string, req pveoracle.QmSetRequest) (pveoracle.QmSetResult, bool, error) {
	sock, err := os.ReadFile(filepath.Join(r, "var/lib/qm-double/oracle"))
	if err != nil {
		return pveoracle.QmSetResult{}, false, nil
	}
	c, err := net.DialTimeout("unix", strings.TrimSpace(string(sock)), 5*time.Second)
	if err != nil {
		return pveoracle.QmSetResult{}, false, nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return pveoracle.QmSetResult{}, true, err
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return pveoracle.QmSetResult{}, true, err
	}
	var a struct {
		Accepted bool            `json:"accepted_bool"`
		Result   json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return pveoracle.QmSetResult{}, true, err
	}
	var res pveoracle.QmSetResult
	_ = json.Unmarshal(a.Result, &res)
	res.Accepted = a.Accepted
	return res, true, nil
}

// askOwn starts the oracle itself (about a second) where no test serves it.
func askOwn(req pveoracle.QmSetRequest) (pveoracle.QmSetResult, bool, error) {
	dir := pveoracle.Find()
	if dir == "" {
		return pveoracle.QmSetResult{}, false, nil
	}
	o, err := pveoracle.Open(dir)
	if err != nil {
		return pveoracle.QmSetResult{}, false, err
	}
	defer o.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := o.QmSet(ctx, req)
	return res, true, err
}

func record(r string, args []string) {
	p := filepath.Join(r, "var/log/qm-double.log")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(args)
	fmt.Fprintf(f, "%s\n", b)
}

func parseOpts(args []string) (map[string]string, []string, error) {
	m := map[string]string{}
	var order []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return nil, nil, fmt.Errorf("400 too many arguments: %q", a)
		}
		k, v, hasEq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasEq {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("400 Parameter verification failed.\n%s: missing value", k)
			}
			i++
			v = args[i]
		}
		if _, dup := m[k]; dup {
			return nil, nil, fmt.Errorf("400 Parameter verification failed.\n%s: duplicate parameter", k)
		}
		m[k] = v
		order = append(order, k)
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("400 no options specified")
	}
	return m, order, nil
}

// limitOpts are qemu-server's iothrottle keys.
var limitOpts = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range qemuserver.LimitKeys {
		m[k.Proxmox] = true
	}
	return m
}()

func onlyLimitsDiffer(a, b *qemuserver.Drive) bool {
	if a.Volume != b.Volume {
		return false
	}
	for k, v := range a.Opts {
		if !limitOpts[k] && b.Opts[k] != v {
			return false
		}
	}
	for k, v := range b.Opts {
		if !limitOpts[k] && a.Opts[k] != v {
			return false
		}
	}
	return true
}

func num(d *qemuserver.Drive, k string) float64 {
	f, _ := strconv.ParseFloat(d.Opts[k], 64)
	return f
}

// limitsDiffer is qemu-server's chain of safe_num_ne over the iothrottle keys.
func limitsDiffer(a, b *qemuserver.Drive) bool {
	for k := range limitOpts {
		if num(a, k) != num(b, k) {
			return true
		}
	}
	return false
}

// applyLive sends what qemu_block_set_io_throttle sends, written out field
// by field from qemu-server's vmconfig_update_disk (not through the code
// under test, so the test proves the tool against an independent client).
func applyLive(r string, vmid int, key string, d *qemuserver.Drive, blockdev bool) error {
	mb := func(k string) int64 { return int64(math.Trunc(num(d, k) * 1024 * 1024)) }
	n := func(k string) int64 { return int64(num(d, k)) }
	length := func(k string) int64 {
		if v := n(k); v != 0 {
			return v
		}
		return 1
	}
	sock := filepath.Join(r, "var/run/qemu-server", strconv.Itoa(vmid)+".qmp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return qmp.DoRetry(ctx, sock, 5*time.Second, 20*time.Second, func(s qmp.Session) error {
		if blockdev {
			_, err := s.Exec("qom-set", map[string]any{
				"path": "throttle-drive-" + key, "property": "limits",
				"value": map[string]int64{
					"bps-total": mb("mbps"), "bps-read": mb("mbps_rd"), "bps-write": mb("mbps_wr"),
					"iops-total": n("iops"), "iops-read": n("iops_rd"), "iops-write": n("iops_wr"),
					"bps-total-max": mb("mbps_max"), "bps-read-max": mb("mbps_rd_max"), "bps-write-max": mb("mbps_wr_max"),
					"iops-total-max": n("iops_max"), "iops-read-max": n("iops_rd_max"), "iops-write-max": n("iops_wr_max"),
					"bps-total-max-length": length("bps_max_length"), "bps-read-max-length": length("bps_rd_max_length"), "bps-write-max-length": length("bps_wr_max_length"),
					"iops-total-max-length": length("iops_max_length"), "iops-read-max-length": length("iops_rd_max_length"), "iops-write-max-length": length("iops_wr_max_length"),
				},
			})
			return err
		}
		_, err := s.Exec("block_set_io_throttle", map[string]any{
			"device": "drive-" + key,
			"bps":    mb("mbps"), "bps_rd": mb("mbps_rd"), "bps_wr": mb("mbps_wr"),
			"iops": n("iops"), "iops_rd": n("iops_rd"), "iops_wr": n("iops_wr"),
			"bps_max": mb("mbps_max"), "bps_rd_max": mb("mbps_rd_max"), "bps_wr_max": mb("mbps_wr_max"),
			"iops_max": n("iops_max"), "iops_rd_max": n("iops_rd_max"), "iops_wr_max": n("iops_wr_max"),
			"bps_max_length": length("bps_max_length"), "bps_rd_max_length": length("bps_rd_max_length"), "bps_wr_max_length": length("bps_wr_max_length"),
			"iops_max_length": length("iops_max_length"), "iops_rd_max_length": length("iops_rd_max_length"), "iops_wr_max_length": length("iops_wr_max_length"),
		})
		return err
	})
}

// runningVM is check_running: the pid file's process is alive and runs with
// -pidfile of this VM. blockdev tells the command-line generation.
func runningVM(r string, vmid int) (blockdev, ok bool) {
	pidFile := filepath.Join(r, "var/run/qemu-server", strconv.Itoa(vmid)+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return false, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false, false
	}
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false, false
	}
	argv := strings.Split(string(raw), "\x00")
	hasPidfile := false
	for i, a := range argv {
		if a == "-blockdev" {
			blockdev = true
		}
		if a == "-pidfile" && i+1 < len(argv) && (argv[i+1] == pidFile || strings.HasSuffix(argv[i+1], "/"+strconv.Itoa(vmid)+".pid")) {
			hasPidfile = true
		}
	}
	return blockdev, hasPidfile
}

// config keeps the file's lines so untouched lines are written back as they were.
type config struct {
	sections []section // [0] is the main section (name "")
}

type section struct {
	name  string
	lines []string
}

func parseConfig(text string) *config {
	c := &config{sections: []section{{name: ""}}}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			c.sections = append(c.sections, section{name: strings.Trim(t, "[]")})
			continue
		}
		s := &c.sections[len(c.sections)-1]
		s.lines = append(s.lines, l)
	}
	return c
}

func (c *config) section(name string, create bool) *section {
	for i := range c.sections {
		if c.sections[i].name == name {
			return &c.sections[i]
		}
	}
	if !create {
		return nil
	}
	// [PENDING] comes right after the main section.
	c.sections = append(c.sections[:1], append([]section{{name: name}}, c.sections[1:]...)...)
	return &c.sections[1]
}

func (c *config) get(sec, key string) (string, bool) {
	s := c.section(sec, false)
	if s == nil {
		return "", false
	}
	for _, l := range s.lines {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func (c *config) set(sec, key, val string) {
	s := c.section(sec, true)
	for i, l := range s.lines {
		if k, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == key {
			s.lines[i] = key + ": " + val
			return
		}
	}
	// Before trailing blank lines.
	i := len(s.lines)
	for i > 0 && strings.TrimSpace(s.lines[i-1]) == "" {
		i--
	}
	s.lines = append(s.lines[:i], append([]string{key + ": " + val}, s.lines[i:]...)...)
}

// remove is --delete: on a stopped VM each key leaves the main section, a
// disk's storage volume staying as unusedN (vmconfig_register_unused_drive);
// on a running VM the keys wait in [PENDING]'s delete list.
func (c *config) remove(keys string, running bool) error {
	for _, k := range strings.Split(keys, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		c.dropFromBootOrder(k, running)
		if running {
			old, _ := c.get("PENDING", "delete")
			if old != "" {
				old += ","
			}
			c.set("PENDING", "delete", old+k)
			continue
		}
		line, ok := c.get("", k)
		if !ok {
			continue
		}
		if _, _, isDisk := qemuserver.SplitDiskKey(k); isDisk {
			if d, err := qemuserver.ParseDrive(k, line); err == nil && d.StorageID() != "" && !d.IsCDROM() {
				c.addUnused(d.Volume)
			}
		}
		s := c.section("", false)
		for i, l := range s.lines {
			if key, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(key) == k {
				s.lines = append(s.lines[:i], s.lines[i+1:]...)
				break
			}
		}
	}
	return nil
}

// dropFromBootOrder is update_vm's "remove from bootorder if necessary"
// (API2/Qemu.pm): a deleted device leaves boot: order=, the new order
// written to [PENDING] (applied at once on a stopped VM).
func (c *config) dropFromBootOrder(k string, running bool) {
	boot, ok := c.get("", "boot")
	order, isOrder := strings.CutPrefix(boot, "order=")
	if !ok || !isOrder || strings.Contains(order, ",") {
		return
	}
	var keep []string
	found := false
	for _, d := range strings.FieldsFunc(order, func(r rune) bool { return r == ';' || r == ' ' }) {
		if d == k {
			found = true
			continue
		}
		keep = append(keep, d)
	}
	if !found {
		return
	}
	sec := ""
	if running {
		sec = "PENDING"
	}
	if len(keep) == 0 {
		// print_bootorder of no devices is "": no boot line.
		c.unset(sec, "boot")
		return
	}
	c.set(sec, "boot", "order="+strings.Join(keep, ";"))
}

// applyPending moves [PENDING] into the main section: its values, then its
// delete list.
func (c *config) applyPending() {
	p := c.section("PENDING", false)
	if p == nil {
		return
	}
	del := ""
	for _, l := range p.lines {
		k, v, ok := strings.Cut(l, ":")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "delete":
			del = strings.TrimSpace(v)
		default:
			c.set("", k, strings.TrimSpace(v))
		}
	}
	p.lines = nil
	var keys []string
	for _, k := range strings.Split(del, ",") {
		keys = append(keys, strings.TrimPrefix(strings.TrimSpace(k), "!"))
	}
	_ = c.remove(strings.Join(keys, ","), false)
}

// addUnused records a volume as the first free unusedN.
func (c *config) addUnused(volid string) {
	for i := 0; i < 256; i++ {
		k := "unused" + strconv.Itoa(i)
		v, ok := c.get("", k)
		if ok && v == volid {
			return
		}
		if !ok {
			c.set("", k, volid)
			return
		}
	}
}

// dropReusedUnused removes unusedN entries whose volume a disk uses again,
// as qemu-server does when it writes a config (write_vm_config).
func (c *config) dropReusedUnused() {
	s := c.section("", false)
	used := map[string]bool{}
	for _, l := range s.lines {
		k, v, ok := strings.Cut(l, ":")
		if _, _, isDisk := qemuserver.SplitDiskKey(strings.TrimSpace(k)); ok && isDisk {
			if d, err := qemuserver.ParseDrive(strings.TrimSpace(k), strings.TrimSpace(v)); err == nil {
				used[d.Volume] = true
			}
		}
	}
	out := s.lines[:0]
	for _, l := range s.lines {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.HasPrefix(strings.TrimSpace(k), "unused") && used[strings.TrimSpace(v)] {
			continue
		}
		out = append(out, l)
	}
	s.lines = out
}

func (c *config) unsetPending(key string) { c.unset("PENDING", key) }

func (c *config) unset(sec, key string) {
	s := c.section(sec, false)
	if s == nil {
		return
	}
	out := s.lines[:0]
	for _, l := range s.lines {
		if k, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == key {
			continue
		}
		out = append(out, l)
	}
	s.lines = out
}

func (c *config) String() string {
	var b strings.Builder
	for i, s := range c.sections {
		if i > 0 {
			if s.name == "PENDING" && len(s.lines) == 0 {
				continue
			}
			b.WriteString("\n[" + s.name + "]\n")
		}
		lines := s.lines
		for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
			lines = lines[:len(lines)-1]
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
