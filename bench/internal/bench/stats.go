package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Timer is told which part of a measurement is the measured part. *testing.B
// satisfies it, so that a benchmark's ns/op leaves out the setup; a nil Timer is
// allowed.
type Timer interface {
	ResetTimer()
	StopTimer()
	StartTimer()
}

type noTimer struct{}

func (noTimer) ResetTimer() {}
func (noTimer) StopTimer()  {}
func (noTimer) StartTimer() {}

func timerOr(t Timer) Timer {
	if t == nil {
		return noTimer{}
	}
	return t
}

// Latency is a latency distribution summary.
type Latency struct {
	P50, P99 time.Duration
	N        int // samples
}

// summarize sorts samples and returns their 50th and 99th percentiles (nearest rank).
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(samples))+0.5) - 1
		return samples[min(max(i, 0), len(samples)-1)]
	}
	return Latency{P50: rank(0.50), P99: rank(0.99), N: len(samples)}
}

// liveMemory collects garbage until the heap is stable and returns the bytes of live
// heap objects and of goroutine stacks in use.
func liveMemory() (heap, stacks uint64) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// procStatus returns a field of /proc/self/status in bytes ("VmHWM", "VmRSS"), or 0
// where /proc is not available.
func procStatus(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0
			}
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS returns memory to the OS and resets VmHWM (Linux ≥ 4.0: writing 5 to
// clear_refs), so that the next VmHWM reading is the peak since now. It reports
// whether the reset worked.
func resetPeakRSS() bool {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// heapSampler samples the in-use heap (objects plus fragmentation in in-use spans,
// the runtime/metrics equivalent of MemStats.HeapInuse) every interval, without
// stopping the world, and keeps the maximum.
type heapSampler struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	start uint64 // the first sample, taken by startHeapSampler
	peak  uint64 // written by the sampler goroutine, read after Stop
}

var heapInuseMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

func heapInuse(s []metrics.Sample) uint64 {
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return n
}

func startHeapSampler(interval time.Duration) *heapSampler {
	s := make([]metrics.Sample, len(heapInuseMetrics))
	for i, name := range heapInuseMetrics {
		s[i].Name = name
	}
	h := &heapSampler{stop: make(chan struct{})}
	h.start = heapInuse(s)
	h.peak = h.start
	h.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				h.peak = max(h.peak, heapInuse(s))
				return
			case <-t.C:
				h.peak = max(h.peak, heapInuse(s))
			}
		}
	})
	return h
}

// base is the in-use heap when the sampler started.
func (h *heapSampler) base() uint64 { return h.start }

// Stop ends the sampling and returns the peak.
func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	h.wg.Wait()
	return h.peak
}
