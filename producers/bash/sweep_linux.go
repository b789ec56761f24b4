//go:build linux

package bash

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/internal/contain"
)

// Sweep mode: once a task's leader has exited, whatever is left of the task is
// found in /proc and killed (see sweepJail). Every task of this process that
// settles at the same moment is served by the same scan: the sweeper runs in rounds,
// and each round reads /proc once and classifies the processes of every task
// waiting for it. A burst of settling tasks (a kill storm, a dispose of many
// owners) therefore costs a few scans, not one per task.

// sweepTimeout bounds a sweep: processes that survive SIGKILL for this long make
// the task fail.
const sweepTimeout = 10 * time.Second

// maxUnsure bounds the time spent waiting for candidates whose marker cannot be
// known yet (caught inside execve). An exec completes in microseconds to a few
// milliseconds; the bound matters only on a machine so loaded that it stalls for
// this long, or for a busy process whose environment is really empty.
const maxUnsure = 2 * time.Second

// testHookBeforeScan, when set (by tests, while no sweep runs), is called by the
// loop before each scan with the number of sweeps the round may serve.
var testHookBeforeScan func(sweeps int)

// testHookQueued, when set (by tests, while no sweep runs), is called after a
// sweep joined the queue.
var testHookQueued func()

// sweeps is this process's sweeper.
var sweeps sweeper

// sweeper serves sweeps in rounds. Its loop goroutine runs while sweeps are pending
// and exits when none is; a Start after that starts a new one.
type sweeper struct {
	rounds rounds[*sweep]
	// scans counts scans, and served the sweeps finished, for tests and benchmarks.
	scans, served atomic.Int64
}

// sweep is one task's sweep.
type sweep struct {
	leader    int    // the task's leader: its pid, session and process group id
	marker    string // TASKRT_BASH_TASK of the task
	subreaper bool   // orphans come to this process: only its children need a marker check
	log       *slog.Logger

	known    map[int]uint64        // pid → start time of processes identified as the task's
	killed   map[procIdentity]bool // processes sent SIGKILL
	deadline time.Time             // give up: processes survive SIGKILL
	unsure   time.Time             // stop waiting for candidates caught inside execve
	backoff  time.Duration         // wait after a round that killed processes
	next     time.Time             // not looked at again before this
	done     chan sweepResult      // buffered 1; receives the result once
}

type procIdentity struct {
	pid   int
	start uint64
}

type sweepResult struct {
	killed int
	err    error
}

// run sweeps the task whose leader (pid) has exited and returns how many live
// processes of it were killed.
func (s *sweeper) run(leader int, marker string, subreaper bool, log *slog.Logger) (int, error) {
	now := time.Now()
	sw := &sweep{
		leader:    leader,
		marker:    marker,
		subreaper: subreaper,
		log:       log,
		known:     map[int]uint64{},
		killed:    map[procIdentity]bool{},
		deadline:  now.Add(sweepTimeout),
		unsure:    now.Add(maxUnsure),
		backoff:   500 * time.Microsecond,
		done:      make(chan sweepResult, 1),
	}
	s.rounds.join(sw, s.loop)
	if testHookQueued != nil {
		testHookQueued()
	}
	r := <-sw.done
	return r.killed, r.err
}

// loop runs rounds until no sweep is left. A sweep joins at the next round, whose
// scan starts after the sweep was asked for: only such a scan can prove that
// nothing of its task is left.
func (s *sweeper) loop() {
	var active []*sweep
	for {
		var ok bool
		if active, ok = s.rounds.next(active); !ok {
			return
		}

		now := time.Now()
		earliest := active[0].next
		for _, sw := range active {
			if sw.next.Before(earliest) {
				earliest = sw.next
			}
		}
		if wait := earliest.Sub(now); wait > 0 {
			s.rounds.wait(wait) // or, for a new sweep, serve it at once
			continue
		}

		if testHookBeforeScan != nil {
			testHookBeforeScan(len(active))
		}
		live := leaders.snapshot()
		procs, err := scanProcs()
		s.scans.Add(1)
		snap := newSnapshot(procs, live)
		now = time.Now()
		kept := active[:0]
		for _, sw := range active {
			if sw.next.After(now) {
				kept = append(kept, sw)
				continue
			}
			var (
				finished bool
				res      sweepResult
			)
			if err != nil {
				finished, res = true, sweepResult{len(sw.killed), fmt.Errorf("finding leftover processes: %w", err)}
			} else if perr := contain.Call("bash sweep", func() error { finished, res = sw.look(snap, now); return nil }); perr != nil {
				finished, res = true, sweepResult{len(sw.killed), fmt.Errorf("sweep: %w", perr)}
			}
			if finished {
				sw.done <- res
				s.served.Add(1)
				continue
			}
			kept = append(kept, sw)
		}
		clear(active[len(kept):])
		active = kept
	}
}

// snapshot is one scan of /proc, indexed for classification, with the markers read
// so far (shared by every sweep of the round).
type snapshot struct {
	procs    map[int]procInfo
	children map[int][]int // ppid → pids
	bySid    map[int][]int
	byPgrp   map[int][]int
	markers  map[int]markerRead
	leaders  map[int]string // pid → marker of live leaders, known without a read
}

type markerRead struct {
	marker string
	sure   bool
}

func newSnapshot(procs []procInfo, leaders map[int]string) *snapshot {
	s := &snapshot{
		leaders:  leaders,
		procs:    make(map[int]procInfo, len(procs)),
		children: map[int][]int{},
		bySid:    map[int][]int{},
		byPgrp:   map[int][]int{},
		markers:  map[int]markerRead{},
	}
	for _, p := range procs {
		if p.pid == selfPid || p.kthread {
			continue
		}
		s.procs[p.pid] = p
		s.children[p.ppid] = append(s.children[p.ppid], p.pid)
		s.bySid[p.sid] = append(s.bySid[p.sid], p.pid)
		if p.pgrp != p.sid {
			s.byPgrp[p.pgrp] = append(s.byPgrp[p.pgrp], p.pid)
		}
	}
	return s
}

// marker reads p's marker once per round.
func (s *snapshot) marker(p procInfo) markerRead {
	if m, ok := s.markers[p.pid]; ok {
		return m
	}
	if m, ok := s.leaders[p.pid]; ok {
		return markerRead{m, true}
	}
	m, sure := markerOf(p)
	s.markers[p.pid] = markerRead{m, sure}
	return s.markers[p.pid]
}

// look is one round of a sweep: SIGKILL the live processes of the task and reap the
// orphaned zombies among them that are children of this process. It is finished
// after a round that saw nothing of the task.
//
// A process forked while a scan is under way can be missed by it (after pid
// wrap-around it may get a pid the scan has passed), but then its parent or an
// ancestor, which only this process reaps once orphaned, is seen by that scan, and
// the next round finds it.
func (sw *sweep) look(snap *snapshot, now time.Time) (bool, sweepResult) {
	ours, unsure := sw.classify(snap)
	seen, alive := 0, 0
	for _, p := range ours {
		switch {
		case p.pid == sw.leader: // the leader: os/exec reaps it
		case p.zombie && p.ppid == selfPid:
			reapOrphan(p)
			seen++
		case p.zombie:
			if _, parentOurs := ours[p.ppid]; parentOurs {
				seen++ // re-parented to us once its parent dies
			}
		default:
			if err := killProc(p); err != nil {
				sw.log.Warn("bash: killing leftover process", "leftover", p.pid, "err", err)
			}
			sw.killed[procIdentity{p.pid, p.start}] = true
			seen++
			alive++
		}
	}
	switch {
	case seen == 0 && unsure > 0 && now.Before(sw.unsure):
		sw.next = now.Add(time.Millisecond) // a candidate was inside execve: look again shortly
		return false, sweepResult{}
	case seen == 0:
		if len(sw.killed) > 0 {
			sw.log.Info("bash task: killed leftover processes", "count", len(sw.killed))
		}
		return true, sweepResult{killed: len(sw.killed)}
	case now.After(sw.deadline):
		return true, sweepResult{len(sw.killed), fmt.Errorf("%d processes survived SIGKILL for %s", alive, sweepTimeout)}
	case alive == 0:
		sw.next = now // only reaped: look again at once
	default:
		sw.next = now.Add(sw.backoff) // give SIGKILL time to land
		sw.backoff = min(2*sw.backoff, 20*time.Millisecond)
	}
	return false, sweepResult{}
}

// classify picks the task's processes out of the snapshot: those in its session or
// process group, those whose start time was recorded as the task's, orphans carrying
// the task's marker (children of this process, or any process without the
// subreaper), and every descendant of any of these. It records the live ones in
// known, so that they are still recognised as zombies, whose environment is gone.
// unsure counts the candidates whose marker cannot be known yet.
func (sw *sweep) classify(snap *snapshot) (ours map[int]procInfo, unsure int) {
	ours = map[int]procInfo{}
	add := func(pids []int) {
		for _, pid := range pids {
			ours[pid] = snap.procs[pid]
		}
	}
	add(snap.bySid[sw.leader])
	add(snap.byPgrp[sw.leader])
	for pid, start := range sw.known {
		if p, ok := snap.procs[pid]; ok && p.start == start {
			ours[pid] = p
		}
	}
	consider := func(p procInfo) {
		if _, done := ours[p.pid]; done || p.zombie {
			return
		}
		m := snap.marker(p)
		switch {
		case !m.sure:
			unsure++
		case m.marker == sw.marker:
			ours[p.pid] = p
		}
	}
	if sw.subreaper {
		for _, pid := range snap.children[selfPid] {
			consider(snap.procs[pid])
		}
	} else {
		for _, p := range snap.procs {
			consider(p)
		}
	}
	queue := make([]int, 0, len(ours))
	for pid := range ours {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range snap.children[pid] {
			if _, seen := ours[c]; !seen {
				ours[c] = snap.procs[c]
				queue = append(queue, c)
			}
		}
	}
	for _, p := range ours {
		if !p.zombie {
			sw.known[p.pid] = p.start
		}
	}
	return ours, unsure
}
