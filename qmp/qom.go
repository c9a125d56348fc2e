package qmp

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
)

// Version is QEMU's version as its QMP greeting states it.
type Version struct{ Major, Minor, Micro int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// ParseGreeting reads the version from QMP's greeting line; ok is false
// when the greeting names none.
func ParseGreeting(greeting []byte) (v Version, ok bool) {
	q := gjson.GetBytes(greeting, "QMP.version.qemu")
	if !q.Get("major").Exists() {
		return Version{}, false
	}
	return Version{int(q.Get("major").Int()), int(q.Get("minor").Int()), int(q.Get("micro").Int())}, true
}

// GreetingPackage reads the package string from QMP's greeting
// (VersionInfo.package: the build, "pve-qemu-kvm_11.0.0-1"; the greeting's
// version object is query-version's, docs/interop/qmp-spec "Server
// Greeting"); "" when the greeting names none.
func GreetingPackage(greeting []byte) string {
	return gjson.GetBytes(greeting, "QMP.version.package").String()
}

// Package is the connected QEMU's package string, from the greeting: what
// query-version would answer, without a command; "" for a monitor that has
// no greeting (a replay) or a greeting without one.
func (s Session) Package() string {
	if m, ok := s.M.(*SocketMonitor); ok {
		return GreetingPackage(m.Greeting)
	}
	return ""
}

// Version is the connected QEMU's version, from the greeting; ok is false
// for a monitor that has no greeting to read it from.
func (s Session) Version() (Version, bool) {
	if m, ok := s.M.(*SocketMonitor); ok {
		return ParseGreeting(m.Greeting)
	}
	return Version{}, false
}

// QOMListGetSince is the first QEMU with qom-list-get: every property of
// several objects in one command (qapi/qom.json, "Since: 10.1").
var QOMListGetSince = Version{10, 1, 0}

// HasQOMListGet reports whether the connected QEMU has qom-list-get.
func (s Session) HasQOMListGet() bool {
	v, ok := s.Version()
	return ok && v.AtLeast(QOMListGetSince.Major, QOMListGetSince.Minor)
}

// ParseQOMListGet reads qom-list-get's return value: one map of property
// name to value per path asked for, in the order asked. A property whose
// getter failed has no value and is left out; one path that does not
// resolve fails the whole command (DeviceNotFound).
func ParseQOMListGet(ret gjson.Result, paths int) ([]map[string]gjson.Result, error) {
	objs := ret.Array()
	if len(objs) != paths {
		return nil, fmt.Errorf("qom-list-get: %d objects for %d paths", len(objs), paths)
	}
	out := make([]map[string]gjson.Result, len(objs))
	for i, o := range objs {
		props := map[string]gjson.Result{}
		for _, p := range o.Get("properties").Array() {
			if v := p.Get("value"); v.Exists() {
				props[p.Get("name").String()] = v
			}
		}
		out[i] = props
	}
	return out, nil
}

// DevicePath is a disk's guest device in the QOM tree (qdev id = disk id).
func DevicePath(diskID string) string { return "/machine/peripheral/" + diskID }

// ThrottleGroupPath is a disk's throttle group object under -blockdev.
func ThrottleGroupPath(diskID string) string { return "/objects/" + ThrottleGroupID(diskID) }

// DiskProps are the per-disk QOM properties pvediskcheck reads: the
// device's configured write-cache and the throttle group's limits.
type DiskProps struct {
	WriteCache map[string]string           // disk id -> on, off, auto
	Limits     map[string]map[string]int64 // disk id -> ThrottleLimits as QEMU reports them
}

// ReadDiskProps reads the write-cache property of the devices of
// writeCache and the throttle-group limits of the disks of throttle.
//
// QEMU answers one command at a time from its main loop (~1 ms each), so on
// QEMU >= 10.1 this is one qom-list-get over every object, whatever the
// number of disks; older QEMU gets one qom-get per object. A device without
// write-cache (scsi-block, a CD-ROM) or a disk without a group (hot-plugged)
// is left out of the result, as QEMU's error for it says nothing else.
func (s Session) ReadDiskProps(writeCache, throttle []string) (DiskProps, error) {
	p := DiskProps{WriteCache: map[string]string{}, Limits: map[string]map[string]int64{}}
	if len(writeCache)+len(throttle) == 0 {
		return p, nil
	}
	if s.HasQOMListGet() {
		var paths []string
		for _, id := range writeCache {
			paths = append(paths, DevicePath(id))
		}
		for _, id := range throttle {
			paths = append(paths, ThrottleGroupPath(id))
		}
		ret, err := s.Exec("qom-list-get", map[string]any{"paths": paths})
		var objs []map[string]gjson.Result
		var se *ShapeError
		if errors.As(err, &se) {
			err = &Error{Class: "ReplyShape", Desc: se.Error()}
		} else if err == nil {
			// A reply of another shape than qom.json's (a future QEMU) is
			// no reason to fail: the per-object reads below still work.
			if objs, err = ParseQOMListGet(ret, len(paths)); err != nil {
				err = &Error{Class: "ReplyShape", Desc: err.Error()}
			}
		}
		var qe *Error
		switch {
		case err == nil:
			for i, id := range writeCache {
				if v, ok := objs[i]["write-cache"]; ok {
					p.WriteCache[id] = v.String()
				}
			}
			for i, id := range throttle {
				if v, ok := objs[len(writeCache)+i]["limits"]; ok {
					p.Limits[id] = parseThrottleGroupLimits(v)
				}
			}
			return p, nil
		case !errors.As(err, &qe):
			return p, err
		}
		// An object that is not there fails the whole list (or the reply
		// was not understood): ask one by one.
	}
	for _, id := range writeCache {
		r, err := s.Exec("qom-get", map[string]any{"path": DevicePath(id), "property": "write-cache"})
		var qe *Error
		if errors.As(err, &qe) {
			continue
		} else if err != nil {
			return p, err
		}
		p.WriteCache[id] = r.String()
	}
	for _, id := range throttle {
		l, err := s.ReadThrottleLimits(id, true)
		var qe *Error
		if errors.As(err, &qe) {
			continue
		} else if err != nil {
			return p, err
		}
		p.Limits[id] = l
	}
	return p, nil
}
