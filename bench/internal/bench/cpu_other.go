//go:build !unix

package bench

import "time"

// CPU is the CPU time (user and system) this process and its reaped children
// have used so far.
type CPU struct {
	Self, Children time.Duration
}

// CPUNow cannot read it here.
func CPUNow() (CPU, bool) { return CPU{}, false }
