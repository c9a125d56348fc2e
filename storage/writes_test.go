package storage

import (
	"os"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// testdata/every-type.cfg is a storage.cfg with every storage type Proxmox
// has (as the real-world corpus spells them) and a third-party plugin; the
// cache package's tests read it too.
func parse(t *testing.T) qemuserver.Storages {
	t.Helper()
	f, err := os.Open("testdata/every-type.cfg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := qemuserver.ParseStorages(f, "every-type.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBackendOf(t *testing.T) {
	st := parse(t)
	for _, c := range []struct {
		storage, driver string
		want            Backend
	}{
		{"local", "file", File},
		{"nas", "file", File},
		{"smb", "file", File},
		{"bt", "file", File},
		{"local-lvm", "host_device", Block},
		{"thick", "host_device", Block},
		{"thick-chain", "host_device", Block},
		{"san", "host_device", Block},
		{"local-zfs", "host_device", Zvol},
		{"ceph", "rbd", Librbd},
		{"ceph", "", Librbd}, // stopped: storage.cfg alone decides
		{"ceph-krbd", "host_device", KRBD},
		{"san-direct", "iscsi", Libiscsi},
		{"zfs-over-iscsi", "", Libiscsi},
		{"drbd", "host_device", Unknown},
		{"", "file", File},         // an absolute path to an image
		{"", "host_device", Block}, // a passthrough disk
		{"", "host_cdrom", Block},
		{"", "nbd", Unknown},
		{"", "", Unknown},
	} {
		if got := BackendOf(st[c.storage], c.driver); got != c.want {
			t.Errorf("%s/%s: %s, want %s", c.storage, c.driver, got, c.want)
		}
	}
}

// TestWritesFor pins each storage type's sentence and what the node can
// measure there, mode by mode.
func TestWritesFor(t *testing.T) {
	type want struct {
		acked, loses      string // substrings of the two sentences
		held, visible     bool
		unseen, fastFlush string // substrings; "" means must be empty
		flush             string // substring of what a flush does
	}
	pc := func(mode string, held, visible bool, flush string) want {
		return want{acked: PageCacheFacts[mode][0], loses: PageCacheFacts[mode][1], held: held, visible: visible, flush: flush}
	}
	for _, c := range []struct {
		b            Backend
		mode, format string
		w            want
	}{
		// The node page cache: the lab's table, unchanged.
		{File, "none", "raw", pc("none", false, false, "storage writes its own cache")},
		{File, "writethrough", "raw", pc("writethrough", false, true, "dirty pages")},
		{File, "writeback", "raw", pc("writeback", true, true, "dirty pages")},
		{File, "directsync", "raw", pc("directsync", false, false, "own cache")},
		{File, "unsafe", "raw", pc("unsafe", true, true, "cache.no-flush")},
		{Block, "custom", "raw", pc("custom", true, true, "cache.no-flush")},
		{Block, "writeback", "raw", pc("writeback", true, true, "dirty pages")},
		{KRBD, "writeback", "raw", pc("writeback", true, true, "dirty pages")},
		// krbd: the OSDs acknowledge once every replica has the write.
		{KRBD, "none", "raw", want{acked: "krbd sends O_DIRECT writes straight to the OSDs", loses: "nothing that was acknowledged", flush: "own cache"}},
		{KRBD, "directsync", "raw", want{acked: "all replicas", loses: "nothing that was acknowledged", flush: "own cache"}},
		// qcow2: QEMU's metadata cache, measured by TestCacheQcow2Metadata.
		{File, "none", "qcow2", want{acked: "qcow2 metadata cache until the guest flushes", loses: "not flushed", held: true, unseen: "qcow2 metadata cache", flush: "own cache"}},
		{File, "writeback", "qcow2", want{acked: "node RAM (page cache)", loses: "GiBs", held: true, visible: true, unseen: "qcow2", flush: "dirty pages"}},
		{File, "writethrough", "qcow2", pc("writethrough", false, true, "dirty pages")},
		{File, "directsync", "qcow2", pc("directsync", false, false, "own cache")},
		// ZFS: the open transaction group holds writes, O_DIRECT or not.
		{Zvol, "none", "raw", want{acked: "ZFS's open transaction group", loses: "sync=disabled", held: true, unseen: "ZFS's open transaction group", fastFlush: "sync=disabled", flush: "ZIL commit"}},
		{Zvol, "writeback", "raw", want{acked: "zvol's page cache", loses: "GiBs", held: true, visible: true, unseen: "transaction group", fastFlush: "sync=disabled", flush: "then a ZIL commit"}},
		{Zvol, "writethrough", "raw", want{acked: "ZIL commit", loses: "unless the zvol has sync=disabled", visible: true, fastFlush: "sync=disabled", flush: "ZIL commit"}},
		{Zvol, "directsync", "raw", want{acked: "O_DIRECT", loses: "unless", fastFlush: "sync=disabled", flush: "ZIL commit"}},
		{Zvol, "unsafe", "raw", want{acked: "guest flushes are ignored", loses: "even data the guest believes is safe", held: true, visible: true, unseen: "transaction group", fastFlush: "sync=disabled", flush: "cache.no-flush"}},
		// librbd: cache=writeback turns rbd_cache on in the QEMU process.
		{Librbd, "none", "raw", want{acked: "rbd_cache=false", loses: "nothing that was acknowledged", flush: "cache is off"}},
		{Librbd, "directsync", "raw", want{acked: "rbd_cache=false", loses: "nothing", flush: "cache is off"}},
		{Librbd, "writethrough", "raw", want{acked: "QEMU flushes every write", loses: "nothing", flush: "writes its cache to the OSDs"}},
		{Librbd, "writeback", "raw", want{acked: "librbd's cache in the QEMU process", loses: "24 MiB", held: true, unseen: "Dirty, Writeback and cachestat cannot see it", flush: "writes its cache to the OSDs"}},
		{Librbd, "unsafe", "raw", want{acked: "never reach it", loses: "believes is safe", held: true, unseen: "QEMU process", flush: "cache.no-flush"}},
		// libiscsi: no node page cache at all; the target is elsewhere.
		{Libiscsi, "none", "raw", want{acked: "iSCSI target's write cache", loses: "a crash of the target", unseen: "another machine", fastFlush: "SYNCHRONIZE CACHE", flush: "SYNCHRONIZE CACHE"}},
		{Libiscsi, "writeback", "raw", want{acked: "whatever cache.direct says", loses: "a crash of the target", unseen: "another machine", fastFlush: "without writing", flush: "SYNCHRONIZE CACHE"}},
		{Libiscsi, "writethrough", "raw", want{acked: "every write", loses: "nothing", fastFlush: "without", flush: "SYNCHRONIZE"}},
		{Libiscsi, "directsync", "raw", want{acked: "every write", loses: "nothing", fastFlush: "without", flush: "SYNCHRONIZE"}},
		{Libiscsi, "unsafe", "raw", want{acked: "never reach it", loses: "even data the guest flushed", unseen: "another machine", fastFlush: "without", flush: "cache.no-flush"}},
		// Not modelled: said, never guessed.
		{Unknown, "none", "raw", want{acked: "not modelled", loses: PageCacheFacts["none"][1], flush: "own cache"}},
		{Unknown, "writeback", "raw", want{acked: "not modelled", loses: "GiBs", held: true, visible: true, flush: "dirty pages"}},
	} {
		w := WritesFor(c.b, qemuserver.CacheOf(c.mode), c.format)
		name := string(c.b) + "/" + c.mode + "/" + c.format
		if w.Backend != c.b || !strings.Contains(w.AckedIn, c.w.acked) || !strings.Contains(w.CrashLoses, c.w.loses) {
			t.Errorf("%s: acked %q, loses %q; want %q, %q", name, w.AckedIn, w.CrashLoses, c.w.acked, c.w.loses)
		}
		if w.HeldOnNode != c.w.held || w.Visible != c.w.visible {
			t.Errorf("%s: held %v visible %v, want %v %v", name, w.HeldOnNode, w.Visible, c.w.held, c.w.visible)
		}
		if (c.w.unseen == "") != (w.Unseen == "") || !strings.Contains(w.Unseen, c.w.unseen) {
			t.Errorf("%s: unseen %q, want %q", name, w.Unseen, c.w.unseen)
		}
		if (c.w.fastFlush == "") != (w.FastFlushMeans == "") || !strings.Contains(w.FastFlushMeans, c.w.fastFlush) {
			t.Errorf("%s: a fast flush means %q, want %q", name, w.FastFlushMeans, c.w.fastFlush)
		}
		if !strings.Contains(w.Flush, c.w.flush) {
			t.Errorf("%s: flush %q, want %q", name, w.Flush, c.w.flush)
		}
		if note := w.Note(); (note == "") != (w.Unseen == "") || note != "" && note != "not measurable from the node: "+w.Unseen {
			t.Errorf("%s: note %q", name, note)
		}
	}
}

func TestForDisk(t *testing.T) {
	st := parse(t)
	drive := func(line string) *qemuserver.Drive {
		d, err := qemuserver.ParseDrive("scsi1", line)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if w := ForDisk(st.Of(drive("ceph:vm-100-disk-0,cache=writeback")), &qemuserver.DiskSettings{Driver: "rbd", Format: "raw"}, qemuserver.CacheOf("writeback")); w.Backend != Librbd || !w.HeldOnNode || w.Visible {
		t.Errorf("librbd writeback: %+v", w)
	}
	if w := ForDisk(st.Of(drive("local:100/vm-100-disk-0.qcow2")), &qemuserver.DiskSettings{Driver: "file", Format: "qcow2"}, qemuserver.CacheOf("none")); w.Backend != File || !w.HeldOnNode || w.Unseen == "" {
		t.Errorf("qcow2 none: %+v", w)
	}
	// A disk the running QEMU has but the config does not: the driver decides.
	if w := ForDisk(nil, &qemuserver.DiskSettings{Driver: "host_device"}, qemuserver.CacheOf("writeback")); w.Backend != Block || !w.Visible {
		t.Errorf("running only: %+v", w)
	}
	// Stopped, storage only: the type decides.
	if w := ForDisk(st.Of(drive("local-zfs:vm-100-disk-0")), nil, qemuserver.CacheOf("none")); w.Backend != Zvol || !w.HeldOnNode {
		t.Errorf("zvol from storage.cfg: %+v", w)
	}
	// A storage id missing from storage.cfg and no settings: not modelled.
	if w := ForDisk(st.Of(drive("gone:vm-100-disk-0")), nil, qemuserver.CacheOf("none")); w.Backend != Unknown {
		t.Errorf("missing storage: %+v", w)
	}
}

// TestEvidenceOf: the row picks the sentence for where unflushed writes
// sit; a path and a plugin's volume take their protocol driver's.
func TestEvidenceOf(t *testing.T) {
	st := parse(t)
	for _, c := range []struct {
		storage, driver string
		want            storagetype.Evidence
	}{
		{"local", "file", storagetype.EvidencePageCache},
		{"thick-chain", "host_device", storagetype.EvidencePageCache},
		{"ceph-krbd", "host_device", storagetype.EvidencePageCache},
		{"ceph", "rbd", storagetype.EvidenceLibrbd},
		{"san-direct", "iscsi", storagetype.EvidenceRemote},
		{"zfs-over-iscsi", "iscsi", storagetype.EvidenceRemote},
		{"drbd", "host_device", storagetype.EvidencePageCache},
		{"drbd", "nbd", storagetype.EvidenceRemote},
		{"drbd", "rbd", storagetype.EvidenceLibrbd},
		{"", "nbd", storagetype.EvidenceRemote},
		{"", "iscsi", storagetype.EvidenceRemote},
		{"", "file", storagetype.EvidencePageCache},
	} {
		if got := EvidenceOf(st[c.storage], c.driver); got != c.want {
			t.Errorf("%s/%s: %d, want %d", c.storage, c.driver, got, c.want)
		}
	}
}

// TestVolumeChain: a qcow2 volume on thick LVM (snapshot-as-volume-chain 1)
// is reached as a block device, its new clusters' mapping waits in QEMU's
// qcow2 metadata cache until a flush, and a discard gives nothing back
// (a qcow2 on a file storage does).
func TestVolumeChain(t *testing.T) {
	st := parse(t)
	d, err := qemuserver.ParseDrive("scsi0", "thick-chain:vm-100-disk-0.qcow2,discard=on,iothread=1,size=32G")
	if err != nil {
		t.Fatal(err)
	}
	s, err := qemuserver.Predict(d, st, qemuserver.VMDefaults{Blockdev: true, SCSIHW: "virtio-scsi-single"}, nil)
	if err != nil || s.Path != "/dev/vgchain/vm-100-disk-0.qcow2" || s.Driver != "host_device" || s.Format != "qcow2" || !s.CacheDirect || s.AIO != "native" {
		t.Fatalf("%+v %v", s, err)
	}
	w := ForDisk(st.Of(d), &s, s.Cache())
	if w.Backend != Block || !w.HeldOnNode || !strings.Contains(w.AckedIn, "qcow2 metadata cache") || !strings.Contains(w.Unseen, "qcow2 metadata cache") {
		t.Errorf("none: %+v", w)
	}
	if w := ForDisk(st.Of(d), &s, qemuserver.CacheOf("writeback")); !w.Visible || !strings.HasPrefix(w.AckedIn, PageCacheFacts["writeback"][0]) {
		t.Errorf("writeback: %+v", w)
	}
	if ReturnsSpace(st["thick-chain"], "qcow2", "") || !ReturnsSpace(st["local"], "qcow2", "") {
		t.Error("ReturnsSpace: a qcow2 on a thick LV frees nothing, a qcow2 file does")
	}
	if IOUringHazard(st["thick-chain"], true) != IOUringHazard(st["thick"], true) || IOUringHazard(st["thick-chain"], true) == "" {
		t.Error("qemu-server avoids io_uring on every lvm storage")
	}
}

// TestWritesForCustom: flags no Proxmox mode has are judged as the worst
// case whatever they are (buffered, flushes ignored), the same as the mode
// named custom.
func TestWritesForCustom(t *testing.T) {
	want := WritesFor(Block, qemuserver.CacheOf("custom"), "raw")
	for _, c := range []qemuserver.Cache{qemuserver.EffectiveCache(true, true, "on"), qemuserver.EffectiveCache(true, true, "off"), qemuserver.EffectiveCache(false, true, "off")} {
		if c.Mode != "custom" {
			t.Fatalf("%+v is not custom", c)
		}
		if got := WritesFor(Block, c, "raw"); got != want || !got.HeldOnNode || !got.Visible {
			t.Errorf("%+v: %+v, want %+v", c, got, want)
		}
	}
}
