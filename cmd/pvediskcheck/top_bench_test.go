package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// BenchmarkTop50VMs: the built binary's own CPU per second while `top
// --json` samples 50 running VMs of 4 disks each at 1 Hz (real QEMU
// processes, VirtIO SCSI single with iothreads), next to the CPU of the
// same QMP exchanges alone (query-blockstats, query-block-jobs and the
// limits per VM and second, done in this process) and next to the floor:
// the same commands sent by a client that reads the replies as lines and
// nothing more (rawQMP), all measured in the same run. Targets: the tool
// at most 1.5x the floor; under 2 % of one core. Each iteration is one sample
// (one second); at least 10. The commands per VM and sample are counted by
// top's BenchmarkCommandsPerVM (QEMU 7.2 and 11.1 replies, 4 and 15 disks).
func BenchmarkTop50VMs(b *testing.B) {
	n := topBenchNode(b, "", nil)
	const vms = topBenchVMs
	bin := buildBinary(b)
	samples := max(b.N, 10)
	b.ResetTimer()

	// The tool: its own CPU time (user + system, from the kernel's
	// accounting of the child) over its wall time.
	cmd := exec.Command(bin, "--root", n.Root, "--json", "top", "--interval", "1s", "--count", sf("%d", samples))
	t0 := time.Now()
	out, err := cmd.Output()
	wall := time.Since(t0)
	if err != nil || strings.Count(string(out), "\n") != samples || !strings.Contains(string(out), `"vmid":649`) {
		b.Fatalf("top: %v %.300s", err, out)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	toolPct := float64(cpu) / float64(wall) * 100

	// The same exchanges alone, at 1 Hz for as many seconds.
	var ru0, ru1 syscall.Rusage
	newer := false
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 = time.Now()
	for s := 0; s <= samples; s++ {
		due := t0.Add(time.Duration(s) * time.Second)
		time.Sleep(time.Until(due))
		for v := 0; v < vms; v++ {
			err := qmp.Do(context.Background(), n.Paths.QMPSocket(600+v), 5*time.Second, func(s qmp.Session) error {
				if _, err := s.Exec("query-blockstats", nil); err != nil {
					return err
				}
				if _, err := s.Exec("query-block-jobs", nil); err != nil {
					return err
				}
				newer = s.HasQOMListGet()
				ask := []string{sf("scsi%d", s0(v))}
				if newer {
					ask = []string{"scsi0", "scsi1", "scsi2", "scsi3"} // top's one qom-list-get
				}
				_, err := s.ReadDiskProps(nil, ask)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	bareWall := time.Since(t0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	bareCPU := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	barePct := float64(bareCPU) / float64(bareWall) * 100

	// The floor: the same commands sent by a client that reads the replies
	// as lines and nothing more (rawQMP), at 1 Hz for as many seconds.
	limits := func(v int) string {
		return qomGet(qmp.ThrottleGroupID(sf("scsi%d", s0(v))), "limits") // as ReadDiskProps asks one group
	}
	if newer {
		paths := `"/objects/throttle-drive-scsi0","/objects/throttle-drive-scsi1","/objects/throttle-drive-scsi2","/objects/throttle-drive-scsi3"`
		limits = func(int) string { return `{"execute":"qom-list-get","arguments":{"paths":[` + paths + `]}}` }
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 = time.Now()
	for s := 0; s <= samples; s++ {
		due := t0.Add(time.Duration(s) * time.Second)
		time.Sleep(time.Until(due))
		for v := 0; v < vms; v++ {
			if err := rawQMP(n.Paths.QMPSocket(600+v), `{"execute":"query-blockstats"}`, `{"execute":"query-block-jobs"}`, limits(v)); err != nil {
				b.Fatal(err)
			}
		}
	}
	floorWall := time.Since(t0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	floorCPU := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	floorPct := float64(floorCPU) / float64(floorWall) * 100
	b.StopTimer()
	b.ReportMetric(toolPct, "tool-cpu-%")
	b.ReportMetric(barePct, "qmp-alone-cpu-%")
	b.ReportMetric(floorPct, "floor-cpu-%")
	b.ReportMetric(toolPct/floorPct, "tool/floor")
	b.Logf("%s: top --json at 1 Hz, %d VMs x 4 disks, %d samples: the tool used %.2f %% of one core (%s CPU in %s); the QMP exchanges alone %.2f %% (%s in %s); a client reading the replies as lines %.2f %% (%s in %s); tool/floor %.2f (target <= 1.5); goal < 2 %%",
		qemuName(b), vms, samples, toolPct, cpu.Round(time.Millisecond), wall.Round(time.Millisecond), barePct, bareCPU.Round(time.Millisecond), bareWall.Round(time.Millisecond),
		floorPct, floorCPU.Round(time.Millisecond), floorWall.Round(time.Millisecond), toolPct/floorPct)
}

// s0 spreads the per-object limit reads over the disks, as top does
// before QEMU 10.1.
func s0(v int) int { return v % 4 }
