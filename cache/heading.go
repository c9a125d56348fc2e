package cache

import "github.com/pvediskcheck/pvediskcheck/qemuserver"

// Heading is what the disks that share it are told once: where an
// acknowledged write sits and what a host crash loses, under the mode (with
// the storage where it changes them).
type Heading struct {
	Title                   string
	AckedDataIn, CrashLoses string
	Risk                    Risk
	Disks                   []string // their IDs, in the view's order
}

// Risk is how much a heading's mode can lose of what the guest was told
// is written.
type Risk string

const (
	// RiskNone: the mode loses nothing the guest was told is on storage,
	// or the drive is no guest disk (CD-ROM, EFI vars, TPM state).
	RiskNone Risk = ""
	// RiskUnflushed: writeback keeps in node RAM what the guest has not
	// flushed (the guest's filesystem expects that and flushes).
	RiskUnflushed Risk = "unflushed"
	// RiskFlushed: unsafe ignores the guest's flushes, and flags that no
	// mode names (custom) may; a crash can lose what the guest flushed.
	RiskFlushed Risk = "flushed"
)

// Headings groups the view's disks by heading, in the order each heading
// first comes.
func (view View) Headings() []Heading {
	var out []Heading
	at := map[string]int{}
	for _, d := range view.Disks {
		i, ok := at[d.Heading]
		if !ok {
			i = len(out)
			at[d.Heading] = i
			out = append(out, Heading{Title: d.Heading, AckedDataIn: d.AckedDataIn, CrashLoses: d.CrashLoses, Risk: risk(d)})
		}
		out[i].Disks = append(out[i].Disks, d.ID)
	}
	return out
}

// risk is written as if-chains, as every rule here: the mutation tests
// (gremlins) do not see a switch's cases run.
func risk(d Disk) Risk {
	if d.Kind != qemuserver.KindDisk.String() {
		return RiskNone
	}
	if d.Shown == "unsafe" || d.Shown == "custom" {
		return RiskFlushed
	}
	if d.Shown == "writeback" {
		return RiskUnflushed
	}
	return RiskNone
}
