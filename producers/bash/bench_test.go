//go:build linux

package bash

import (
	"os/exec"
	"testing"
)

// BenchmarkTrue measures the cost of one short command from start to settlement:
// the producer (pipe, monitor, /proc sweep, drain) against plain os/exec running
// the same `bash -c /bin/true` (and /bin/true alone, for scale).
func BenchmarkTrue(b *testing.B) {
	b.Run("impl=producer", func(b *testing.B) {
		p := New(WithSpillDir(b.TempDir()))
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
	b.Run("impl=exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/bash", "-c", "/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=exec-direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScanProcs measures one /proc scan, the unit of a sweep; a task with no
// leftovers costs one scan.
func BenchmarkScanProcs(b *testing.B) {
	for b.Loop() {
		procs, err := scanProcs()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(procs)), "procs")
	}
}
