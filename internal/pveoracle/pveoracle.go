// Package pveoracle asks Proxmox VE's own code what Proxmox decides: its
// verdict on each line of a VM config, the QEMU command line `qm showcmd`
// prints, and whether `qm set` accepts a change and what config it writes.
//
// The code is ../shared/pve-oracle (unmodified qemu-server 9.2.6 and the
// Proxmox modules it loads, with two drivers, bin/pve-cfg2cmd and
// bin/pve-qmset; its README says what is real and what is pinned). It is read
// at test time from beside the repository, never copied into it or the .deb
// (it is AGPL Proxmox code: the project only asks it questions, as it asks
// QEMU). This package is the only place that knows how to ask it: the tests
// and the qm double go through it.
//
// Loading Proxmox's modules costs about 1 s a process; each answer is then
// milliseconds. So Parse and Cmdline give a driver many configs at once (one
// process per core for large batches), and QmSet keeps one `pve-qmset
// --batch` process for the life of the Oracle, one request at a time.
package pveoracle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvDir names the variable that points at the oracle's folder (mutation
// testing and scripts/test-unprivileged.sh test a copy of the module elsewhere).
const EnvDir = "PVE_ORACLE_DIR"

// dirName is the oracle's folder under shared/.
const dirName = "pve-oracle"

// Find returns the oracle's folder: $PVE_ORACLE_DIR when set, else
// shared/pve-oracle in the nearest parent of the working directory that has
// it (the checkout's, and its worktrees'). "" when it is absent.
func Find() string {
	if d := os.Getenv(EnvDir); d != "" {
		if isOracle(d) {
			return d
		}
		return ""
	}
	dir, _ := os.Getwd()
	for range 8 {
		p := filepath.Join(dir, "shared", dirName)
		if isOracle(p) {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

func isOracle(d string) bool {
	st, err := os.Stat(filepath.Join(d, "bin", "pve-cfg2cmd"))
	return err == nil && st.Mode().IsRegular()
}

// Oracle is one oracle folder and, once QmSet was asked, its pve-qmset
// batch process. Its methods may be called from several goroutines.
type Oracle struct {
	dir string

	mu    sync.Mutex // one qm set request at a time on the batch process
	qmset *batch
}

// Open returns the oracle in dir (a folder Find returned). It starts
// nothing: each driver starts when first asked.
func Open(dir string) (*Oracle, error) {
	if !isOracle(dir) {
		return nil, fmt.Errorf("pveoracle: %s is not the pve-oracle folder (no bin/pve-cfg2cmd)", dir)
	}
	return &Oracle{dir: dir}, nil
}

// Dir is the oracle's folder.
func (o *Oracle) Dir() string { return o.dir }

// Close ends the batch process, if one runs.
func (o *Oracle) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.qmset == nil {
		return nil
	}
	err := o.qmset.close()
	o.qmset = nil
	return err
}

// flag is Perl's truth as the drivers print it: 1/0, or JSON true/false.
type flag bool

// UnmarshalJSON takes a number, a boolean, a string or null.
func (f *flag) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch s {
	case "", "0", "null", "false":
		*f = false
	default:
		*f = true
	}
	return nil
}

// Text is a string Perl may print as null or as a number.
type Text string

// UnmarshalJSON takes a string, a number or null.
func (t *Text) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Text(s)
		return nil
	}
	*t = Text(b)
	return nil
}

// Config is one VM config to ask about.
type Config struct {
	// Name says which config this is in a failure message (a corpus file's
	// name, a generator's case); it is not sent.
	Name string
	// VMID is the VM's id (Proxmox's messages name it); 0 means the
	// drivers' default, 8006.
	VMID int
	Text string
}

// Line is Proxmox's verdict on one line of a config (parse_vm_config).
type Line struct {
	Line    int    `json:"line"`    // 1-based line number in the file
	Section string `json:"section"` // main, pending, a snapshot's name, special:cloudinit ...
	Key     string `json:"key"`     // the key, "" for a line that is not key: value
	Text    string `json:"text"`    // the line as written
	// Verdict: ok, normalized (kept, written back differently: Value),
	// dropped (skipped with Messages; the VM still starts), or error.
	Verdict  string   `json:"verdict"`
	Value    Text     `json:"value"`
	Messages []string `json:"messages"`
}

// Verdicts of a Line.
const (
	LineOK         = "ok"
	LineNormalized = "normalized"
	LineDropped    = "dropped"
	LineError      = "error"
)

// Parse is Proxmox's reading of one config.
type Parse struct {
	OK bool `json:"-"`
	// Error: parse_vm_config died (the whole config refused).
	Error Text `json:"error"`
	// StrictError: what strict mode (as `qm set` reads) refuses first.
	StrictError Text     `json:"strict_error"`
	Lines       []Line   `json:"lines"`
	Warnings    []string `json:"warnings"`
	// Normalized is the config as Proxmox would write it back.
	Normalized string `json:"normalized_config"`
}

// UnmarshalJSON reads ok as Perl prints it.
func (p *Parse) UnmarshalJSON(b []byte) error {
	type plain Parse
	aux := struct {
		*plain
		OK flag `json:"ok"`
	}{plain: (*plain)(p)}
	err := json.Unmarshal(b, &aux)
	p.OK = bool(aux.OK)
	return err
}

// Cmd is the command line `qm showcmd` prints for a config, or Proxmox's
// refusal.
type Cmd struct {
	OK          bool     `json:"-"`
	Error       Text     `json:"error"`
	Args        []string `json:"-"`
	RawArgs     []any    `json:"args"`
	QEMUVersion string   `json:"qemu_version"`
	Warnings    []string `json:"warnings"`
	Output      []string `json:"output"`
	// StubCalls: a compiled module's stand-in was called; the answer is
	// then not Proxmox's (the oracle's README).
	StubCalls []string `json:"stub_calls"`
}

// UnmarshalJSON reads ok as Perl prints it.
func (c *Cmd) UnmarshalJSON(b []byte) error {
	type plain Cmd
	aux := struct {
		*plain
		OK flag `json:"ok"`
	}{plain: (*plain)(c)}
	err := json.Unmarshal(b, &aux)
	c.OK = bool(aux.OK)
	return err
}

// Result is the oracle's answer for one config.
type Result struct {
	Config Config `json:"-"`
	File   string `json:"file"`
	VMID   int    `json:"-"`
	// RawVMID is the VMID as Perl prints it: text when read from the
	// file's name, a number when the default.
	RawVMID Text  `json:"vmid"`
	Parse   Parse `json:"parse"`
	Cmd     *Cmd  `json:"cfg2cmd"` // nil when only parsed
	// StorageWarnings: what Proxmox skipped of the storage.cfg.
	StorageWarnings []string `json:"storage_warnings"`
}

// CmdOptions are the host facts a command line depends on.
type CmdOptions struct {
	// StorageCfg is /etc/pve/storage.cfg's text; "" uses the storages
	// qemu-server's own cfg2cmd harness mocks.
	StorageCfg string
	// QEMUVersion is the installed QEMU (X.Y.Z); "" is the oracle's pin
	// (11.0.0).
	QEMUVersion string
	// RBDFSID is the Ceph fsid of external RBD storages (monhost), which
	// Proxmox would ask the monitors for.
	RBDFSID string
	// Snapshot builds the command line of that snapshot section.
	Snapshot string
}

// Parse asks parse_vm_config about each config: one Result each, in order.
func (o *Oracle) Parse(ctx context.Context, cfgs []Config) ([]Result, error) {
	return o.cfg2cmd(ctx, []string{"--parse-only"}, cfgs)
}

// Cmdline asks for each config's command line (and its parse) with opts.
func (o *Oracle) Cmdline(ctx context.Context, opts CmdOptions, cfgs []Config) ([]Result, error) {
	tmp, err := os.MkdirTemp("", "pveoracle-storage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var args []string
	if opts.StorageCfg != "" {
		p := filepath.Join(tmp, "storage.cfg")
		if err := os.WriteFile(p, []byte(opts.StorageCfg), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--storage-cfg", p)
	}
	if opts.QEMUVersion != "" {
		args = append(args, "--qemu-version", opts.QEMUVersion)
	}
	if opts.RBDFSID != "" {
		args = append(args, "--rbd-fsid", opts.RBDFSID)
	}
	if opts.Snapshot != "" {
		args = append(args, "--snapshot", opts.Snapshot)
	}
	return o.cfg2cmd(ctx, args, cfgs)
}

// perProcess is the smallest batch worth a second process: each process
// pays about 1 s to load Proxmox's modules, each config costs ~6 ms.
const perProcess = 200

// cfg2cmd writes the configs to files named so the driver reads each VMID
// from the name, runs pve-cfg2cmd --jsonl over them (split over the
// machine's cores when the batch is large) and reads the answers back in
// order.
func (o *Oracle) cfg2cmd(ctx context.Context, flags []string, cfgs []Config) ([]Result, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	tmp, err := os.MkdirTemp("", "pveoracle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	files := make([]string, len(cfgs))
	for i, c := range cfgs {
		name := fmt.Sprintf("c%06d.conf", i) // no VMID in the name: the driver's 8006
		if c.VMID != 0 {
			if c.VMID < 100 || c.VMID > 999999999 {
				return nil, fmt.Errorf("pveoracle: config %q: VMID %d is not a Proxmox VMID (100-999999999)", c.Name, c.VMID)
			}
			name = fmt.Sprintf("c%06d-%d.conf", i, c.VMID)
		}
		files[i] = filepath.Join(tmp, name)
		if err := os.WriteFile(files[i], []byte(c.Text), 0o644); err != nil {
			return nil, err
		}
	}
	procs := min(runtime.NumCPU(), (len(cfgs)+perProcess-1)/perProcess)
	procs = max(procs, 1)
	out := make([]Result, len(cfgs))
	errs := make([]error, procs)
	var wg sync.WaitGroup
	chunk := (len(cfgs) + procs - 1) / procs
	for p := range procs {
		lo, hi := p*chunk, min((p+1)*chunk, len(cfgs))
		if lo >= hi {
			continue
		}
		wg.Go(func() {
			errs[p] = o.runCfg2cmd(ctx, flags, files[lo:hi], out[lo:hi])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Config = cfgs[i]
	}
	return out, nil
}

func (o *Oracle) runCfg2cmd(ctx context.Context, flags, files []string, out []Result) error {
	args := append(append(append([]string{}, flags...), "--jsonl"), files...)
	cmd := exec.CommandContext(ctx, filepath.Join(o.dir, "bin", "pve-cfg2cmd"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	// Exit 1 means some config was refused: its answer says so.
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return fmt.Errorf("pveoracle: pve-cfg2cmd: %w: %s", err, lastLine(stderr.String()))
	}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	i := 0
	for sc.Scan() {
		if i >= len(out) {
			return fmt.Errorf("pveoracle: pve-cfg2cmd answered more than %d configs", len(out))
		}
		if err := json.Unmarshal(sc.Bytes(), &out[i]); err != nil {
			return fmt.Errorf("pveoracle: pve-cfg2cmd answer %d: %w", i, err)
		}
		if out[i].File != files[i] {
			return fmt.Errorf("pveoracle: pve-cfg2cmd answered %s where %s was due", out[i].File, files[i])
		}
		if out[i].VMID, err = strconv.Atoi(string(out[i].RawVMID)); err != nil {
			return fmt.Errorf("pveoracle: pve-cfg2cmd answer %d: vmid %q", i, out[i].RawVMID)
		}
		if c := out[i].Cmd; c != nil {
			c.Args = make([]string, len(c.RawArgs))
			for j, a := range c.RawArgs {
				switch v := a.(type) {
				case string:
					c.Args[j] = v
				case float64:
					c.Args[j] = strconv.FormatFloat(v, 'f', -1, 64)
				default:
					b, _ := json.Marshal(v)
					c.Args[j] = string(b)
				}
			}
		}
		i++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pveoracle: pve-cfg2cmd: %w", err)
	}
	if i != len(out) {
		return fmt.Errorf("pveoracle: pve-cfg2cmd answered %d of %d configs: %s", i, len(out), lastLine(stderr.String()))
	}
	return nil
}

// QmSetRequest is one `qm set VMID ARGS...` asked of Proxmox's update_vm
// path (the VM treated as stopped, the caller root@pam).
type QmSetRequest struct {
	VMID int      `json:"vmid"`
	Args []string `json:"args"` // qm set's options, e.g. --scsi1 local-lvm:vm-100-disk-1,discard=on
	// Config is the VM's current config; "" means the VM does not exist.
	Config        string `json:"config,omitempty"`
	StorageCfg    string `json:"storage_cfg,omitempty"`
	DatacenterCfg string `json:"datacenter_cfg,omitempty"`
	// Volumes declares volumes and their sizes in bytes; with
	// StrictVolumes, volumes neither declared nor named by the config do
	// not exist (by default every volume exists).
	Volumes       map[string]int64 `json:"volumes,omitempty"`
	StrictVolumes bool             `json:"strict_volumes,omitempty"`
}

// QmSetResult is Proxmox's answer to a QmSetRequest.
type QmSetResult struct {
	Accepted bool `json:"-"`
	// Error is Proxmox's message when refused ("" when accepted).
	Error     Text `json:"error"`
	ErrorCode Text `json:"error_code"`
	// ParamErrors are the schema's messages per parameter.
	ParamErrors map[string]string `json:"param_errors"`
	// NewConfig is the config update_vm wrote (accepted only).
	NewConfig string   `json:"new_config"`
	Output    []string `json:"output"`
	Warnings  []string `json:"warnings"`
	StubCalls []string `json:"stub_calls"`
}

// UnmarshalJSON reads accepted as Perl prints it.
func (r *QmSetResult) UnmarshalJSON(b []byte) error {
	type plain QmSetResult
	aux := struct {
		*plain
		Accepted flag `json:"accepted"`
	}{plain: (*plain)(r)}
	err := json.Unmarshal(b, &aux)
	r.Accepted = bool(aux.Accepted)
	return err
}

// Refusal is the one line that says why Proxmox refused ("" when accepted).
func (r QmSetResult) Refusal() string {
	if r.Accepted {
		return ""
	}
	msg := string(r.Error)
	for k, v := range r.ParamErrors {
		msg += fmt.Sprintf("; %s: %s", k, strings.TrimSpace(v))
	}
	return msg
}

// Cannot: the answer says what the oracle cannot stand in for (its
// README: librados and the Ceph cluster's fsid, a ZFS over iSCSI target's
// commands, any compiled module's stand-in), not what Proxmox decides.
func (r QmSetResult) Cannot() bool {
	if len(r.StubCalls) > 0 {
		return true
	}
	for _, s := range []string{"STUB: ", "MOCK: not running host command", "cluster fsid has invalid format"} {
		if strings.Contains(r.Refusal(), s) {
			return true
		}
	}
	return false
}

// qmsetTimeout bounds one answer of the batch process (a request takes
// tens of ms; the first pays the ~1 s load).
const qmsetTimeout = 60 * time.Second

// QmSet asks `qm set` of Proxmox through the batch process (started on the
// first call, kept until Close).
func (o *Oracle) QmSet(ctx context.Context, req QmSetRequest) (QmSetResult, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return QmSetResult{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.qmset == nil {
		b, err := startBatch(filepath.Join(o.dir, "bin", "pve-qmset"), "--batch")
		if err != nil {
			return QmSetResult{}, err
		}
		o.qmset = b
	}
	answer, err := o.qmset.ask(ctx, line, qmsetTimeout)
	if err != nil {
		// The process is in an unknown state: the next call starts another.
		o.qmset.close()
		o.qmset = nil
		return QmSetResult{}, fmt.Errorf("pveoracle: pve-qmset --batch: %w", err)
	}
	var res QmSetResult
	if err := json.Unmarshal(answer, &res); err != nil {
		return QmSetResult{}, fmt.Errorf("pveoracle: pve-qmset answer: %w", err)
	}
	return res, nil
}

// batch is a driver reading JSON lines on stdin and answering one line each.
type batch struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func startBatch(path string, args ...string) (*batch, error) {
	cmd := exec.Command(path, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pveoracle: start %s: %w", path, err)
	}
	return &batch{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: &stderr}, nil
}

func (b *batch) ask(ctx context.Context, line []byte, timeout time.Duration) ([]byte, error) {
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		return nil, err
	}
	type reply struct {
		b   []byte
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		l, err := b.out.ReadBytes('\n')
		ch <- reply{l, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: %s", r.err, lastLine(b.stderr.String()))
		}
		return r.b, nil
	case <-t.C:
		return nil, fmt.Errorf("no answer within %s", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batch) close() error {
	b.in.Close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		return <-done
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
