package fakenode

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// LoadSpec is a queue of qemu-io requests kept in flight on one disk through
// HMP (`human-monitor-command` `qemu-io -d <qdev> "aio_write ..."`), the
// guest-less stand-in for fio: the requests go through the device's own
// BlockBackend, so they are throttled and counted in its query-blockstats.
// aio_flush is never used: it drains the queue and bypasses throttling.
type LoadSpec struct {
	Disk   string        // qdev id: scsi1, virtio1, sata1
	Write  bool          // aio_write (pattern 0x5a: non-zero, so detect-zeroes keeps it) or aio_read
	Size   int64         // bytes per request; 0 means 1 MiB
	Depth  int           // requests kept in flight; 0 means 8
	Span   int64         // bytes of the disk the offsets cover; 0 means 128 MiB
	Random bool          // random offsets aligned to Size; else sequential, wrapping
	Every  time.Duration // pause between refills; 0 means 20 ms (a Load with several specs uses the shortest)
}

// LoadStats says what the generator managed to do.
type LoadStats struct {
	Submitted int           // aio requests issued
	Exchanges int           // QMP exchanges (one connect each)
	Waited    time.Duration // total time spent waiting for a busy socket
	Err       error         // the error that stopped it early, if any
	// Queues is Submitted per LoadSpec, in StartLoad's order, as of the
	// last exchange: with the disk's completed counters read by the next
	// client of the socket it gives each queue's true depth.
	Queues []int
}

// Load is a running load generator.
type Load struct {
	specs  []LoadSpec
	socket string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	stats  LoadStats
}

// StartLoad starts keeping each spec's queue on the VM's disks until Stop.
// Between refills it disconnects, so other QMP clients (the sampler under
// test, Proxmox's daemons on a node) get the socket: each refill is one
// short exchange that reads the completed-request counters from
// query-blockstats and tops every queue up with a batch of aio_* commands.
// Several queues in one generator share that exchange (HMP qemu-io costs
// 0.4-0.8 ms per command under TCG, the connect and query-blockstats about
// as much again).
func (vm *VM) StartLoad(specs ...LoadSpec) *Load {
	every := time.Duration(0)
	for i := range specs {
		sp := &specs[i]
		if sp.Size == 0 {
			sp.Size = 1 << 20
		}
		if sp.Depth == 0 {
			sp.Depth = 8
		}
		if sp.Span == 0 {
			sp.Span = 128 << 20
		}
		if sp.Every == 0 {
			sp.Every = 20 * time.Millisecond
		}
		if every == 0 || sp.Every < every {
			every = sp.Every
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{specs: specs, socket: vm.node.Paths.QMPSocket(vm.VMID), cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, every)
	return l
}

// Stop ends the generator (requests in flight still complete in QEMU) and
// returns its statistics.
func (l *Load) Stop() LoadStats {
	l.cancel()
	<-l.done
	return l.Stats()
}

// Stats returns the statistics so far (as of the last finished exchange).
func (l *Load) Stats() LoadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.Queues = append([]int(nil), l.stats.Queues...)
	return st
}

type queue struct {
	sp        LoadSpec
	dir, cmd  string
	next      int64
	baseline  int64
	submitted int64
}

func (l *Load) run(ctx context.Context, every time.Duration) {
	defer close(l.done)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var qs []*queue
	for _, sp := range l.specs {
		q := &queue{sp: sp, dir: "rd", cmd: "aio_read -q", baseline: -1}
		if sp.Write {
			q.dir, q.cmd = "wr", "aio_write -q -P 0x5a"
		}
		qs = append(qs, q)
	}
	for ctx.Err() == nil {
		start := time.Now()
		var waited time.Duration
		// A reply may take as long as QEMU is stopped (SIGSTOP in fault
		// tests): wait up to 10 s rather than end the load.
		err := qmp.DoRetry(ctx, l.socket, 10*time.Second, 10*time.Second, func(s qmp.Session) error {
			waited = time.Since(start)
			ret, err := s.Exec("query-blockstats", nil)
			if err != nil {
				return err
			}
			for _, q := range qs {
				done := int64(-1)
				for _, e := range ret.Array() {
					if qmp.QdevToDiskID(e.Get("qdev").String()) == q.sp.Disk || e.Get("device").String() == "drive-"+q.sp.Disk {
						done = completed(e.Get("stats"), q.dir)
					}
				}
				if done < 0 {
					return fmt.Errorf("load: disk %s not in query-blockstats", q.sp.Disk)
				}
				if q.baseline < 0 {
					q.baseline = done
				}
				slots := q.sp.Span / q.sp.Size
				for i := q.submitted - (done - q.baseline); i < int64(q.sp.Depth); i++ {
					slot := q.next % slots
					q.next++
					if q.sp.Random {
						slot = rng.Int63n(slots)
					}
					line := fmt.Sprintf(`qemu-io -d %s "%s %d %d"`, q.sp.Disk, q.cmd, slot*q.sp.Size, q.sp.Size)
					r, err := s.Exec("human-monitor-command", map[string]any{"command-line": line})
					if err != nil {
						return err
					}
					if msg := r.String(); msg != "" {
						return fmt.Errorf("load: %s: %s", line, msg) // HMP reports errors as text
					}
					q.submitted++
				}
			}
			// Before the socket is free again: a client that gets it next
			// sees counters and Queues of the same moment.
			l.mu.Lock()
			l.stats.Queues = l.stats.Queues[:0]
			for _, q := range qs {
				l.stats.Queues = append(l.stats.Queues, int(q.submitted))
			}
			l.mu.Unlock()
			return nil
		})
		l.mu.Lock()
		l.stats.Exchanges++
		l.stats.Submitted = 0
		for _, q := range qs {
			l.stats.Submitted += int(q.submitted)
		}
		l.stats.Waited += waited
		if err != nil && ctx.Err() == nil {
			l.stats.Err = err
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// completed counts requests of one direction that QEMU finished, whatever
// their outcome.
func completed(st gjson.Result, dir string) int64 {
	return st.Get(dir+"_operations").Int() + st.Get("failed_"+dir+"_operations").Int() + st.Get("invalid_"+dir+"_operations").Int()
}
