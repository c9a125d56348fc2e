package units

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1999999439, "2s"}, // what is left of a 2 s deadline, as QMP's timeout printed it
		{2 * time.Second, "2s"},
		{1994999999, "1.99s"},
		{1995000000, "2s"},
		{8 * time.Second, "8s"},
		{4500 * time.Millisecond, "4.5s"},
		{1234567890, "1.23s"},
		{100 * time.Millisecond, "100ms"},
		{99 * time.Millisecond, "99ms"},
		{99999999, "100ms"},
		{123456789, "123ms"},
		{999, "999ns"},
		{1001, "1µs"},
		{1500 * time.Microsecond, "1.5ms"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
		{2*time.Minute + 123*time.Millisecond, "2m0s"},
		{10 * time.Minute, "10m0s"},
		{-1999999439, "-2s"},
		{1<<63 - 1, "2561111h6m40s"}, // no overflow at the largest duration
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%d) = %q, want %q", int64(c.d), got, c.want)
		}
	}
}
