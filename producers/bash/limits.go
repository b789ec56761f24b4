package bash

import (
	"errors"
	"fmt"
	"strings"
)

// Limits caps what one command may use. Limits are enforced by the kernel through
// the command's cgroup, so they need cgroup containment (see Containment). In a
// Command, a zero field keeps the producer's default (WithMaxProcesses,
// WithMemoryLimit, WithCPULimit); in both places zero means no limit.
type Limits struct {
	// Processes caps the processes and threads alive at once (pids.max); a fork past
	// it fails with EAGAIN.
	Processes int
	// Memory caps RAM and swap together, in bytes (memory.max and memory.swap.max,
	// or memory.limit_in_bytes and memory.memsw.limit_in_bytes in cgroup v1); at
	// least minMemoryLimit. Past it the OOM killer ends one of the command's
	// processes.
	Memory int64
	// CPU caps CPU time, in CPUs (0.5 is half of one CPU; cpu.max, or the CFS quota
	// in cgroup v1); at least 0.01.
	CPU float64
}

// minMemoryLimit is the smallest memory limit: a smaller one is raised to it. Below
// it the shell itself could not start.
const minMemoryLimit = 16 << 20

// cpuPeriod is the CFS period of CPU limits, in microseconds; a quota is at least
// 1000 µs (0.01 CPU at this period).
const cpuPeriod = 100_000

// ErrLimitsUnavailable is returned by Start and Run when a command asks for a
// limit that cannot be enforced: no cgroup containment, or no controller for that
// limit. Nothing was started.
var ErrLimitsUnavailable = errors.New("bash: limits unavailable")

// or returns l with each zero field taken from d.
func (l Limits) or(d Limits) Limits {
	if l.Processes <= 0 {
		l.Processes = max(d.Processes, 0)
	}
	if l.Memory <= 0 {
		l.Memory = max(d.Memory, 0)
	}
	if l.CPU <= 0 {
		l.CPU = max(d.CPU, 0)
	}
	if l.Memory > 0 {
		l.Memory = max(l.Memory, minMemoryLimit)
	}
	return l
}

// any reports whether l limits anything.
func (l Limits) any() bool { return l.Processes > 0 || l.Memory > 0 || l.CPU > 0 }

// names lists what l limits, for error messages.
func (l Limits) names() string {
	var n []string
	if l.Processes > 0 {
		n = append(n, "processes")
	}
	if l.Memory > 0 {
		n = append(n, "memory")
	}
	if l.CPU > 0 {
		n = append(n, "cpu")
	}
	return strings.Join(n, ", ")
}

// cpuQuota is the CFS quota of l.CPU, in microseconds per cpuPeriod.
func (l Limits) cpuQuota() int64 {
	return max(int64(l.CPU*cpuPeriod), 1000)
}

// limitHits is what the kernel recorded about a task's limits.
type limitHits struct {
	limits       Limits
	oomKills     int64 // processes the OOM killer ended for the memory limit
	forksRefused int64 // forks refused at the process limit
}

// note describes the hits for an Outcome detail: "memory limit 512 MiB exceeded
// (oom kill)", "process limit 64 reached (12 forks refused)"; "" when none.
func (h limitHits) note() string {
	var parts []string
	if h.oomKills > 0 {
		what := "oom kill"
		if h.oomKills > 1 {
			what = fmt.Sprintf("%d oom kills", h.oomKills)
		}
		parts = append(parts, fmt.Sprintf("memory limit %s exceeded (%s)", formatBytes(h.limits.Memory), what))
	}
	if h.forksRefused > 0 {
		what := "1 fork refused"
		if h.forksRefused > 1 {
			what = fmt.Sprintf("%d forks refused", h.forksRefused)
		}
		parts = append(parts, fmt.Sprintf("process limit %d reached (%s)", h.limits.Processes, what))
	}
	return strings.Join(parts, "; ")
}

// formatBytes writes n in the largest binary unit that divides it: "512 MiB".
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
