package bash

import "errors"

// Containment is how a Producer keeps a task's processes together and ends them.
// New picks one once and logs it; Producer.Containment reports it.
type Containment uint8

const (
	// CgroupContainment runs each task in a cgroup v2 of its own, placed there when
	// the shell is spawned (clone3 with CLONE_INTO_CGROUP), so no process of the
	// task can start outside it whatever it does with its session, process group or
	// environment. A kill is SIGTERM to every process of the cgroup, then
	// cgroup.kill after the grace period; the task has settled once the leader is
	// reaped, cgroup.events says "populated 0" and the output pipe is drained; then
	// the cgroup is removed. Nothing scans /proc. Limits (Limits) need this mode.
	CgroupContainment Containment = 1
	// SweepContainment is the fallback where no writable cgroup v2 hierarchy
	// exists: the task runs in a new session; this process is a child subreaper; a
	// marker in the environment (TASKRT_BASH_TASK) and parent links find the
	// processes that left the session, in a /proc scan once the leader exits. It
	// cannot see a process that both cleared its environment and left the session
	// (`env -i setsid cmd &`, `unset TASKRT_BASH_TASK; setsid cmd &`), and its cost
	// grows with the number of processes on the machine.
	SweepContainment Containment = 2
)

// String returns "cgroup" or "sweep".
func (c Containment) String() string {
	switch c {
	case CgroupContainment:
		return "cgroup"
	case SweepContainment:
		return "sweep"
	}
	return "unknown"
}

// ErrCgroupUnavailable is returned by Start and Run of a Producer forced into
// CgroupContainment (WithContainment) where no usable cgroup v2 hierarchy exists.
// Nothing was started.
var ErrCgroupUnavailable = errors.New("bash: cgroup containment unavailable")
