// Package fio reads fio's --output-format=json and json+ files and turns
// repeated runs into the table Lab 19 prints (mean with the spread between
// runs), with the pitfalls that make a benchmark number lie, and compares two
// configurations only as far as the spread between runs allows.
//
// Parse, Summarize and Compare are pure; ReadFiles and ListFiles do the I/O.
package fio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Errors Parse wraps, so callers can tell an empty file from a cut one.
var (
	ErrEmpty     = errors.New("empty file")
	ErrNoJSON    = errors.New("no JSON object in it (not fio --output-format=json output?)")
	ErrTruncated = errors.New("JSON ends before its closing brace (truncated: fio killed or disk full?)")
	ErrMalformed = errors.New("not valid JSON")
	ErrNotFio    = errors.New("no jobs[] array (not fio JSON output?)")
)

// Result is one fio JSON output file.
type Result struct {
	File      string // path as given
	Version   string // "fio version", e.g. "fio-3.33"
	Timestamp int64  // Unix seconds when fio finished
	Jobs      []Job
}

// Job is one entry of jobs[]. With numjobs>1 and no group_reporting fio prints
// one entry per clone, all with the same name.
type Job struct {
	Name    string
	Options map[string]string // "global options" overlaid with "job options", as fio printed them
	Error   int               // fio's error number for the job, 0 when it ran fine
	Read    IOStats
	Write   IOStats
	Trim    IOStats
	Sync    SyncStats // fsync/fdatasync calls (fsync=N jobs)
}

// IOStats is one direction (read, write or trim) of a job.
type IOStats struct {
	TotalIOs       int64
	IOBytes        int64
	BandwidthKiBps float64 // fio's "bw"
	IOPS           float64
	RuntimeMs      int64   // time measured, ramp_time excluded
	ClatMeanNs     float64 // completion latency: submission to completion
	LatMeanNs      float64 // total latency: slat + clat
	P99Ns          float64 // 99th percentile of the latency named by P99Of
	P99Of          string  // "clat" (fio's default), "lat" (lat_percentiles=1), "" when fio printed none
}

// SyncStats is fio's "sync" object: the fsync (or fdatasync) calls of a job.
type SyncStats struct {
	TotalIOs  int64
	LatMeanNs float64
	LatP99Ns  float64
}

// Dir returns the stats of direction "read", "write" or "trim".
func (j *Job) Dir(dir string) *IOStats {
	switch dir {
	case "read":
		return &j.Read
	case "write":
		return &j.Write
	case "trim":
		return &j.Trim
	}
	return nil
}

// Dirs are the directions fio reports, in its order.
var Dirs = []string{"read", "write", "trim"}

// Parse reads one fio JSON output. fio may print lines before the JSON (notes
// such as "note: both iodepth >= 1 and synchronous I/O engine..." when its
// stdout is redirected); they are skipped. Errors name file.
func Parse(file string, data []byte) (*Result, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: %w", file, ErrEmpty)
	}
	start := jsonStart(data)
	if start < 0 {
		first, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if len(first) > 120 {
			first = first[:120] + "..."
		}
		return nil, fmt.Errorf("%s: %w; it starts with %q", file, ErrNoJSON, first)
	}
	// The object ends at the last '}': text after it (fio's normal output
	// with --output-format=json,normal) holds no braces.
	end := bytes.LastIndexByte(data, '}') + 1
	if end <= start || !gjson.ValidBytes(data[start:end]) {
		if unclosed(data[start:]) {
			return nil, fmt.Errorf("%s: %w", file, ErrTruncated)
		}
		return nil, fmt.Errorf("%s: %w", file, ErrMalformed)
	}
	// One pass over each object (ForEach) rather than a Get per field: a
	// Get scans from the start of its object, and json+ objects carry
	// latency bins that would be skipped again for every field.
	r := &Result{File: file}
	var global, jobs gjson.Result
	gjson.ParseBytes(data[start:end]).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "fio version":
			r.Version = v.String()
		case "timestamp":
			r.Timestamp = v.Int()
		case "global options":
			global = v
		case "jobs":
			jobs = v
		}
		return true
	})
	if !jobs.IsArray() {
		return nil, fmt.Errorf("%s: %w", file, ErrNotFio)
	}
	jobs.ForEach(func(_, j gjson.Result) bool {
		job := Job{Options: map[string]string{}}
		var opts gjson.Result
		j.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "jobname":
				job.Name = v.String()
			case "error":
				job.Error = int(v.Int())
			case "job options":
				opts = v
			case "read":
				job.Read = ioStats(v)
			case "write":
				job.Write = ioStats(v)
			case "trim":
				job.Trim = ioStats(v)
			case "sync":
				job.Sync = SyncStats{
					TotalIOs:  v.Get("total_ios").Int(),
					LatMeanNs: v.Get("lat_ns.mean").Float(),
					LatP99Ns:  v.Get(`lat_ns.percentile.99\.000000`).Float(),
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
		r.Jobs = append(r.Jobs, job)
		return true
	})
	return r, nil
}

func ioStats(d gjson.Result) IOStats {
	var s IOStats
	var clatP99, latP99 gjson.Result
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "total_ios":
			s.TotalIOs = v.Int()
		case "io_bytes":
			s.IOBytes = v.Int()
		case "bw":
			s.BandwidthKiBps = v.Float()
		case "iops":
			s.IOPS = v.Float()
		case "runtime":
			s.RuntimeMs = v.Int()
		case "clat_ns":
			s.ClatMeanNs = v.Get("mean").Float()
			clatP99 = v.Get(`percentile.99\.000000`)
		case "lat_ns":
			s.LatMeanNs = v.Get("mean").Float()
			latP99 = v.Get(`percentile.99\.000000`)
		}
		return true
	})
	if clatP99.Exists() {
		s.P99Ns, s.P99Of = clatP99.Float(), "clat"
	} else if latP99.Exists() {
		s.P99Ns, s.P99Of = latP99.Float(), "lat"
	}
	return s
}

// jsonStart is the offset of the first line that starts with '{', or -1.
func jsonStart(data []byte) int {
	for off := 0; off < len(data); {
		line := data[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if t := bytes.TrimLeft(line, " \t\r"); len(t) > 0 && t[0] == '{' {
			return off + len(line) - len(t)
		}
		off += len(line)
	}
	return -1
}

// unclosed reports whether JSON text ends inside a string, object or array:
// what a cut file looks like, as opposed to one that is wrong inside.
func unclosed(data []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
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
		}
	}
	return inString || depth > 0
}

// ParseSize reads a fio size option ("2G", "256m", "4096", "1GiB") in bytes;
// fio's suffixes are powers of 1024 by default (kb_base=1024). ok is false for
// forms it cannot know from the file alone, such as "50%".
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
	return int64(f * float64(uint64(1)<<shift)), true
}

// ReadFile reads and parses one file.
func ReadFile(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	return Parse(path, data)
}

// ReadFiles parses paths in parallel, keeping their order. A file that cannot
// be read or parsed becomes one "unreadable" warning; the others are returned.
func ReadFiles(paths []string) ([]*Result, []Warning) {
	results := make([]*Result, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = ReadFile(paths[i])
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
	for i, r := range results {
		if errs[i] != nil {
			warns = append(warns, Warning{File: paths[i], Code: WarnUnreadable, Message: errs[i].Error()})
			continue
		}
		ok = append(ok, r)
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
