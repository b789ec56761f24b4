//go:build linux

package bash

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkTrue measures the cost of one short command from start to settlement:
// the producer in each containment mode (pipe, cgroup or sweep, monitor, drain)
// against plain os/exec running the same `bash -c /bin/true` (and /bin/true alone,
// for scale), with 0 and 2,000 idle processes on the machine.
func BenchmarkTrue(b *testing.B) {
	for _, idle := range []int{0, 2000} {
		stop, err := idleProcesses(idle)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []Containment{CgroupContainment, SweepContainment} {
			b.Run(fmt.Sprintf("idle=%d/impl=producer/mode=%s", idle, mode), func(b *testing.B) {
				p := New(WithSpillDir(b.TempDir()), WithContainment(mode))
				if p.startErr != nil {
					b.Skip(p.startErr)
				}
				for b.Loop() {
					h, err := p.Start(Command{Command: "/bin/true"})
					if err != nil {
						b.Fatal(err)
					}
					if o := <-h.Done; o.Detail != "exit code: 0" {
						b.Fatalf("outcome %+v", o)
					}
					h.Release()
				}
			})
		}
		b.Run(fmt.Sprintf("idle=%d/impl=exec", idle), func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("/bin/bash", "-c", "/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("idle=%d/impl=exec-direct", idle), func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := stop(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanProcs measures one /proc scan, the unit of a sweep; a task with no
// leftovers costs one scan (shared with every task settling at the same moment).
func BenchmarkScanProcs(b *testing.B) {
	for b.Loop() {
		procs, err := scanProcs()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(procs)), "procs")
	}
}

// idleProcesses starts n idle processes on the machine: `sleep` children of one
// holder shell, neither children of this process nor tasks (bench.IdleProcesses,
// which this package cannot import). stop kills and reaps them.
func idleProcesses(n int) (stop func() error, err error) {
	if n == 0 {
		return func() error { return nil }, nil
	}
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(
		"trap 'kill $(jobs -p) 2>/dev/null; wait; exit 0' TERM; for i in $(seq 1 %d); do sleep 100000 & done; echo ready; wait", n))
	cmd.Env = append(os.Environ(), markerEnv+"=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("idle processes: %q, %v", line, err)
	}
	return func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return cmd.Wait()
	}, nil
}
