package limit

import "github.com/pvediskcheck/pvediskcheck/latency"

// Result is what `limit` reports for one disk, and its --json schema
// (README "JSON schemas"): one object for a named disk, an array of them
// when no disk is named.
type Result struct {
	VMID     int           `json:"vmid"`
	Disk     string        `json:"disk"`
	Running  bool          `json:"running"`
	Blockdev bool          `json:"blockdev"`
	Limits   Sets          `json:"limits"`
	Apply    *Applied      `json:"apply,omitempty"`
	Verify   *Verification `json:"verify,omitempty"`
	Notes    []string      `json:"notes,omitempty"`
	// Histogram says, with --histogram, what was done about the disk's
	// latency histogram for the window (set and cleared after, found set
	// and used as it is, or refused).
	Histogram *latency.Note `json:"histogram,omitempty"`
	// HistogramsLeft are the latency histograms of pvediskcheck's on the
	// disk that this run did not set (latency.Leftover: a run killed
	// before it could clear them), each with the command that clears it;
	// with or without --histogram, omitted when none.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
}

// Sets holds limits by Proxmox key in Proxmox units (MiB/s, ops/s,
// seconds); RunningQEMU is the same running set in QEMU's names and units
// (bytes/s). Running is null when the running limits are unknown (the VM
// does not run, or QEMU could not be asked).
type Sets struct {
	Configured  Set              `json:"configured"`
	Running     Set              `json:"running"`
	RunningQEMU map[string]int64 `json:"running_qemu"`
	Differs     []string         `json:"differs"`
}

// Applied is a change and what QEMU reported after it.
type Applied struct {
	Method    Method `json:"method"`  // qom-set, block_set_io_throttle, qm set
	Command   string `json:"command"` // the QMP command (JSON) or the qm argv
	DryRun    bool   `json:"dry_run"`
	Persisted bool   `json:"persisted"`
	Before    Set    `json:"before"`
	After     Set    `json:"after"` // read back from QEMU; null when not read
	Confirmed bool   `json:"confirmed"`
	// Unchanged: the values asked for are the ones already in effect
	// (running, and with --persist in the config too): nothing was sent
	// or saved; After is Before.
	Unchanged bool   `json:"unchanged"`
	Output    string `json:"output,omitempty"` // qm's stdout
}

// Verification is a --verify window and its verdicts.
type Verification struct {
	WindowS  float64 `json:"window_s"`
	SkippedS float64 `json:"skipped_s"` // start of the window not judged
	SteadyS  float64 `json:"steady_s"`  // span the rates cover
	// SampledS is how much of the steady part the verdicts stand on: the
	// steady part less the spans without a sample (Gaps).
	SampledS float64 `json:"sampled_s"`
	Samples  int     `json:"samples"`
	Missed   int     `json:"missed"` // ticks lost to a busy socket or a slow QEMU
	// Gaps are the spans of the window without a sample (seconds from its
	// start): where ticks were missed.
	Gaps []Gap `json:"gaps"`
	// Measured are the rates over the steady part (null when fewer than
	// two samples reached it: a window cut short).
	Measured *Measured `json:"measured"`
	// Latency are the steady part's latency percentiles from the disk's
	// histogram (--histogram); omitted without one.
	Latency   *latency.Percentiles `json:"latency_percentiles,omitempty"`
	Verdicts  []Judgement          `json:"verdicts"`
	ChangedTo Set                  `json:"running_changed_to,omitempty"` // limits found at the end when they changed during the window
	// Cut is set when the window ended early; everything above is what
	// was measured until then.
	Cut *Cut `json:"cut,omitempty"`
}

// Cut is where and why a --verify window ended early: QEMU stopped
// answering (the process exited, its socket failed) or the run was
// interrupted (Why "interrupted").
type Cut struct {
	AtS float64 `json:"at_s"` // the last sample, in seconds from the window's start
	Why string  `json:"why"`
}

// Gap is a span of the window without a sample, between the samples (or
// the window's edges) around it, in seconds from the window's start.
type Gap struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
}

// Measured are the disk's rates over the steady part.
type Measured struct {
	ReadBps         float64 `json:"read_bps"`
	WriteBps        float64 `json:"write_bps"`
	ReadIOPS        float64 `json:"read_iops"`
	WriteIOPS       float64 `json:"write_iops"`
	ReadLatencyMs   float64 `json:"read_latency_ms"`
	WriteLatencyMs  float64 `json:"write_latency_ms"`
	ReadQueueDepth  float64 `json:"read_queue_depth"`
	WriteQueueDepth float64 `json:"write_queue_depth"`
}

// Judgement is one rate limit's verdict.
type Judgement struct {
	Limit              string   `json:"limit"`    // Proxmox key
	Value              float64  `json:"value"`    // in Proxmox units
	Unit               string   `json:"unit"`     // MiB/s or ops/s
	Measured           float64  `json:"measured"` // same unit
	Ratio              float64  `json:"ratio"`    // measured / value
	Allowed            float64  `json:"allowed"`  // highest value that still holds
	QueueDepth         float64  `json:"queue_depth"`
	LatencyMs          float64  `json:"latency_ms"`
	PredictedLatencyMs *float64 `json:"predicted_latency_ms"`
	Verdict            Verdict  `json:"verdict"` // holds, not-binding, exceeded
	Reason             string   `json:"reason"`
}
