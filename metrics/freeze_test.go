package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvediskcheck/pvediskcheck/vm"
)

// TestCollectFreeze: the series of each freeze state check can hand over,
// the exact set: frozen 1, thawed 0, not asked during a backup (no
// vm_guest_frozen, vm_backup_holds 1), unanswered (no vm_guest_frozen),
// no agent socket (nothing at all).
func TestCollectFreeze(t *testing.T) {
	job := &vm.BackupHold{Jobs: []vm.BackupJob{{ID: "drive-scsi0", Status: "running", DoneBytes: 1, TotalBytes: 4}}}
	cases := []struct {
		name string
		f    *vm.Freeze
		want []string
	}{
		{"no agent socket", nil, nil},
		{"frozen", &vm.Freeze{State: vm.Frozen}, []string{"vm_backup_holds 0", "vm_guest_frozen 1"}},
		{"frozen during a backup", &vm.Freeze{State: vm.Frozen, Backup: job}, []string{"vm_backup_holds 1", "vm_guest_frozen 1"}},
		{"thawed", &vm.Freeze{State: vm.Thawed}, []string{"vm_backup_holds 0", "vm_guest_frozen 0"}},
		{"not asked: a backup holds the VM", &vm.Freeze{State: vm.FreezeNotAsked, Backup: job}, []string{"vm_backup_holds 1"}},
		{"unanswered", &vm.Freeze{State: vm.FreezeUnknown, Why: "timeout"}, []string{"vm_backup_holds 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			collectFreeze(func(d *prometheus.Desc, v float64, labels ...string) {
				name := strings.TrimPrefix(strings.Split(strings.Split(d.String(), `fqName: "`)[1], `"`)[0], Namespace+"_")
				if !slices.Equal(labels, []string{"370"}) {
					t.Errorf("%s labels %q", name, labels)
				}
				got = append(got, name+" "+prometheusValue(v))
			}, "370", c.f)
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}

func prometheusValue(v float64) string {
	switch v {
	case 0:
		return "0"
	case 1:
		return "1"
	}
	return "other"
}
