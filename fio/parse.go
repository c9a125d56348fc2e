// Package fio reads fio's --output-format=json and json+ files and turns
// repeated runs into the table Lab 19 prints (mean with the spread between
// runs), with the pitfalls that make a benchmark number lie, and compares two
// configurations only as far as the spread between runs allows.
//
// Parse, Summarize and Compare are pure; Load, ReadFiles and ListFiles do the I/O.
package fio

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// Errors Parse wraps, so callers can tell an empty file from a cut one.
var (
	ErrEmpty     = errors.New("empty file")
	ErrNoJSON    = errors.New("no JSON object in it (not fio --output-format=json output?)")
	ErrTruncated = errors.New("JSON ends before its closing brace (truncated: fio killed or disk full?)")
	ErrMalformed = errors.New("not valid JSON")
	ErrNotFio    = errors.New("no jobs[] array (not fio JSON output?)")
)

// quoteLen is how much of a file's own text an error or warning quotes:
// enough to recognise the line, never the kilobytes a broken file can hold.
const quoteLen = 120

// Result is one fio JSON output (one run of fio).
type Result struct {
	File      string // path as given
	Version   string // "fio version", e.g. "fio-3.33"
	Timestamp int64  // Unix seconds when fio finished, 0 when fio printed none (before 2.2.5)
	Jobs      []Job
	// Notes are fio's own "fio: ..." lines printed before the JSON, such as
	// "fio: pid=31920, err=28/file:io_u.c:1876, func=io_u error, error=No space
	// left on device" or "fio: terminating on signal 2", each cut to quoteLen.
	Notes []string
}

// Job is one entry of jobs[]. With numjobs>1 and no group_reporting fio prints
// one entry per clone, all with the same name.
type Job struct {
	Name    string
	Options map[string]string // "global options" overlaid with "job options", as fio printed them
	Error   int               // fio's error number (errno) for the job, 0 when it ran fine
	// ErrorText is fio's own line about Error from the text before the JSON
	// ("fio: pid=..., err=28/file:..., error=No space left on device"), "" when
	// the file does not have it (fio's --output=FILE sends it to the terminal).
	ErrorText string
	// IOErrors is fio's total_err: I/O errors it counted and went on past
	// (continue_on_error); FirstIOError is the errno of the first.
	IOErrors     int64
	FirstIOError int
	Read         IOStats
	Write        IOStats
	Trim         IOStats
	Mixed        IOStats   // unified_rw_reporting: reads, writes and trims as one
	Sync         SyncStats // fsync/fdatasync calls (fsync=N jobs)
}

// IOStats is one direction of a job, in one set of units whatever fio
// version wrote it. A value fio did not print, or printed as unknown (-1, a
// wrapped unsigned, NaN), is 0.
type IOStats struct {
	TotalIOs     int64   // 0 before fio 2.1.14, which did not print it
	IOBytes      int64   // bytes (fio before 2.21 printed KiB under "io_bytes")
	BandwidthBps float64 // bytes/s: fio's bw_bytes (3.2+), else io_bytes/runtime, else its rounded bw (KiB/s)
	IOPS         float64
	RuntimeMs    int64   // time measured, ramp_time excluded
	ClatMeanNs   float64 // completion latency: submission to completion
	LatMeanNs    float64 // total latency: slat + clat
	P99Ns        float64 // 99th percentile of the latency named by P99Of
	P99Of        string  // "clat" (fio's default), "lat" (lat_percentiles=1), "" when fio printed none
}

// HasIO reports whether the direction measured something: a runtime, I/Os
// and bytes. A job that failed before its first I/O has none in any direction.
func (s *IOStats) HasIO() bool {
	return s.RuntimeMs > 0 && s.IOPS > 0 && s.BandwidthBps > 0
}

// SyncStats is fio's "sync" object (fio 3.4+): the fsync (or fdatasync) calls of a job.
type SyncStats struct {
	TotalIOs  int64
	LatMeanNs float64
	LatP99Ns  float64
}

// Dir returns the stats of direction "read", "write", "trim" or "mixed".
func (j *Job) Dir(dir string) *IOStats {
	switch dir {
	case "read":
		return &j.Read
	case "write":
		return &j.Write
	case "trim":
		return &j.Trim
	case "mixed":
		return &j.Mixed
	}
	return nil
}

// Dirs are the directions fio reports, in its order; "mixed" replaces the
// others with unified_rw_reporting=1 (and comes beside them with =both).
var Dirs = []string{"read", "write", "trim", "mixed"}

// Units by fio version, from fio's own history of stat.c:
//   - fio 2.99/3.0 (commit d6bb626e, "nanosecond: update completion latency
//     recording and normal, json output to use nanoseconds") renamed the
//     latency objects slat/clat/lat (µs, their percentiles too) to
//     slat_ns/clat_ns/lat_ns (ns). The key says the unit.
//   - fio 2.21 (commit c12d597a, "stat: correct json 'io_bytes' output")
//     made io_bytes bytes and added io_kbytes; before, io_bytes was KiB.
//     The key name does not say it: the version (or io_kbytes) does.
//   - fio 3.2 (commit aedd021d, "stat: add bw_bytes JSON key") added
//     bw_bytes; bw has always been KiB/s rounded down per job.
//   - fio 2.1.14 (commit 9966af7b) added total_ios.
var versionRE = regexp.MustCompile(`^fio-(\d+)\.(\d+)`)

// ioBytesInKiB says whether a file's io_bytes are KiB (fio before 2.21).
// Without a version it goes by what is there: io_kbytes (2.21+) or clat_ns
// (3.0+) mean bytes.
func ioBytesInKiB(version string, dir gjson.Result) bool {
	if m := versionRE.FindStringSubmatch(version); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		return major < 2 || major == 2 && minor < 21
	}
	return !dir.Get("io_kbytes").Exists() && !dir.Get("clat_ns").Exists()
}

// Parse reads the first fio JSON output in data; see ParseAll.
func Parse(file string, data []byte) (*Result, error) {
	rs, err := ParseAll(file, data)
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// ParseAll reads every fio JSON output in data, in order. fio may print lines
// before the JSON (notes such as "note: both iodepth >= 1 and synchronous I/O
// engine...", its error lines, "fio: terminating on signal 2") and its normal
// report after it (--output-format=json,normal); a shell may leave a prompt
// character before the brace. A file holding several outputs (runs appended
// with >>) gives one Result each; a byte-identical copy is read once. Errors
// name file and quote at most quoteLen bytes of it.
func ParseAll(file string, data []byte) ([]*Result, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: %w", file, ErrEmpty)
	}
	var out []*Result
	var seen [][]byte
	for off := 0; ; {
		start := jsonStart(data[off:], len(out) == 0)
		if start < 0 {
			if len(out) == 0 {
				first, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
				return nil, fmt.Errorf("%s: %w; it starts with %s", file, ErrNoJSON, units.Clip(first, quoteLen))
			}
			return out, nil
		}
		start += off
		which := ""
		if len(out) > 0 {
			which = fmt.Sprintf(" (fio output %d in the file)", len(out)+1)
		}
		n, closed := objectLen(data[start:])
		if !closed {
			return nil, fmt.Errorf("%s%s: %w", file, which, ErrTruncated)
		}
		doc := data[start : start+n]
		if !gjson.ValidBytes(doc) {
			return nil, fmt.Errorf("%s%s: %w", file, which, ErrMalformed)
		}
		dup := false
		for _, s := range seen {
			dup = dup || bytes.Equal(s, doc)
		}
		if !dup {
			r, err := parseDoc(file, doc, notes(data[off:start]))
			if err != nil {
				return nil, fmt.Errorf("%s%s: %w", file, which, err)
			}
			out = append(out, r)
			seen = append(seen, doc)
		}
		off = start + n
	}
}

func parseDoc(file string, doc []byte, notes []string) (*Result, error) {
	// One pass over each object (ForEach) rather than a Get per field: a
	// Get scans from the start of its object, and json+ objects carry
	// latency bins that would be skipped again for every field.
	r := &Result{File: file, Notes: notes}
	var global, jobs gjson.Result
	gjson.ParseBytes(doc).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "fio version":
			r.Version = v.String()
		case "timestamp":
			r.Timestamp = int64(number(v))
		case "global options":
			global = v
		case "jobs":
			jobs = v
		}
		return true
	})
	if !jobs.IsArray() {
		return nil, ErrNotFio
	}
	jobs.ForEach(func(_, j gjson.Result) bool {
		job := Job{Options: map[string]string{}}
		var opts gjson.Result
		j.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "jobname":
				job.Name = v.String()
			case "error":
				job.Error = int(number(v))
			case "total_err":
				job.IOErrors = int64(number(v))
			case "first_error":
				job.FirstIOError = int(number(v))
			case "job options":
				opts = v
			case "read", "write", "trim", "mixed":
				*job.Dir(k.Str) = ioStats(v, ioBytesInKiB(r.Version, v))
			case "sync":
				job.Sync = SyncStats{
					TotalIOs:  int64(number(v.Get("total_ios"))),
					LatMeanNs: rate(v.Get("lat_ns.mean")),
					LatP99Ns:  rate(percentile99(v.Get("lat_ns.percentile"))),
				}
			}
			return true
		})
		for _, o := range []gjson.Result{global, opts} {
			o.ForEach(func(k, v gjson.Result) bool {
				job.Options[k.String()] = v.String()
				return true
			})
		}
		job.ErrorText = errorLine(notes, job.Error)
		r.Jobs = append(r.Jobs, job)
		return true
	})
	return r, nil
}

// maxValue bounds every number read: fio prints counters as unsigned 64-bit
// and writes -1 (or its unsigned wrap) for "unknown"; above 2^62 nothing is a
// measurement.
const maxValue = 1 << 62

// number is a JSON number that can be a measurement (finite, 0 to maxValue),
// else 0: unknown.
func number(v gjson.Result) float64 {
	f := v.Num
	if v.Type != gjson.Number || math.IsNaN(f) || f < 0 || f > maxValue {
		return 0
	}
	return f
}

// minRate is the smallest rate or latency taken as measured; below it a
// value is a rounding artefact (or a hostile 1e-300), and keeping it would
// let a spread in % of the mean overflow.
const minRate = 1e-9

// rate is number for the values statistics are taken of: IOPS, bandwidth,
// latencies. Below minRate it is 0: not measured.
func rate(v gjson.Result) float64 {
	if f := number(v); f >= minRate {
		return f
	}
	return 0
}

// percentile99 is the 99th percentile in a fio percentile object: the key is
// "99.000000" since fio 2.0.14 ("%f", commit 435d195a) and "99.00" before
// ("%2.2f", fio 2.0.10 to 2.0.13: fio2/fio-2.0.13-*.json).
func percentile99(p gjson.Result) gjson.Result {
	var out gjson.Result
	p.ForEach(func(k, v gjson.Result) bool {
		if f, err := strconv.ParseFloat(k.Str, 64); err == nil && f == 99 {
			out = v
			return false
		}
		return true
	})
	return out
}

func ioStats(d gjson.Result, kib bool) IOStats {
	var s IOStats
	var bw, bwBytes, ioBytes, iops float64
	lat := map[string]gjson.Result{}
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "total_ios":
			s.TotalIOs = int64(number(v))
		case "io_bytes":
			ioBytes = number(v)
		case "bw":
			bw = rate(v)
		case "bw_bytes":
			bwBytes = rate(v)
		case "iops":
			iops = rate(v)
		case "runtime":
			s.RuntimeMs = int64(number(v))
		case "clat_ns", "lat_ns", "clat", "lat":
			lat[k.Str] = v
		}
		return true
	})
	if kib {
		ioBytes *= 1024
	}
	s.IOBytes = int64(min(ioBytes, maxValue))
	// fio's own formulas: iops = total_ios*1000/runtime, bw_bytes =
	// io_bytes*1000/runtime; the printed iops stands unless it is unknown.
	runtime := float64(s.RuntimeMs) / 1000
	s.IOPS = iops
	if s.IOPS == 0 && s.TotalIOs > 0 && runtime > 0 {
		s.IOPS = float64(s.TotalIOs) / runtime
	}
	switch {
	case bwBytes > 0:
		s.BandwidthBps = bwBytes
	case ioBytes > 0 && runtime > 0:
		s.BandwidthBps = ioBytes / runtime
	default:
		s.BandwidthBps = bw * 1024
	}
	// µs before ns, so that a file with both (none known) reads the ns; the
	// percentile of clat goes before that of lat, as fio prints it.
	var clatP99, latP99 float64
	for _, k := range []string{"clat", "lat", "clat_ns", "lat_ns"} {
		v, ok := lat[k]
		if !ok {
			continue
		}
		scale := 1.0
		if !strings.HasSuffix(k, "_ns") {
			scale = 1000
		}
		mean := rate(v.Get("mean")) * scale
		p99 := rate(percentile99(v.Get("percentile"))) * scale
		if strings.HasPrefix(k, "clat") {
			s.ClatMeanNs = mean
			clatP99 = max(clatP99, p99)
		} else {
			s.LatMeanNs = mean
			latP99 = max(latP99, p99)
		}
	}
	switch {
	case clatP99 > 0:
		s.P99Ns, s.P99Of = clatP99, "clat"
	case latP99 > 0:
		s.P99Ns, s.P99Of = latP99, "lat"
	}
	return s
}

// errorLine is fio's own line about errno n among notes ("fio: pid=..., err=n/..."), or "".
func errorLine(notes []string, n int) string {
	if n == 0 {
		return ""
	}
	mark := "err=" + strconv.Itoa(n) + "/"
	for _, l := range notes {
		if strings.Contains(l, mark) {
			return l
		}
	}
	return ""
}

// maxNotes bounds the "fio: ..." lines kept from the text before a JSON output.
const maxNotes = 8

// notes are the "fio: ..." lines of the text before a JSON output, each cut to quoteLen.
func notes(text []byte) []string {
	var out []string
	for _, l := range strings.Split(string(text), "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "fio: ") || len(out) == maxNotes {
			continue
		}
		if len(l) > quoteLen {
			l = l[:quoteLen] + "..."
		}
		out = append(out, l)
	}
	return out
}

// jsonStart is the offset of the first line that starts with '{' (after
// blanks), or, when loose, of an earlier '{' that opens an object with a
// string key: a prompt character before the brace (">{"). -1 when there is none.
func jsonStart(data []byte, loose bool) int {
	start := -1
	for off := 0; off < len(data); {
		line := data[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if t := bytes.TrimLeft(line, " \t\r"); len(t) > 0 && t[0] == '{' {
			start = off + len(line) - len(t)
			break
		}
		off += len(line)
	}
	end := start
	if end < 0 {
		end = len(data)
	}
	for off := 0; loose && off < end; off++ {
		if data[off] == '{' {
			if t := bytes.TrimLeft(data[off+1:], " \t\r\n"); len(t) > 0 && t[0] == '"' {
				return off
			}
		}
	}
	return start
}

// objectLen is the length of the JSON value that starts data (a '{'), up to
// its closing brace; closed is false when the data ends inside it: what a
// cut file looks like, as opposed to one that is wrong inside.
func objectLen(data []byte) (n int, closed bool) {
	depth, inString, escaped := 0, false, false
	for i, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(data), false
}

// ParseSize reads a fio size option ("2G", "256m", "4096", "1GiB") in bytes;
// fio's suffixes are powers of 1024 by default (kb_base=1024). ok is false for
// forms it cannot know from the file alone, such as "50%", and for sizes past
// what an int64 holds.
func ParseSize(s string) (n int64, ok bool) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, false
	}
	unit := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s[i:])), "b")
	unit = strings.TrimSuffix(unit, "i")
	shift, ok := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}[unit]
	if !ok {
		return 0, false
	}
	if b := f * float64(uint64(1)<<shift); b < maxValue {
		return int64(b), true
	}
	return 0, false
}

// ReadFile reads and parses the first fio output of one file.
func ReadFile(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	return Parse(path, data)
}

// readAll reads and parses every fio output of one file.
func readAll(path string) ([]*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseAll(path, data)
}

// ReadFiles parses paths in parallel, keeping their order (a file holding
// several fio outputs gives several results). A file that cannot be read or
// parsed becomes one "unreadable" warning; the others are returned.
func ReadFiles(paths []string) ([]*Result, []Warning) {
	results := make([][]*Result, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = readAll(paths[i])
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	var ok []*Result
	var warns []Warning
	for i, rs := range results {
		if errs[i] != nil {
			warns = append(warns, Warning{File: paths[i], Code: WarnUnreadable, Message: errs[i].Error()})
			continue
		}
		ok = append(ok, rs...)
	}
	return ok, warns
}

// ListFiles expands directories to the *.json files directly inside them
// (sorted); other paths are kept as given. A path that does not exist is an error.
func ListFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	return files, nil
}
