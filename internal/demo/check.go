package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// cacheReport is the part of `pvediskcheck cache --json` (README "JSON
// schemas") that the package test checks.
type cacheReport struct {
	VMID    *int  `json:"vmid"`
	Running *bool `json:"running"`
	Disks   []struct {
		ID         string `json:"id"`
		Controller string `json:"controller"`
		Volume     string `json:"volume"`
		Storage    string `json:"storage"`
		IOThread   bool   `json:"iothread"`
		Cache      struct {
			Configured string  `json:"configured"`
			Effective  *string `json:"effective"`
			Pending    *string `json:"pending"`
			Direct     *bool   `json:"direct"`
			NoFlush    *bool   `json:"no_flush"`
			WriteCache *string `json:"write_cache"`
		} `json:"cache"`
	} `json:"disks"`
}

// lab370Want is what cache must report for Lab 37's VM 370 as started by
// startLab370: default options, so cache=none (O_DIRECT, flushes honoured,
// write-cache on) everywhere, nothing pending.
var lab370Want = []struct{ id, controller string }{
	{"scsi0", "virtio-scsi-single"},
	{"scsi1", "virtio-scsi-single"},
	{"virtio1", "virtio-blk"},
	{"sata1", "sata"},
}

// checkCacheJSON reads `cache 370 --json` and returns every way it differs
// from what the running VM 370 must show.
func checkCacheJSON(r io.Reader) error {
	var rep cacheReport
	dec := json.NewDecoder(r)
	if err := dec.Decode(&rep); err != nil {
		return fmt.Errorf("not the JSON of cache --json: %w", err)
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if rep.VMID == nil || *rep.VMID != labVMID {
		bad("vmid: want %d", labVMID)
	}
	if rep.Running == nil || !*rep.Running {
		bad("running: want true")
	}
	if len(rep.Disks) != len(lab370Want) {
		bad("disks: %d, want %d", len(rep.Disks), len(lab370Want))
	}
	byID := map[string]int{}
	for i, d := range rep.Disks {
		byID[d.ID] = i
	}
	for i, w := range lab370Want {
		j, ok := byID[w.id]
		if !ok {
			bad("no disk %s", w.id)
			continue
		}
		d := rep.Disks[j]
		if d.Controller != w.controller {
			bad("%s: controller %q, want %q", d.ID, d.Controller, w.controller)
		}
		if d.Storage != "local-lvm" || d.Volume != fmt.Sprintf("local-lvm:vm-370-disk-%d", i) {
			bad("%s: storage %q volume %q, want local-lvm:vm-370-disk-%d", d.ID, d.Storage, d.Volume, i)
		}
		if wantIOThread := w.id != "sata1"; d.IOThread != wantIOThread {
			bad("%s: iothread %v, want %v", d.ID, d.IOThread, wantIOThread)
		}
		c := d.Cache
		if c.Configured != "none" {
			bad("%s: cache.configured %q, want none (the default)", d.ID, c.Configured)
		}
		if c.Effective == nil || *c.Effective != "none" {
			bad("%s: cache.effective %s, want none (read from the running QEMU)", d.ID, strOrNull(c.Effective))
		}
		if c.Pending != nil {
			bad("%s: cache.pending %q, want null", d.ID, *c.Pending)
		}
		if c.Direct == nil || !*c.Direct || c.NoFlush == nil || *c.NoFlush {
			bad("%s: cache.direct/no_flush: want true/false", d.ID)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}
