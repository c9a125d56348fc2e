package fio

import "testing"

// Lab 19's six jobs are each read by the figure its summary table gives
// them; a job without the latency its figure needs falls back to IOPS.
func TestLabFigure(t *testing.T) {
	ns := &Stat{Mean: 1}
	for _, c := range []struct {
		name string
		opts map[string]string
		g    Group
		want Figure
	}{
		{"rr4k", map[string]string{"rw": "randread", "bs": "4k", "iodepth": "32"}, Group{ClatMeanNs: ns}, FigureIOPS},
		{"rw4k", map[string]string{"rw": "randwrite", "bs": "4k", "iodepth": "32"}, Group{ClatMeanNs: ns}, FigureIOPS},
		{"rw4kqd1", map[string]string{"rw": "randwrite", "bs": "4k", "iodepth": "1"}, Group{ClatMeanNs: ns}, FigureClat},
		{"sr1m", map[string]string{"rw": "read", "bs": "1M", "iodepth": "16"}, Group{ClatMeanNs: ns}, FigureBW},
		{"sw1m", map[string]string{"rw": "write", "bs": "1M", "iodepth": "16"}, Group{ClatMeanNs: ns}, FigureBW},
		{"sync", map[string]string{"rw": "randwrite", "bs": "4k", "iodepth": "1", "fsync": "1"}, Group{ClatMeanNs: ns, FsyncMeanNs: ns}, FigureFsync},
		// the edges: 128k is sequential's, 64k not; depth unset is fio's 1
		{"128k", map[string]string{"bs": "128k", "iodepth": "8"}, Group{}, FigureBW},
		{"64k", map[string]string{"bs": "64k", "iodepth": "8"}, Group{}, FigureIOPS},
		{"no depth", map[string]string{"bs": "4k"}, Group{ClatMeanNs: ns}, FigureClat},
		{"fsync=0 is no flush", map[string]string{"bs": "4k", "iodepth": "1", "fsync": "0"}, Group{ClatMeanNs: ns, FsyncMeanNs: ns}, FigureClat},
		{"QD1 without latencies", map[string]string{"bs": "4k", "iodepth": "1"}, Group{}, FigureIOPS},
		{"sync without fsync figures", map[string]string{"bs": "4k", "iodepth": "1", "fsync": "1"}, Group{ClatMeanNs: ns}, FigureClat},
		{"bssplit is no one size", map[string]string{"bs": "1M", "bssplit": "4k/50:1M/50", "iodepth": "8"}, Group{}, FigureIOPS},
	} {
		c.g.Options = c.opts
		if got := LabFigure(&c.g); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
