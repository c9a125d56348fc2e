package limit

import "encoding/json"

// Fixture is one recorded run.
type fixture struct {
	Source     string `json:"source"`
	QEMU       string `json:"qemu"`
	Generation string `json:"generation"`
	Date       string `json:"date"`
	// Start: cold: the load starts with the window; warm: it ran
	// unthrottled before the limits were set; stopped: warm, and QEMU is
	// stopped (SIGSTOP) from 1 s to 4 s into the window, as a node under
	// memory pressure or a debugger would: the ticks it cannot answer are
	// missing from Samples.
	Start    string           `json:"start"`
	Limits   map[string]int64 `json:"limits"`
	Load     string           `json:"load"`
	WindowNs int64            `json:"window_ns"`
	// Baseline is the disk's completed reads and writes before the load
	// started: submitted - (completed - baseline) is the true depth.
	BaselineRdOps int64           `json:"baseline_rd_operations"`
	BaselineWrOps int64           `json:"baseline_wr_operations"`
	Samples       []fixtureSample `json:"samples"`
}

type fixtureSample struct {
	TNs int64 `json:"t_ns"` // midpoint of the exchange, from the start of the window
	// Return is QEMU's query-blockstats return, cut to the disk's entry.
	Return json.RawMessage `json:"return"`
	// SubmittedWr, SubmittedRd: requests the load generator had issued.
	SubmittedWr int `json:"submitted_wr"`
	SubmittedRd int `json:"submitted_rd"`
}
