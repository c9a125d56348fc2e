package limit

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func dur(d time.Duration) *time.Duration { return &d }

// Each request rule of the limit command: the input that breaks it, and
// the nearest input that does not (the rule must not fire).
func TestInputValidate(t *testing.T) {
	disk := []string{"370", "scsi1"}
	wr20 := map[string]string{"mbps_wr": "20"}
	for _, tc := range []struct {
		name string
		in   Input
		err  string // "" : valid
	}{
		{"no VMID", Input{}, "limit: missing VMID (usage: pvediskcheck limit VMID [DISK])"},
		{"a VMID", Input{Args: []string{"370"}}, ""},
		{"VMID with a leading zero", Input{Args: []string{"0370"}}, `invalid VMID "0370"`},
		{"VMID below Proxmox's range", Input{Args: []string{"99"}}, "out of range 100-999999999"},
		{"lowest VMID", Input{Args: []string{"100"}}, ""},
		{"three arguments", Input{Args: []string{"370", "scsi1", "extra"}}, `limit: too many arguments "extra" (usage: pvediskcheck limit VMID [DISK])`},
		{"two arguments", Input{Args: disk}, ""},
		{"a value that is not a number", Input{Args: disk, Values: map[string]string{"mbps_wr": "abc"}}, `limit: --mbps-wr "abc": not a non-negative number`},
		{"the first bad value in key order", Input{Args: disk, Values: map[string]string{"iops_wr": "x", "mbps_rd": "y"}}, `limit: --mbps-rd "y":`},
		{"a change without its disk", Input{Args: []string{"370"}, Values: wr20}, "limit: name the disk to change (pvediskcheck limit 370 DISK --mbps-wr 20)"},
		{"--clear without its disk", Input{Args: []string{"370"}, Clear: true}, "name the disk to change"},
		{"a change with its disk", Input{Args: disk, Values: wr20}, ""},
		{"--clear with its disk", Input{Args: disk, Clear: true}, ""},
		{"--persist without a change", Input{Args: disk, Persist: true}, "limit: --persist and --dry-run need limit flags or --clear"},
		{"--dry-run without a change", Input{Args: disk, DryRun: true}, "need limit flags or --clear"},
		{"--persist with a change", Input{Args: disk, Values: wr20, Persist: true}, ""},
		{"--dry-run with --clear", Input{Args: disk, Clear: true, DryRun: true}, ""},
		{"--for without --verify", Input{Args: disk, For: dur(10 * time.Second)}, "limit: --for needs --verify"},
		{"--for with --verify", Input{Args: disk, For: dur(10 * time.Second), Verify: true}, ""},
		{"--verify without its disk", Input{Args: []string{"370"}, Verify: true}, "limit: --verify needs DISK"},
		{"--verify with the default window", Input{Args: disk, Verify: true}, ""},
		{"a window just under the minimum", Input{Args: disk, Verify: true, For: dur(MinWindow - time.Millisecond)}, "limit: --for 4.999s is too short: the first 3s are not judged and a verdict needs 2s more"},
		{"--for 0s", Input{Args: disk, Verify: true, For: dur(0)}, "limit: --for 0s is too short"},
		{"the minimum window", Input{Args: disk, Verify: true, For: dur(MinWindow)}, ""},
		{"the maximum window", Input{Args: disk, Verify: true, For: dur(MaxWindow)}, ""},
		{"a window past the maximum", Input{Args: disk, Verify: true, For: dur(MaxWindow + time.Second)}, "limit: --for 10m1s: at most 10m"},
		{"--verify with --dry-run", Input{Args: disk, Values: wr20, DryRun: true, Verify: true}, "limit: --verify cannot be combined with --dry-run"},
		{"--verify with a change", Input{Args: disk, Values: wr20, Verify: true}, ""},
		{"--persist below another root", Input{Args: disk, Values: wr20, Persist: true, Root: "/srv/copy"}, "limit: --persist runs this node's qm, which does not know --root /srv/copy; refusing"},
		{"--persist below the root PVEDISKCHECK_ROOT names", Input{Args: disk, Values: wr20, Persist: true, Root: "/srv/copy", RootEnv: "/srv/copy/"}, ""},
		{"--persist on /", Input{Args: disk, Values: wr20, Persist: true, Root: "/"}, ""},
		{"a live change below another root", Input{Args: disk, Values: wr20, Root: "/srv/copy"}, ""},
		// The first rule broken is the one reported.
		{"a change and --verify without a disk", Input{Args: []string{"370"}, Values: wr20, Verify: true}, "name the disk to change"},
		{"a bad VMID and too many arguments", Input{Args: []string{"abc", "scsi1", "x"}}, `invalid VMID "abc"`},
	} {
		_, err := tc.in.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		case err != nil && exitcode.Of(err) != exitcode.Usage:
			t.Errorf("%s: exit %d, want 2", tc.name, exitcode.Of(err))
		}
	}
}

// What a valid input asks Run to do.
func TestInputValidateRequest(t *testing.T) {
	for _, tc := range []struct {
		in   Input
		want Valid
	}{
		{Input{Args: []string{"370"}}, Valid{VMID: 370}},
		{Input{Args: []string{"370", "scsi1"}, Verify: true}, Valid{VMID: 370, Disk: "scsi1", Request: Request{Verify: DefaultWindow}}},
		{Input{Args: []string{"370", "scsi1"}, Verify: true, For: dur(7 * time.Second)}, Valid{VMID: 370, Disk: "scsi1", Request: Request{Verify: 7 * time.Second}}},
		{Input{Args: []string{"370", "scsi1"}, Values: map[string]string{"mbps_wr": "20", "iops_rd": "1000"}, Persist: true},
			Valid{VMID: 370, Disk: "scsi1", Request: Request{Persist: true, Change: &Change{Values: Set{"mbps_wr": 20, "iops_rd": 1000}}}}},
		{Input{Args: []string{"370", "virtio0"}, Clear: true, DryRun: true},
			Valid{VMID: 370, Disk: "virtio0", Request: Request{DryRun: true, Change: &Change{Values: Set{}, Clear: true}}}},
	} {
		got, err := tc.in.Validate()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v:\n got %+v (%v)\nwant %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestInputChanges(t *testing.T) {
	for _, tc := range []struct {
		in   Input
		want bool
	}{
		{Input{}, false},
		{Input{Verify: true, Persist: true}, false},
		{Input{Values: map[string]string{"mbps_wr": "20"}}, true},
		{Input{Clear: true}, true},
		{Input{Clear: true, DryRun: true}, false},
		{Input{Values: map[string]string{"mbps_wr": "20"}, DryRun: true}, false},
	} {
		if got := tc.in.Changes(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestFlagName(t *testing.T) {
	for in, want := range map[string]string{"mbps_wr": "mbps-wr", "iops_rd_max_length": "iops-rd-max-length", "iops": "iops"} {
		if got := FlagName(in); got != want {
			t.Errorf("FlagName(%q) = %q, want %q", in, got, want)
		}
	}
}
