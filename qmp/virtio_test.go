package qmp_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

func TestParseVirtioStatus(t *testing.T) {
	read := func(name string) qmp.VirtioStatus {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return qmp.ParseVirtioStatus(gjson.ParseBytes(b))
	}
	none := read("real-x-query-virtio-status-no-driver.json")
	if none.DriverOK() || len(none.Statuses) != 0 || len(none.GuestFeatures) != 0 || none.Negotiated("VIRTIO_BLK_F_FLUSH") {
		t.Errorf("no driver: %+v", none)
	}
	if !reflect.DeepEqual(none.HostFeatures[:3], []string{"VHOST_USER_F_PROTOCOL_FEATURES", "VIRTIO_BLK_F_CONFIG_WCE", "VIRTIO_BLK_F_FLUSH"}) {
		t.Errorf("host features %v", none.HostFeatures)
	}
	bios := read("real-x-query-virtio-status-seabios.json")
	want := []string{"VIRTIO_CONFIG_S_ACKNOWLEDGE", "VIRTIO_CONFIG_S_DRIVER", "VIRTIO_CONFIG_S_FEATURES_OK", "VIRTIO_CONFIG_S_DRIVER_OK"}
	if !bios.DriverOK() || !reflect.DeepEqual(bios.Statuses, want) {
		t.Errorf("SeaBIOS statuses %v", bios.Statuses)
	}
	if !reflect.DeepEqual(bios.GuestFeatures, []string{"VIRTIO_BLK_F_BLK_SIZE", "VIRTIO_BLK_F_SEG_MAX"}) || bios.Negotiated("VIRTIO_BLK_F_FLUSH") || !bios.Negotiated("VIRTIO_BLK_F_SEG_MAX") {
		t.Errorf("SeaBIOS features %v", bios.GuestFeatures)
	}
	if s := qmp.ParseVirtioStatus(gjson.Parse(`{}`)); s.DriverOK() || s.Statuses != nil {
		t.Errorf("empty reply: %+v", s)
	}
}
