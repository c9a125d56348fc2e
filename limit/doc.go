// Package limit owns every decision about a disk's I/O limits: the limit
// command's request rules (Input.Validate, before anything is read); what a
// value is (ParseValue: each value parsed as the number it is), how a change
// merges into the limits a disk has (Merge) and whether Proxmox and QEMU would take
// the result (Validate); the command that applies it, built from the numbers
// (LiveCommand: qom-set of throttle-drive-DISK under -blockdev,
// block_set_io_throttle under -drive; PersistArgv: qm set); applying it and
// confirming it in QEMU (Apply); measuring the disk over a window (Measure,
// with an OnSample hook) and judging each rate limit on the steady part
// (Judge: holds, not-binding, exceeded). Run does all of it for the limit
// command; its Result is the command's JSON.
package limit
