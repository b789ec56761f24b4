//go:build linux

package bash

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// Cgroup mode's zombies. When this process receives orphans (it is a child
// subreaper, or init), the processes a task left behind become its children when
// their parents die, and their zombies must be reaped here. They are recognised by
// the cgroup they died in, which /proc/PID/cgroup keeps showing. A task has settled
// only when no child of this process is in its cgroup: not a zombie (reaped), and
// not a process between leaving the cgroup and becoming a zombie (waited for: its
// own orphans become this process's children before it turns into a zombie).
//
// Like the sweeper, the reaper runs in rounds shared by every task settling at the
// same moment; a round reads this process's children only, never the machine's
// processes, and skips the leaders of running tasks.

var reaps reaper

type reaper struct {
	mu      sync.Mutex    // protects queue, running, wake
	queue   []*reapReq    // waiting for their first round
	running bool          // the loop goroutine is running
	wake    chan struct{} // buffered 1
}

type reapReq struct {
	line     string // the task's cgroup as /proc/PID/cgroup shows it: "0::/…/task-1-2\n"
	deadline time.Time
	done     chan error // buffered 1
}

// run returns once no child of this process is in the cgroup named by line. When no
// round is under way, the first round runs in the caller: a task that settles
// alone (the usual case) costs one read of this process's children, and no
// goroutine hand-off.
func (r *reaper) run(line string) error {
	req := &reapReq{line: line, deadline: time.Now().Add(sweepTimeout), done: make(chan error, 1)}
	r.mu.Lock()
	if r.wake == nil {
		r.wake = make(chan struct{}, 1)
	}
	if !r.running {
		r.running = true // no loop starts while the caller runs its round
		r.mu.Unlock()
		var busy map[string]bool
		err := messages.Contain("bash reaper", func() error { busy = r.round([]*reapReq{req}); return nil })
		r.mu.Lock()
		if err == nil && !busy[line] {
			if len(r.queue) > 0 {
				go r.loop() // requests that came meanwhile
			} else {
				r.running = false
			}
			r.mu.Unlock()
			return nil
		}
		r.queue = append(r.queue, req)
		go r.loop()
		r.mu.Unlock()
		return <-req.done
	}
	r.queue = append(r.queue, req)
	notify(r.wake)
	r.mu.Unlock()
	return <-req.done
}

func (r *reaper) loop() {
	var active []*reapReq
	for {
		r.mu.Lock()
		active = append(active, r.queue...)
		r.queue = nil
		if len(active) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()

		var busy map[string]bool
		if err := messages.Contain("bash reaper", func() error { busy = r.round(active); return nil }); err != nil {
			for _, req := range active {
				req.done <- fmt.Errorf("reaping orphans: %w", err)
			}
			active = nil
			continue
		}
		now := time.Now()
		kept := active[:0]
		for _, req := range active {
			switch {
			case !busy[req.line]:
				req.done <- nil
			case now.After(req.deadline):
				req.done <- fmt.Errorf("processes of the task still exiting after %s", sweepTimeout)
			default:
				kept = append(kept, req)
			}
		}
		clear(active[len(kept):])
		active = kept
		if len(active) > 0 {
			timer := time.NewTimer(time.Millisecond) // a process is between its cgroup exit and its zombie state
			select {
			case <-timer.C:
			case <-r.wake:
				timer.Stop()
			}
		}
	}
}

// round reaps every zombie child of this process that died in the cgroup of an
// active request, and returns the requests' cgroups that still hold a child of
// this process that is not a zombie yet. Only the settling tasks' cgroups are
// touched: a task that has just started may have a leader that is already a
// zombie and not yet registered, which only os/exec may reap.
func (r *reaper) round(active []*reapReq) map[string]bool {
	settling := map[string]bool{}
	for _, req := range active {
		settling[req.line] = true
	}
	live := leaders.snapshot()
	busy := map[string]bool{}
	for _, pid := range orphanChildren() {
		if _, leader := live[pid]; leader {
			continue
		}
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		line := cgroupOf(pid)
		switch {
		case !settling[line]:
		case p.zombie && p.ppid == selfPid:
			reapOrphan(p)
		default:
			busy[line] = true
		}
	}
	return busy
}

// cgroupOf returns the cgroup v2 line of /proc/PID/cgroup ("0::/path\n"), "" when
// unreadable.
func cgroupOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("0::")) {
			return string(line)
		}
	}
	return ""
}

// orphanChildren lists the children of this process's main thread: the orphans
// re-parented to this process are there, since the kernel hands them to the first
// live thread of the subreaper, its leader while it lives (and Go never ends the
// main thread). Children forked by other threads are listed under those threads;
// the orphans are all that matter here.
func orphanChildren() []int {
	return readPids("/proc/self/task/" + strconv.Itoa(selfPid) + "/children")
}
