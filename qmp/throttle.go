package qmp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// ThrottleLimitNames are the 18 ThrottleLimits fields qemu-server sets live,
// in its order: bytes/s for bps-*, ops/s for iops-*, seconds for *-max-length.
// QEMU's 19th field, iops-size, is never set by Proxmox.
var ThrottleLimitNames = func() []string {
	var out []string
	for _, dir := range []string{"-total", "-read", "-write"} {
		out = append(out,
			"bps"+dir, "bps"+dir+"-max", "bps"+dir+"-max-length",
			"iops"+dir, "iops"+dir+"-max", "iops"+dir+"-max-length")
	}
	return out
}()

// ThrottleGroupID is the throttle-group object qemu-server creates for a
// disk under -blockdev (machine >= 10.0).
func ThrottleGroupID(diskID string) string { return "throttle-drive-" + diskID }

// ReadThrottleLimits returns the I/O limits QEMU applies to disk diskID right
// now, in ThrottleLimits names, as QEMU reports them (zero values and default
// burst lengths included).
//
// Under -blockdev the limits live in the throttle-group object
// throttle-drive-<id> (qom-get ... limits); query-block's bps_* stay 0 there.
// Under -drive they live on the BlockBackend and query-block reports them with
// legacy names (bps_wr), converted here with BackendToQEMULimitName.
func (s Session) ReadThrottleLimits(diskID string, blockdev bool) (map[string]int64, error) {
	if blockdev {
		r, err := s.Exec("qom-get", map[string]any{"path": ThrottleGroupID(diskID), "property": "limits"})
		if err != nil {
			return nil, fmt.Errorf("qom-get %s limits: %w", ThrottleGroupID(diskID), err)
		}
		return parseThrottleGroupLimits(r), nil
	}
	ret, err := s.Exec("query-block", nil)
	if err != nil {
		return nil, err
	}
	return backendLimits(ParseQueryBlock(ret), diskID)
}

// ErrNoDevice means QEMU has no block device for the disk id.
var ErrNoDevice = errors.New("no such block device in the running VM")

func backendLimits(devs []BlockDevice, diskID string) (map[string]int64, error) {
	for _, d := range devs {
		if d.ID != diskID {
			continue
		}
		if !d.Inserted {
			return nil, fmt.Errorf("%s: no medium inserted", diskID)
		}
		out := map[string]int64{}
		for k, v := range d.BackendLimits {
			out[BackendToQEMULimitName(k)] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoDevice, diskID)
}

func parseThrottleGroupLimits(r gjson.Result) map[string]int64 {
	out := map[string]int64{}
	r.ForEach(func(k, v gjson.Result) bool {
		out[k.String()] = v.Int()
		return true
	})
	return out
}

// ThrottleCommand is the QMP command qemu-server sends to change a running
// disk's limits; full must hold all 18 ThrottleLimitNames (unset rates 0,
// unset burst lengths 1, as qemu-server sends them).
//
//   - -blockdev: qom-set {"path":"throttle-drive-<id>","property":"limits","value":{18 keys}}.
//     Fields merge into the group's limits, so every key is sent: an
//     omitted key would keep its old value.
//   - -drive: block_set_io_throttle {"device":"drive-<id>", bps, bps_rd, ...}
//     with every field (the six base rates are mandatory in QMP).
func ThrottleCommand(diskID string, blockdev bool, full map[string]int64) (name string, args map[string]any, err error) {
	for _, k := range ThrottleLimitNames {
		if _, ok := full[k]; !ok {
			return "", nil, fmt.Errorf("throttle limits for %s: field %s missing (qemu-server sends all 18)", diskID, k)
		}
	}
	if blockdev {
		value := map[string]any{}
		for _, k := range ThrottleLimitNames {
			value[k] = full[k]
		}
		return "qom-set", map[string]any{"path": ThrottleGroupID(diskID), "property": "limits", "value": value}, nil
	}
	args = map[string]any{"device": "drive-" + diskID}
	for _, k := range ThrottleLimitNames {
		args[QEMUToBackendLimitName(k)] = full[k]
	}
	return "block_set_io_throttle", args, nil
}

// SetThrottleLimits applies full (all 18 fields) to a running disk exactly as
// qemu-server does; see ThrottleCommand.
func (s Session) SetThrottleLimits(diskID string, blockdev bool, full map[string]int64) error {
	name, args, err := ThrottleCommand(diskID, blockdev, full)
	if err != nil {
		return err
	}
	if _, err := s.Exec(name, args); err != nil {
		return fmt.Errorf("%s %s: %w", name, diskID, err)
	}
	return nil
}

// QEMUToBackendLimitName maps a ThrottleLimits name (bps-write-max-length) to
// the legacy query-block / block_set_io_throttle name (bps_wr_max_length).
func QEMUToBackendLimitName(k string) string {
	base, rest, _ := strings.Cut(k, "-")
	dir, rest, _ := strings.Cut(rest, "-")
	switch dir {
	case "total":
		dir = ""
	case "read":
		dir = "_rd"
	case "write":
		dir = "_wr"
	}
	if rest != "" {
		return base + dir + "_" + strings.ReplaceAll(rest, "-", "_")
	}
	return base + dir
}
