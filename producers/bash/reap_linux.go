//go:build linux

package bash

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/internal/contain"
	"golang.org/x/sys/unix"
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
// same moment; a round reads the list of this process's children, never the
// machine's processes, skips the leaders of running tasks, and reads /proc only
// for the settling tasks' own processes and for children it has not seen before
// (see children).

var reaps reaper

type reaper struct {
	rounds   rounds[*reapReq]
	children children // used by the round under way (one at a time: see rounds)
	// spared counts the settles that needed no round: the task's process count
	// said nothing but its leader was left (taskCgroup.onlyTheLeaderIsLeft). For tests.
	spared atomic.Int64
	// named counts the settles whose orphans were all reaped by name (the task's
	// process group, the processes a kill found), with no round
	// (taskCgroup.reapOrphans). For tests.
	named atomic.Int64
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
	if !r.rounds.claim(req) {
		return <-req.done
	}
	var busy map[string]bool
	err := contain.Call("bash reaper", func() error { busy = r.round([]*reapReq{req}); return nil })
	if err == nil && !busy[line] {
		r.rounds.handOff(r.loop) // to requests that came meanwhile, if any
		return nil
	}
	r.rounds.handOff(r.loop, req)
	return <-req.done
}

func (r *reaper) loop() {
	var active []*reapReq
	for {
		var ok bool
		if active, ok = r.rounds.next(active); !ok {
			return
		}

		var busy map[string]bool
		if err := contain.Call("bash reaper", func() error { busy = r.round(active); return nil }); err != nil {
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
			r.rounds.wait(time.Millisecond) // a process is between its cgroup exit and its zombie state
		}
	}
}

// round reaps every zombie child of this process that died in the cgroup of an
// active request, and returns the requests' cgroups that still hold a child of
// this process that is not a zombie yet. Only the settling tasks' cgroups are
// touched: a task that has just started may have a leader that is already a
// zombie and not yet registered, which only os/exec may reap.
//
// What a child of this process is (which cgroup it lives in) is read once, when it
// first shows up among the children (see children.classify): a settle reads
// /proc only for its own task's processes, never for the host's other children,
// however many there are.
func (r *reaper) round(active []*reapReq) map[string]bool {
	settling := map[string]bool{}
	for _, req := range active {
		settling[req.line] = true
	}
	busy := map[string]bool{}
	for _, c := range r.children.classify() {
		if !settling[c.line] || leaders.has(c.pid) {
			continue
		}
		p, ok := r.children.stat(c.pid)
		switch {
		case !ok || p.start != c.start:
			// gone: reaped meanwhile (or by os/exec: a leader that left the set)
		case p.zombie && p.ppid == selfPid:
			reapOrphan(p)
		default:
			busy[c.line] = true
		}
	}
	return busy
}

// children is what the reaper knows about the children of this process's main
// thread, where orphans arrive: each child with its identity and its cgroup, in the
// order the kernel lists them. It is used by one round at a time (the reaper runs
// rounds one after another, handing over under the mutex of its rounds).
//
// The kernel keeps a thread's children in the order they joined it (a fork or a
// re-parenting appends to the end), and a child leaves only when it is reaped. So a
// new reading is the previous one, less the children reaped since, followed by the
// children that joined since. classify matches the new reading against the
// previous one in order; the first pid that does not follow the previous order
// starts the new children. A pid that was reaped and reused by a child that joined
// since can look like a match only at the end of the matched part (whatever joined
// after it joined later still), so checking the start time of the last matched
// children, backwards until one is the process it was, proves every match before
// it. Usually that is one stat read, whatever the number of children.
type children struct {
	known []child // the previous reading, classified
	spare []child // the reading before, reused for the next one
	pids  []int   // the latest list, reused
	buf   []byte  // for reading the children list
	// lists counts the readings of the children list, for tests.
	lists atomic.Int64
	// reads counts the /proc files read about single processes (stat, cgroup), for
	// tests: what a settle costs.
	reads atomic.Int64
	// readStat and cgroupOf replace the /proc reads in tests (nil: read /proc).
	readStat func(pid int) (procInfo, bool)
	cgroupOf func(pid int) string
}

type child struct {
	pid   int
	start uint64 // with pid, the identity of the process
	line  string // its cgroup, as /proc/PID/cgroup says ("0::/…\n")
}

// classify reads the main thread's children and returns them classified.
func (cs *children) classify() []child { return cs.match(cs.list()) }

// match classifies pids, the children list as just read, against the previous
// reading.
func (cs *children) match(pids []int) []child {
	now := slices.Grow(cs.spare[:0], len(pids))[:len(pids)]
	clear(now)
	matched, i := 0, 0
	for k, pid := range pids {
		j := i
		for j < len(cs.known) && cs.known[j].pid != pid {
			j++
		}
		if j == len(cs.known) {
			break
		}
		now[k], i, matched = cs.known[j], j+1, k+1
	}
	for k := matched - 1; k >= 0; k-- {
		if p, ok := cs.stat(now[k].pid); ok && p.start == now[k].start {
			break // the same process: so is every match before it
		}
		now[k] = child{}
	}
	kept := now[:0]
	for k, c := range now {
		if c.pid == 0 {
			var ok bool
			if c, ok = cs.identify(pids[k]); !ok {
				continue // gone; if the pid shows up again, it is a new child
			}
		}
		kept = append(kept, c)
	}
	cs.known, cs.spare = kept, cs.known
	return kept
}

// identify reads pid's start time and cgroup; false when it vanished meanwhile, was
// replaced by another process, or its cgroup could not be read.
func (cs *children) identify(pid int) (child, bool) {
	p, ok := cs.stat(pid)
	if !ok {
		return child{}, false
	}
	cs.reads.Add(1)
	cgroup := cgroupOf
	if cs.cgroupOf != nil {
		cgroup = cs.cgroupOf
	}
	line := cgroup(pid)
	if again, ok := cs.stat(pid); !ok || again.start != p.start || line == "" {
		return child{}, false // an unknown cgroup is looked at again next round, never cached
	}
	return child{pid: pid, start: p.start, line: line}, true
}

func (cs *children) stat(pid int) (procInfo, bool) {
	cs.reads.Add(1)
	if cs.readStat != nil {
		return cs.readStat(pid)
	}
	return readStat(pid)
}

// list reads the pids of the main thread's children: the orphans re-parented to
// this process are there, since the kernel hands them to the first live thread of
// the subreaper, its leader while it lives (and Go never ends the main thread).
// Children forked by other threads are listed under those threads; the orphans are
// all that matter here. The kernel hands the list out a page at a time.
func (cs *children) list() []int {
	cs.lists.Add(1)
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(selfPid)+"/children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if cs.buf == nil {
		cs.buf = make([]byte, 0, 8192)
	}
	b := cs.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		b = b[:len(b)+n]
	}
	cs.buf = b[:0]
	pids := cs.pids[:0]
	for f := range bytes.FieldsSeq(b) {
		if pid, ok := atou(f); ok {
			pids = append(pids, int(pid))
		}
	}
	cs.pids = pids
	return pids
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
