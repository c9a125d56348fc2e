package qmp

import (
	"encoding/json"
	"testing"
)

// TestCommandAsMarshal: a command's line is the bytes json.Marshal made of
// the request map before, with and without arguments, plain names and
// names JSON must escape.
func TestCommandAsMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		args any
	}{
		{"query-blockstats", nil},
		{"qom-get", map[string]any{"path": "/objects/throttle-drive-scsi0", "property": "limits"}},
		{"qom-list-get", map[string]any{"paths": []string{"/objects/a<b>", "/objects/&c"}}},
		{"block-latency-histogram-set", struct {
			ID  string `json:"id"`
			Bnd []int  `json:"boundaries"`
		}{"scsi0", []int{10, 100}}},
		{`we"ird<name>`, nil},
		{"x_y-Z9", []any{}},
	} {
		req := map[string]any{"execute": tc.name}
		if tc.args != nil {
			req["arguments"] = tc.args
		}
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := command(tc.name, tc.args)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %s, %v; json.Marshal: %s", tc.name, got, err, want)
		}
	}
	if _, err := command("x", func() {}); err == nil {
		t.Error("an argument JSON cannot hold: no error")
	}
}
