package qmp

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestParseQueryBlockIOStatus: io-status as QEMU 7.2 reported it for a VM
// paused by ENOSPC (check/testdata/real-ioerror-nospace.json), and absent
// where no error action stops the VM.
func TestParseQueryBlockIOStatus(t *testing.T) {
	ret := gjson.Parse(`[{"io-status": "nospace", "device": "", "qdev": "scsi1", "inserted": {"node-name": "drive-scsi1"}},
		{"io-status": "failed", "device": "", "qdev": "scsi2", "inserted": {"node-name": "drive-scsi2"}},
		{"device": "", "qdev": "/machine/peripheral/virtio0/virtio-backend", "inserted": {"node-name": "drive-virtio0"}}]`)
	got := ParseQueryBlock(ret)
	if len(got) != 3 || got[0].ID != "scsi1" || got[0].IOStatus != "nospace" || got[1].IOStatus != "failed" || got[2].ID != "virtio0" || got[2].IOStatus != "" {
		t.Errorf("%+v", got)
	}
}
