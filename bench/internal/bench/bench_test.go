package bench

import (
	"fmt"
	"testing"
	"time"
)

// The benchmarks run the figures' measurements with b.N as their size, in
// sub-benchmarks named impl=… so that benchstat compares the implementations as
// columns:
//
//	go test -run '^$' -bench . -count 6 ./bench/internal/bench > new.txt
//	benchstat -col /impl new.txt
//
// Each reports its figure with b.ReportMetric. Fixed populations (routed: 10,000 live
// tasks over 1,000 owners) shrink to 1% when b.N is 1, so that a probe or
// -benchtime=1x run stays cheap. The memory figure is defined at 100,000 live tasks:
// run it with -bench Memory -benchtime 100000x.

var (
	registryImpls = []Impl{ImplActors, ImplMutex, ImplFloor}
	processImpls  = []Impl{ImplActors, ImplMutex, ImplExec}
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func reportLatency(b *testing.B, l Latency) {
	b.ReportMetric(float64(l.P50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(l.P99.Nanoseconds()), "p99-ns")
}

// population is n, or n/100 (at least 1) for a probe run with b.N == 1.
func population(b *testing.B, n int) int {
	if b.N == 1 {
		return max(n/100, 1)
	}
	return n
}

// BenchmarkLifecycle: start → settled of instant tasks, 8 starters over 100 owners;
// ns/op is the wall time per task.
func BenchmarkLifecycle(b *testing.B) {
	for _, impl := range registryImpls {
		b.Run("impl="+string(impl), func(b *testing.B) {
			b.ReportAllocs()
			perSec, err := Lifecycle(bg, impl, LifecycleConfig{Tasks: b.N, Owners: 100, Workers: 8, Timer: b})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(perSec, "tasks/s")
		})
	}
}

// BenchmarkRouted: one Read or Get at a time among 10,000 live tasks of 1,000 owners.
func BenchmarkRouted(b *testing.B) {
	for _, op := range []string{"read", "get"} {
		for _, impl := range registryImpls {
			b.Run(fmt.Sprintf("op=%s/impl=%s/tasks=10000", op, impl), func(b *testing.B) {
				b.ReportAllocs()
				res, err := Routed(bg, impl, RoutedConfig{Tasks: population(b, 10_000), Owners: population(b, 1_000),
					Samples: b.N, Op: op, Timer: b})
				if err != nil {
					b.Fatal(err)
				}
				if op == "read" {
					reportLatency(b, res.Read)
				} else {
					reportLatency(b, res.Get)
				}
			})
		}
	}
}

// BenchmarkWaitWake: settlement → pending waiter answered. ns/op includes each
// sample's task start and wait registration; p50-ns and p99-ns are the wake-up alone.
func BenchmarkWaitWake(b *testing.B) {
	for _, impl := range registryImpls {
		b.Run("impl="+string(impl), func(b *testing.B) {
			lat, err := WaitWake(bg, impl, WaitConfig{Samples: b.N, Timer: b})
			if err != nil {
				b.Fatal(err)
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkMemory: bytes per live task with b.N live tasks over 100 owners (the
// figure: -benchtime 100000x).
func BenchmarkMemory(b *testing.B) {
	for _, impl := range registryImpls {
		b.Run("impl="+string(impl), func(b *testing.B) {
			m, err := Memory(bg, impl, MemoryConfig{Tasks: b.N, Owners: 100, Timer: b})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(m.Total(), "B/task")
			b.ReportMetric(m.Heap, "heap-B/task")
			b.ReportMetric(m.Stacks, "stack-B/task")
		})
	}
}

// BenchmarkDispose: Dispose of an owner with 1,000 or 10,000 live tasks, until
// quiescent; ns/op is one disposal (the filling is not timed).
func BenchmarkDispose(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, impl := range registryImpls {
			b.Run(fmt.Sprintf("tasks=%d/impl=%s", n, impl), func(b *testing.B) {
				d, err := Dispose(bg, impl, DisposeConfig{Tasks: population(b, n), Repeat: b.N, Timer: b})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ms(d), "ms-median")
			})
		}
	}
}

// BenchmarkDisposeScaling: how Dispose time grows from 1,000 to 10,000 live tasks
// (linear = 10×); each iteration disposes one owner of each size.
func BenchmarkDisposeScaling(b *testing.B) {
	for _, impl := range registryImpls {
		b.Run("impl="+string(impl), func(b *testing.B) {
			var small, large time.Duration
			for b.Loop() {
				s, err := Dispose(bg, impl, DisposeConfig{Tasks: population(b, 1_000), Repeat: 1})
				if err != nil {
					b.Fatal(err)
				}
				l, err := Dispose(bg, impl, DisposeConfig{Tasks: population(b, 10_000), Repeat: 1})
				if err != nil {
					b.Fatal(err)
				}
				small, large = small+s, large+l
			}
			b.ReportMetric(float64(large)/float64(small), "10k/1k")
		})
	}
}

// BenchmarkDisposeChain: transitive Dispose of a 10-deep chain of sub-agent-like
// owners; ns/op is one disposal.
func BenchmarkDisposeChain(b *testing.B) {
	for _, impl := range registryImpls {
		b.Run("depth=10/impl="+string(impl), func(b *testing.B) {
			d, err := DisposeChain(bg, impl, DisposeConfig{Depth: 10, Repeat: b.N, Timer: b})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(ms(d), "ms-median")
		})
	}
}

// BenchmarkTrue: /bin/true through a registry with the bash producer, or with
// os/exec, 8 at a time; ns/op is the wall time per run.
func BenchmarkTrue(b *testing.B) {
	for _, impl := range processImpls {
		b.Run("impl="+string(impl), func(b *testing.B) {
			d, err := TrueRuns(bg, impl, TrueConfig{Runs: b.N, Workers: 8, Timer: b})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/d.Seconds(), "runs/s")
		})
	}
}

// BenchmarkFlood: `head -c 200M /dev/zero` read through a registry until terminal, or
// from its pipe; MB/s is the command's output throughput.
func BenchmarkFlood(b *testing.B) {
	const size = 200 << 20
	for _, impl := range processImpls {
		b.Run("bytes=200MiB/impl="+string(impl), func(b *testing.B) {
			b.SetBytes(size)
			var heap, rss uint64
			for b.Loop() {
				r, err := Flood(bg, impl, FloodConfig{Bytes: size})
				if err != nil {
					b.Fatal(err)
				}
				heap, rss = max(heap, r.PeakHeap), max(rss, r.PeakRSS)
			}
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
		})
	}
}
