// Package leakcheck counts the processes that bash tasks leave alive, for this
// module's tests and its stress command: what goleak is for goroutines, for
// processes. An embedder asks its own producer instead (bash.Producer.Live).
//
// producers/bash fills the package in from its init, so the counts exist whenever
// bash is linked in; a count asked for without it panics rather than report zero.
package leakcheck

import "sync/atomic"

type counters struct{ live, machine func() int }

var registered atomic.Pointer[counters]

// Register installs the counters; producers/bash calls it from its init.
func Register(live, machine func() int) {
	registered.Store(&counters{live, machine})
}

func get() *counters {
	c := registered.Load()
	if c == nil {
		panic("leakcheck: producers/bash is not linked into this binary")
	}
	return c
}

// Live counts the running processes of the bash tasks of every producer in this
// process: the quiescence check for tests and simulators that hold more than one
// producer. Tasks of other programs on the machine are not counted.
func Live() int { return get().live() }

// Machine counts the running processes on this machine that carry any bash task
// marker, from any producer in any process (this process itself excluded), plus
// those in this process's task cgroups: the stress command's report.
func Machine() int { return get().machine() }
