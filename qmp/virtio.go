package qmp

import (
	"strings"

	"github.com/tidwall/gjson"
)

// VirtioStatus is what x-query-virtio-status (QEMU 7.2 and later; still
// there in 11.1) reports about a virtio device: the driver status bits the
// guest has set and the features its driver negotiated. It tells "no
// driver has set the device up" from "a driver set it up without flush
// support" from "the guest's driver decides the write cache".
type VirtioStatus struct {
	// Statuses are the VIRTIO_CONFIG_S_* bits set (ACKNOWLEDGE, DRIVER,
	// FEATURES_OK, DRIVER_OK).
	Statuses []string
	// GuestFeatures are the device features the driver accepted
	// (VIRTIO_BLK_F_FLUSH, VIRTIO_BLK_F_CONFIG_WCE, ...); HostFeatures what
	// QEMU offered.
	GuestFeatures, HostFeatures []string
}

// VirtioStatusCommand is the QMP command, with the device's QOM path
// (/machine/peripheral/<id>/virtio-backend for virtio-blk).
const VirtioStatusCommand = "x-query-virtio-status"

// ParseVirtioStatus reads x-query-virtio-status's return value. QEMU
// prints each bit and feature as "NAME: description"; only NAME is kept.
func ParseVirtioStatus(ret gjson.Result) VirtioStatus {
	names := func(path string) []string {
		var out []string
		for _, v := range ret.Get(path).Array() {
			name, _, _ := strings.Cut(v.String(), ":")
			out = append(out, strings.TrimSpace(name))
		}
		return out
	}
	return VirtioStatus{
		Statuses:      names("status.statuses"),
		GuestFeatures: names("guest-features.dev-features"),
		HostFeatures:  names("host-features.dev-features"),
	}
}

func has(list []string, name string) bool {
	for _, v := range list {
		if v == name {
			return true
		}
	}
	return false
}

// DriverOK reports that a driver has set the device up
// (VIRTIO_CONFIG_S_DRIVER_OK): its negotiated features are in force.
func (s VirtioStatus) DriverOK() bool { return has(s.Statuses, "VIRTIO_CONFIG_S_DRIVER_OK") }

// Negotiated reports a device feature the driver accepted.
func (s VirtioStatus) Negotiated(feature string) bool { return has(s.GuestFeatures, feature) }
