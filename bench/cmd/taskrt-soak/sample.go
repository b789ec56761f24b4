package main

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/taskrt/taskrt/actors"
)

// sample is the state of the process at one point of the soak.
type sample struct {
	at         time.Duration // since the load began
	heap       uint64        // heap in use after a full GC, bytes
	goroutines int
	fds        int // open file descriptors
	children   int // child processes of this process, zombies included
	stats      actors.Stats
}

// readingsPerSample is how many readings one sample of the counts is made of.
//
// The load makes goroutines, descriptors, child processes and the runtime's counts
// swing with the work in flight: a single reading of them is mostly noise. A leak
// raises their floor, and the floor is steady, so each sample of a count is the
// least of readingsPerSample readings spread over the sampling interval. The heap is
// read once per sample, after a full GC, which removes its own noise.
const readingsPerSample = 10

// sampler takes a sample every interval until ctx ends.
func sampler(ctx context.Context, rt *actors.Runtime, began time.Time, interval time.Duration, out func(sample)) {
	tick := time.NewTicker(interval / readingsPerSample)
	defer tick.Stop()
	var cur sample
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := read(rt)
		if ctx.Err() != nil {
			return // the load is winding down: this reading shows its end, not its steady state
		}
		if n == 0 {
			cur = r
		} else {
			cur.goroutines = min(cur.goroutines, r.goroutines)
			cur.fds = min(cur.fds, r.fds)
			cur.children = min(cur.children, r.children)
			cur.stats = minStats(cur.stats, r.stats)
		}
		n++
		if n == readingsPerSample {
			cur.at = time.Since(began)
			cur.heap = heapInUse()
			out(cur)
			n = 0
		}
	}
}

// read takes one reading of the counts.
func read(rt *actors.Runtime) sample {
	return sample{
		goroutines: runtime.NumGoroutine(),
		fds:        openFDs(),
		children:   childProcesses(),
		stats:      rt.Stats(),
	}
}

func minStats(a, b actors.Stats) actors.Stats {
	return actors.Stats{
		Tasks:      min(a.Tasks, b.Tasks),
		Running:    min(a.Running, b.Running),
		Retained:   min(a.Retained, b.Retained),
		Tombstones: min(a.Tombstones, b.Tombstones),
		Agents:     min(a.Agents, b.Agents),
		Actors:     min(a.Actors, b.Actors),
		Abandoned:  max(a.Abandoned, b.Abandoned), // a count that only grows: the latest
	}
}

// heapInUse is runtime.MemStats.HeapInuse after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// openFDs counts this process's open file descriptors, not counting the one used
// to list them.
func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1
}

// childProcesses counts the processes whose parent is this process, zombies
// included: a child the producer failed to reap stays one.
func childProcesses() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	self := os.Getpid()
	n := 0
	for _, e := range entries {
		if e.Name()[0] < '1' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, ok := parentOf(b); ok && ppid == self {
			n++
		}
	}
	return n
}

// parentOf reads the parent pid from a /proc/PID/stat line, "pid (comm) state ppid
// ...", where comm may hold spaces and parentheses.
func parentOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return ppid, err == nil
}
