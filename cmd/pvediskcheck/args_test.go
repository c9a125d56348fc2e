package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestInterspersed(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want string }{
		{"p cache 370", "p cache 370"},
		{"p cache 370 scsi1 --json", "p --json cache 370 scsi1"},
		{"p --root /x check --all --json", "p --root /x --json check --all"},
		{"p flush 370 --for 3s --trigger scsi1", "p flush --for 3s --trigger 370 scsi1"},
		{"p check 370 --timeout 2s --fail-on error", "p --timeout 2s check --fail-on error 370"},
		{"p fio summary dir --csv", "p fio summary --csv dir"},
		{"p fio summary --json dir", "p --json fio summary dir"},
		{"p cache -- --weird", "p cache -- --weird"},
	} {
		got := interspersed(app, strings.Fields(tc.in))
		if !reflect.DeepEqual(got, strings.Fields(tc.want)) {
			t.Errorf("%q: got %q, want %q", tc.in, strings.Join(got, " "), tc.want)
		}
	}
}
