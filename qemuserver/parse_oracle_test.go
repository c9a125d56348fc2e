package qemuserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// The differential parse test (issue 32 item 2): the tool's reading of each
// line of a config against parse_vm_config's (Proxmox's own code, through
// internal/pveoracle), over the real-world configs, qemu-server's cfg2cmd
// corpus and configs generated from them.

// Proxmox's verdict, and the tool's, as the comparison sees them.
const (
	proxKept    = "kept"    // ok, normalized
	proxDropped = "dropped" // dropped, error, a skipped section's warning

	toolUsed    = "used"           // read, as Proxmox keeps it
	toolSkipped = "skipped"        // skipped with a note naming the line
	toolInvalid = "config-invalid" // an error finding: the disk is gone or the VM does not start with it
	toolNotRead = "not-read"       // a line the tool does not read
)

// lineCase is one line with both readings.
type lineCase struct {
	cfg             string
	line            int
	section, key    string // Proxmox's section name; the key ("" for no key: value)
	text            string
	prox, tool      string
	proxVerdict     string
	messages        string
	toolRead        Reading
	toolValue       string
	diskLike, takes bool // the key names a disk slot; the line names a volume (drop takes a disk away)
}

// parseDifferences is the one table of the deliberate differences between
// the tool's reading of a line and Proxmox's: each says when it applies
// and why the tool differs. Any other disagreement fails the test.
var parseDifferences = []struct {
	name, why string
	applies   func(l lineCase) bool
}{
	{
		name: "snapshot and special sections",
		why: "a snapshot's lines, [special:cloudinit]'s and an unknown section's are not the VM as it runs or next starts; " +
			"the tool reads the main section, [PENDING] and [special:fleecing]'s fleecing-images only, so what Proxmox drops there changes nothing it decides",
		applies: func(l lineCase) bool {
			return l.tool == toolNotRead && l.section != "main" && l.section != "pending" && l.section != "special:fleecing"
		},
	},
	{
		name: "parse_drive's rules at the start",
		why: "parse_vm_config checks a drive line against the schema only; parse_drive's rules (a limit without its base rate or with a total and a per-direction " +
			"rate, a CD-ROM option on a disk, media=cdrom on VirtIO) are applied when the VM starts: config_to_command drops the drive with a warning " +
			"(verified: the oracle's command line for the line alone has no such device). The tool says so before the start: limit-invalid or " +
			"config-invalid, an error, in the main section; a [PENDING] line is skipped with a note",
		applies: func(l lineCase) bool {
			if l.prox != proxKept || !(l.tool == toolInvalid || l.tool == toolSkipped && l.section == "pending") || l.toolValue == "" {
				return false
			}
			if _, err := ParseDriveSchema(l.key, l.toolValue); err != nil {
				return false
			}
			_, err := ParseDrive(l.key, l.toolValue)
			return err != nil
		},
	},
	{
		name: "keys the tool does not read",
		why: "a VM key outside qemuserver.VMKeysRead (memory, cores, net0, hostpci0, an unknown key ...) is no input to any of the tool's decisions: " +
			"Proxmox's schema verdict on its value is not modelled (a disk key is never one of these: a dropped disk line is config-invalid)",
		applies: func(l lineCase) bool {
			return l.tool == toolNotRead && l.prox == proxDropped && !l.diskLike && l.key != ""
		},
	},
}

// toolReading is the tool's reading of line r: ParseConfig's, and for a
// main-section disk or unusedN line it keeps, ParseDrive's verdict (vm and
// check make a refused disk line config-invalid; an unusedN one a note).
func toolReading(r LineRead) string {
	switch r.Read {
	case ReadSkipped:
		return toolSkipped
	case ReadDiskDropped:
		return toolInvalid
	case ReadNotRead:
		return toolNotRead
	}
	if r.Section == "" && (IsDiskKey(r.Key) || IsUnusedKey(r.Key)) {
		if _, err := ParseDrive(r.Key, r.Value); err != nil {
			if IsUnusedKey(r.Key) {
				return toolSkipped
			}
			return toolInvalid
		}
	}
	return toolUsed
}

// proxSection names the tool's section as the oracle does.
func proxSection(s string) string {
	switch {
	case s == "":
		return "main"
	case s == "PENDING":
		return "pending"
	case strings.HasPrefix(s, "[special:"):
		return strings.Trim(s, "[]")
	}
	return "snapshot:" + strings.Trim(s, "[]")
}

// Values Proxmox's schema gives the drive options (Drive.pm: the
// enums and types of $drivedesc_base, $iothread_fmt, $queues_fmt ...), and
// values each refuses: out of range, malformed, empty.
var driveOptValues = map[string][]string{
	"cache":              {"none", "writethrough", "writeback", "unsafe", "directsync", "bogus", ""},
	"aio":                {"native", "threads", "io_uring", "posix", ""},
	"discard":            {"on", "ignore", "off", "1"},
	"detect_zeroes":      {"0", "1", "on", "off", "unmap"},
	"ssd":                {"0", "1", "yes", "2"},
	"iothread":           {"0", "1", "true", "2"},
	"media":              {"disk", "cdrom", "floppy", ""},
	"format":             {"raw", "qcow2", "vmdk", "qed", "cloop", "vdi", "iso", "bogus"},
	"backup":             {"0", "1", "maybe"},
	"replicate":          {"0", "1", "x"},
	"ro":                 {"0", "1", "on", "x"},
	"shared":             {"0", "1"},
	"snapshot":           {"0", "1"},
	"serial":             {"abc123", "x_y-z", strings.Repeat("s", 21), "a b"},
	"rerror":             {"ignore", "report", "stop", "enospc"},
	"werror":             {"enospc", "ignore", "report", "stop", "bogus"},
	"mbps":               {"10", "0.5", "0", "-1", "abc", "1e3"},
	"mbps_rd":            {"20", "-3"},
	"mbps_wr":            {"20", "x"},
	"mbps_max":           {"100", "-1"},
	"mbps_wr_max":        {"40"},
	"iops":               {"100", "0", "-5", "1.5"},
	"iops_rd":            {"500"},
	"iops_wr":            {"500", "abc"},
	"iops_max":           {"1000"},
	"iops_rd_max":        {"1000"},
	"iops_wr_max_length": {"3", "0", "-1"},
	"bps_max_length":     {"5"},
	"size":               {"8G", "1T", "512M", "10", "abc", "8X", "0"},
	"queues":             {"1", "2", "16", "1023", "x"},
	"model":              {"Disk%20A", "x y"},
	"vendor":             {"QEMU", strings.Repeat("v", 9)},
	"product":            {"DISK", strings.Repeat("p", 17)},
	"wwn":                {"0x5000c500a0b1c2d3", "0x12", "nothex"},
	"trans":              {"none", "lba", "auto", "chs"},
	"secs":               {"63", "-1"},
	"heads":              {"16"},
	"cyls":               {"1024"},
	"scsiblock":          {"0", "1"},
	"efitype":            {"2m", "4m", "8m"},
	"pre-enrolled-keys":  {"0", "1"},
	"version":            {"v1.2", "v2.0", "v3"},
	"bogus":              {"1"},
}

// vmKeyValues are VM keys (QemuServer.pm $confdesc) with values Proxmox
// accepts and values it refuses.
var vmKeyValues = map[string][]string{
	"scsihw":     {"lsi", "lsi53c810", "virtio-scsi-pci", "virtio-scsi-single", "megasas", "pvscsi", "virtio", "bogus"},
	"ostype":     {"l26", "win10", "win11", "other", "solaris", "linux"},
	"boot":       {"order=scsi0;net0", "cdn", "c", "order=", "order=foo", "legacy=cdn", "order=scsi0,legacy=c"},
	"bootdisk":   {"scsi0", "virtio0", "scsi31", "foo", "efidisk0"},
	"template":   {"0", "1", "2", "yes"},
	"lock":       {"backup", "migrate", "suspended", "foo"},
	"protection": {"0", "1", "2", "true"},
	"agent":      {"1", "0", "enabled=1,fstrim_cloned_disks=1", "bogus=1", "2", "1,type=isa"},
	"machine":    {"q35", "pc", "pc-q35-8.1", "pc-i440fx-9.2+pve1", "pc-q35-10.0+pve0", "foo", "pc-q35-8.1,viommu=virtio"},
	"name":       {"vm1", "bad name", "a_b", "-x"},
	"tags":       {"a;b", "bad tag!", "x"},
	"args":       {"-device isa-applesmc,osk=x", "-cpu host"},
	"meta":       {"creation-qemu=9.2.0,ctime=1700000000", "bogus"},
	"cores":      {"0", "1", "-1", "abc"},
	"memory":     {"512", "abc", "0"},
	"numa":       {"0", "1", "2"},
	"foo":        {"bar"},
}

var diskKeyPool = []string{"scsi0", "scsi1", "scsi30", "scsi31", "virtio0", "virtio15", "virtio16", "sata0", "sata5", "sata6", "ide0", "ide2", "ide3", "ide4", "efidisk0", "efidisk1", "tpmstate0", "unused0", "scsi01"}

var volumePool = []string{"local-lvm:vm-8006-disk-0", "local:8006/vm-8006-disk-1.qcow2", "local:iso/debian.iso", "none", "cdrom", "/dev/sdb", "nostore:vm-8006-disk-0", "local-lvm:", "", "local-lvm:vm-8006-disk-0,"}

// mutate applies one random mutation to cfg's text (its main section's
// lines, or sections added after it) and says which.
func mutate(r *rand.Rand, text string) (string, string) {
	main, rest, _ := strings.Cut(text, "\n[")
	if rest != "" {
		rest = "\n[" + rest
	}
	lines := strings.Split(strings.TrimRight(main, "\n"), "\n")
	pick := func(want func(string) bool) int {
		var idx []int
		for i, l := range lines {
			if want(l) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return -1
		}
		return idx[r.IntN(len(idx))]
	}
	isDisk := func(l string) bool {
		k, _, ok := strings.Cut(l, ":")
		return ok && (IsDiskKey(k) || IsUnusedKey(k))
	}
	isKV := func(l string) bool { return keyRe.MatchString(l) && !strings.HasPrefix(l, "#") }
	anyOf := func(m map[string][]string) (string, string) {
		keys := SortedKeys(m)
		k := keys[r.IntN(len(keys))]
		return k, m[k][r.IntN(len(m[k]))]
	}
	var what string
	switch op := r.IntN(11); op {
	case 0, 1: // a drive option set to a schema value, or a refused one
		i := pick(isDisk)
		if i < 0 {
			return mutate(r, text)
		}
		k, v := anyOf(driveOptValues)
		lines[i] += "," + k + "=" + v
		what = "option " + k + "=" + v
	case 2: // a drive option twice, or a malformed list
		i := pick(isDisk)
		if i < 0 {
			return mutate(r, text)
		}
		m := []string{",cache=none,cache=none", ",", ",,size=1G", ",=x", ",cache", ",file=local-lvm:vm-8006-disk-9"}[r.IntN(6)]
		lines[i] += m
		what = "malformed options " + m
	case 3: // an empty value
		i := pick(isKV)
		if i < 0 {
			return mutate(r, text)
		}
		k, _, _ := strings.Cut(lines[i], ":")
		lines[i] = k + []string{":", ": ", ":  \t"}[r.IntN(3)]
		what = "empty value of " + k
	case 4: // mangled key syntax
		i := pick(isKV)
		if i < 0 {
			return mutate(r, text)
		}
		k, v, _ := strings.Cut(lines[i], ":")
		forms := []string{k + " :" + v, strings.ToUpper(k[:1]) + k[1:] + ":" + v, " " + k + ":" + v, k + "=" + strings.TrimSpace(v), k + ":" + strings.TrimSpace(v), "\t" + k + ":" + v, k + "_:" + v, k + "0:" + v}
		lines[i] = forms[r.IntN(len(forms))]
		what = "mangled key " + lines[i]
	case 5: // an unknown key, or a disk slot that does not exist
		k := diskKeyPool[r.IntN(len(diskKeyPool))]
		v := volumePool[r.IntN(len(volumePool))]
		if r.IntN(3) == 0 {
			k, v = "bogus-key", "1"
		}
		lines = append(lines, k+": "+v)
		what = "key " + k + ": " + v
	case 6: // a key twice
		i := pick(isKV)
		if i < 0 {
			return mutate(r, text)
		}
		dup := lines[i]
		if r.IntN(2) == 0 && isDisk(dup) {
			dup += ",cache=writeback"
		}
		lines = append(lines, dup)
		what = "duplicate " + dup
	case 7: // a VM key's value
		k, v := anyOf(vmKeyValues)
		if i := pick(func(l string) bool { return strings.HasPrefix(l, k+":") }); i >= 0 {
			lines[i] = k + ": " + v
		} else {
			lines = append(lines, k+": "+v)
		}
		what = "vm key " + k + ": " + v
	case 8: // a volume replaced
		i := pick(isDisk)
		if i < 0 {
			return mutate(r, text)
		}
		k, v, _ := strings.Cut(lines[i], ": ")
		_, opts, _ := strings.Cut(v, ",")
		vol := volumePool[r.IntN(len(volumePool))]
		lines[i] = k + ": " + vol
		if opts != "" {
			lines[i] += "," + opts
		}
		what = "volume " + vol
	case 9: // [PENDING]: a change, a deletion, a refused line
		k := diskKeyPool[r.IntN(len(diskKeyPool))]
		opt, val := anyOf(driveOptValues)
		p := "\n[PENDING]\n" + k + ": local-lvm:vm-8006-disk-3," + opt + "=" + val + "\n"
		switch r.IntN(3) {
		case 0:
			p += "delete: scsi0,!ide2\n"
		case 1:
			vk, vv := anyOf(vmKeyValues)
			p += vk + ": " + vv + "\n"
		}
		if strings.Contains(rest, "[PENDING]") {
			return mutate(r, text)
		}
		rest = p + rest
		what = "pending " + strings.TrimSpace(p)
	default: // a snapshot, a special or an unknown section
		k := diskKeyPool[r.IntN(len(diskKeyPool))]
		s := []string{
			"\n[snap1]\n" + k + ": local-lvm:vm-8006-disk-0,cache=bogus\nsnaptime: 1700000000\nparent: x\n",
			"\n[special:cloudinit]\nipconfig0: ip=dhcp\nbogus: 1\n",
			"\n[special:fleecing]\nfleecing-images: local-lvm:vm-8006-fleece-0\n",
			"\n[weird]\nfoo: bar\n",
			"\n[snap2]\nsnapstate: prepare\n" + k + ": local-lvm:vm-8006-disk-0\n",
		}[r.IntN(5)]
		rest += s
		what = "section " + strings.TrimSpace(strings.SplitN(s, "\n", 3)[1])
	}
	return strings.Join(lines, "\n") + "\n" + rest, what
}

// parseCorpus is every real config and the cfg2cmd corpus, by name.
func parseCorpus(t *testing.T) (names, texts []string) {
	for _, glob := range []string{
		filepath.Join(corpus.Dir(t, corpus.RealWorld), "configs", "*.conf"),
		filepath.Join(corpus.Dir(t, corpus.CFG2CMD), "*.conf"),
	} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f))
			texts = append(texts, string(b))
		}
	}
	if len(names) < 80 {
		t.Fatalf("only %d configs", len(names))
	}
	return names, texts
}

// generatedConfigs is how many configs the test derives from the corpus.
const generatedConfigs = 10000

// TestParseAsProxmox: for every config of the corpus and 10,000 generated
// from them (seeded, so the same each run: 1 to 3 mutations each), every
// line Proxmox gives a verdict has the tool's reading agree with it, or a
// row of parseDifferences says why not; a line Proxmox drops that takes a
// disk away is config-invalid (an error finding), never a note. One Parse
// call: the oracle's processes load Proxmox once each.
func TestParseAsProxmox(t *testing.T) {
	o := pveoracle.For(t)
	names, texts := parseCorpus(t)
	real := len(names)
	r := rand.New(rand.NewPCG(32, 2))
	n := generatedConfigs
	if testing.Short() {
		n = 600 // a quick look while changing the parser; make test runs all
	}
	for i := range n {
		base := r.IntN(real)
		text, what := texts[base], []string{}
		for range 1 + r.IntN(3) {
			var w string
			text, w = mutate(r, text)
			what = append(what, w)
		}
		names = append(names, fmt.Sprintf("gen-%05d from %s (%s)", i, names[base], strings.Join(what, "; ")))
		texts = append(texts, text)
	}
	cfgs := make([]pveoracle.Config, len(names))
	for i := range names {
		cfgs[i] = pveoracle.Config{Name: names[i], Text: texts[i]}
	}
	start := time.Now()
	res, err := o.Parse(context.Background(), cfgs)
	if err != nil {
		t.Fatal(err)
	}
	oracleTime := time.Since(start)
	used := map[string]int{}
	agree, lines := 0, 0
	byKind := map[string]int{}
	var failures []string
	kinds := map[string]int{}
	var startRule []lineCase
	for i, res := range res {
		cfg, err := ParseConfig(strings.NewReader(texts[i]), "/etc/pve/qemu-server/8006.conf")
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: the tool refuses the whole config: %v", names[i], err))
			continue
		}
		if res.Parse.Error != "" {
			failures = append(failures, fmt.Sprintf("%s: Proxmox refuses the whole config: %s", names[i], res.Parse.Error))
			continue
		}
		reads := map[int]LineRead{}
		for _, rd := range cfg.Reads {
			reads[rd.Line] = rd
		}
		textLines := strings.Split(texts[i], "\n")
		for _, pl := range res.Parse.Lines {
			rd, ok := reads[pl.Line]
			if !ok {
				failures = append(failures, fmt.Sprintf("%s line %d %q: Proxmox says %s, the tool has no reading of the line", names[i], pl.Line, pl.Text, pl.Verdict))
				continue
			}
			lines++
			l := lineCase{cfg: names[i], line: pl.Line, section: pl.Section, key: pl.Key, text: textLines[pl.Line-1],
				proxVerdict: pl.Verdict, messages: strings.Join(pl.Messages, " "), toolRead: rd.Read, toolValue: rd.Value, tool: toolReading(rd)}
			l.prox = proxKept
			if pl.Verdict != pveoracle.LineOK && pl.Verdict != pveoracle.LineNormalized {
				l.prox = proxDropped
			}
			k, v, _ := strings.Cut(strings.TrimSpace(l.text), ":")
			l.diskLike = looksLikeDiskKey.MatchString(strings.ToLower(strings.TrimSpace(strings.TrimRight(k, "=_")))) || mangledDiskRe.MatchString(l.text)
			l.takes = l.diskLike && strings.TrimSpace(v) != "" && (pl.Section == "main")
			if proxSection(rd.Section) != pl.Section && !(pl.Section == "unknown-section") {
				failures = append(failures, fmt.Sprintf("%s line %d %q: section %q, the tool's %q", names[i], pl.Line, l.text, pl.Section, proxSection(rd.Section)))
			}
			ok = l.prox == proxKept && (l.tool == toolUsed || l.tool == toolNotRead) ||
				l.prox == proxDropped && (l.tool == toolSkipped || l.tool == toolInvalid)
			// A dropped line that takes a disk away is an error finding.
			if l.prox == proxDropped && l.takes && l.tool != toolInvalid {
				ok = false
			}
			if ok {
				agree++
				byKind[l.prox+"/"+l.tool]++
				continue
			}
			excused := false
			for _, d := range parseDifferences {
				if d.applies(l) && !(l.prox == proxDropped && l.takes) {
					used[d.name]++
					excused = true
					if d.name == "parse_drive's rules at the start" {
						startRule = append(startRule, l)
					}
					break
				}
			}
			if !excused {
				kinds[fmt.Sprintf("%s %s/%s", pl.Key, l.prox, l.tool)]++
				failures = append(failures, fmt.Sprintf("%s line %d %q: Proxmox %s (%s), the tool %s (%s)", names[i], pl.Line, l.text, pl.Verdict, l.messages, l.tool, rd.Read))
			}
		}
	}
	// parse_drive's rules, verified: each such line alone (its volume on a
	// storage of qemu-server's harness) gets no device on Proxmox's command
	// line. One batch.
	var verify []pveoracle.Config
	seenLine := map[string]bool{}
	for _, l := range startRule {
		_, opts, _ := strings.Cut(l.toolValue, ",")
		line := l.key + ": local:8006/vm-8006-disk-0.raw," + opts
		if !seenLine[line] {
			seenLine[line] = true
			verify = append(verify, pveoracle.Config{Name: l.cfg + " line " + fmt.Sprint(l.line), Text: line + "\n"})
		}
	}
	vres, err := o.Cmdline(context.Background(), pveoracle.CmdOptions{}, verify)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vres {
		key, _, _ := strings.Cut(v.Config.Text, ":")
		if v.Cmd == nil || !v.Cmd.OK {
			continue // refused outright: no device either
		}
		for _, a := range v.Cmd.Args {
			if strings.Contains(a, "id="+key+",") || strings.HasSuffix(a, "id="+key) {
				failures = append(failures, fmt.Sprintf("%s: %q: the tool says the start drops the drive, Proxmox's command line has it: %s", v.Config.Name, strings.TrimSpace(v.Config.Text), a))
			}
		}
	}
	if len(kinds) > 0 {
		t.Logf("disagreements by key and readings: %v", kinds)
	}
	sort.Strings(failures)
	for i, f := range failures {
		if i == 60 {
			t.Errorf("... and %d more", len(failures)-60)
			break
		}
		t.Error(f)
	}
	t.Logf("%d configs (%d real and corpus, %d generated), %d lines with Proxmox's verdict: %d agree %v, %d deliberate differences %v, %d disagree (%d start-time drops verified on Proxmox's command line); oracle %s",
		len(names), real, len(names)-real, lines, agree, byKind, lines-agree-len(failures), used, len(failures), len(verify), oracleTime.Round(time.Millisecond))
}
