//go:build unix

package bench

import (
	"syscall"
	"time"
)

// CPU is the CPU time (user and system) this process and its reaped children
// have used so far.
type CPU struct {
	Self, Children time.Duration
}

// CPUNow reads it; ok is false where it cannot be read.
func CPUNow() (c CPU, ok bool) {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return CPU{}, false
	}
	sum := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return CPU{Self: sum(&self), Children: sum(&children)}, true
}
