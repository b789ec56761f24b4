package bash

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// task is one running command. Its lifecycle, run by the monitor goroutine:
//
//  1. wait for the leader (bash) to exit, without reaping it; on Cancel send SIGTERM
//     to the group, and SIGKILL when the grace period ends first;
//  2. sweep: SIGKILL every process of the task that is left and reap the orphans
//     among them, until none is left (the unreaped leader pins the group and
//     session ids, so they name nothing else meanwhile);
//  3. reap the leader through os/exec;
//  4. drain the output pipe, with a bounded wait;
//  5. deliver the Outcome on Done.
//
// The monitor owns two helper goroutines, the exit waiter and the pipe reader, and
// waits for both before step 5, so nothing of the task outlives Done.
type task struct {
	cfg    config
	log    *slog.Logger
	cmd    *exec.Cmd
	pid    int    // the leader's pid, also the task's process group and session id
	marker string // TASKRT_BASH_TASK value of this task
	out    *output
	pipe   *os.File // read end of the output pipe; used by the reader, closed by the monitor

	cancelOnce sync.Once
	cancelled  chan struct{} // closed by the first Cancel
	reasonMu   sync.Mutex    // protects reason
	reason     string        // the first Cancel's reason

	// exitCode is the leader's exit code, or -1; written by the monitor before it
	// sends on done, so it may be read after receiving from done.
	exitCode int
	done     chan messages.Outcome // buffered; receives exactly one Outcome
}

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid, pgrp, sid int
	zombie               bool
	kthread              bool
	start                uint64 // start time in clock ticks after boot; with pid, an identity
}

var selfPid = os.Getpid()

// testHookLeaderExited, when set (by tests, before Start), runs in the monitor
// right after step 1; a test makes it panic to exercise containment.
var testHookLeaderExited func()

// start spawns c and its monitor.
func (p *Producer) start(c Command) (*task, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.Command) == "" {
		return nil, ErrEmptyCommand
	}
	marker := p.prefix + fmt.Sprint(p.seq.Add(1))
	env, err := environ(c.Env, marker)
	if err != nil {
		return nil, err
	}
	if p.cfg.subreaper {
		if err := enableSubreaper(); err != nil {
			p.cfg.logger.Warn("bash: cannot become a child subreaper; orphans go to init", "err", err)
		}
	}
	if c.Dir != "" {
		// os/exec reports a missing directory as the shell not being found; say what
		// is really wrong.
		if fi, err := os.Stat(c.Dir); err != nil {
			return nil, fmt.Errorf("bash: working directory: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("bash: working directory %s is not a directory", c.Dir)
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bash: output pipe: %w", err)
	}
	cmd := exec.Command(p.cfg.shell, "-c", c.Command)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.Stdout = pw // one pipe for both: output merged in arrival order
	cmd.Stderr = pw
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	if cerr := pw.Close(); err == nil && cerr != nil {
		err = cerr // unreachable in practice; the child would hold the only writer
	}
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = pr.Close()
		return nil, fmt.Errorf("bash: start %q: %w", label(c.Command), err)
	}
	t := &task{
		cfg:       p.cfg,
		log:       p.cfg.logger.With("pid", cmd.Process.Pid, "marker", marker),
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		marker:    marker,
		out:       newOutput(p.cfg),
		pipe:      pr,
		cancelled: make(chan struct{}),
		exitCode:  -1,
		done:      make(chan messages.Outcome, 1),
	}
	t.log.Debug("bash task started", "command", label(c.Command))
	go t.monitor()
	return t, nil
}

// hooks hands the task to the runtime.
func (t *task) hooks() messages.Hooks {
	return messages.Hooks{
		Cancel:     t.cancel,
		Done:       t.done,
		ReadOutput: t.out.Read,
		Release:    t.out.discard,
	}
}

// cancel is Hooks.Cancel: it records the reason and wakes the monitor, which does
// the signalling. Idempotent, never blocks, never fails.
func (t *task) cancel(reason string) error {
	t.cancelOnce.Do(func() {
		t.reasonMu.Lock()
		t.reason = reason
		t.reasonMu.Unlock()
		close(t.cancelled)
	})
	return nil
}

func (t *task) cancelReason() string {
	t.reasonMu.Lock()
	defer t.reasonMu.Unlock()
	return t.reason
}

// progress is what the lifecycle has done so far; the panic path reads it to finish
// the work without repeating a step.
type progress struct {
	exited    bool           // the exit waiter reported
	reaped    bool           // os/exec reaped the leader
	drained   bool           // the reader reported
	cancelled bool           // Cancel arrived before the leader's exit
	sent      syscall.Signal // the last signal sent to the group (0: none)
	readErr   error          // the reader's error, if it failed
}

// monitor runs the lifecycle and delivers its outcome.
func (t *task) monitor() {
	exited := make(chan error, 1)
	drained := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { exited <- contain(func() error { return waitExited(t.pid) }) })
	wg.Go(func() { drained <- contain(t.readAll) })
	o := t.lifecycle(exited, drained)
	wg.Wait()
	t.done <- o
}

// lifecycle runs steps 1 to 4 and returns the outcome. A panic is contained: the
// task is then killed, swept, reaped and drained all the same, and fails.
func (t *task) lifecycle(exited, drained <-chan error) (o messages.Outcome) {
	pr := &progress{}
	defer func() {
		if r := recover(); r != nil {
			o = t.salvage(pr, exited, drained, fmt.Errorf("panic: %v", r))
		}
	}()

	// 1. Wait for the leader to exit, acting on Cancel and the grace period.
	if err := t.awaitLeader(pr, exited, drained); err != nil {
		return t.salvage(pr, exited, drained, fmt.Errorf("waiting for the shell: %w", err))
	}
	if testHookLeaderExited != nil {
		testHookLeaderExited()
	}
	// 2. Kill and reap whatever is left of the task.
	leftovers, sweepErr := t.sweep()
	// 3. Reap the leader.
	state, err := t.reapLeader(pr)
	if err != nil {
		return t.salvage(pr, exited, drained, err)
	}
	// 4. Drain the output pipe.
	drainNote := t.drain(pr, drained)

	o = t.decide(pr, state, leftovers)
	if sweepErr != nil {
		o.Status, o.Detail = messages.Failed, o.Detail+"; "+sweepErr.Error()
	}
	if pr.readErr != nil {
		o.Status, o.Detail = messages.Failed, o.Detail+"; reading output: "+pr.readErr.Error()
	}
	if drainNote != "" {
		o.Detail += "; " + drainNote
	}
	return o
}

// awaitLeader is step 1.
func (t *task) awaitLeader(pr *progress, exited, drained <-chan error) error {
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	var graceC <-chan time.Time
	cancelC := t.cancelled
	for {
		select {
		case err := <-exited:
			pr.exited = true
			return err
		case err := <-drained:
			pr.drained = true
			drained = nil
			if err != nil { // nobody reads the pipe any more: stop the command
				pr.readErr = err
				t.signal(pr, syscall.SIGKILL)
			}
		case <-cancelC:
			cancelC = nil
			select {
			case err := <-exited: // it ended on its own first: not a kill
				pr.exited = true
				return err
			default:
			}
			pr.cancelled = true
			t.log.Info("bash task cancelled", "reason", t.cancelReason())
			t.signal(pr, syscall.SIGTERM)
			if t.cfg.grace <= 0 {
				t.signal(pr, syscall.SIGKILL)
				continue
			}
			grace = time.NewTimer(t.cfg.grace)
			graceC = grace.C
		case <-graceC:
			graceC = nil
			t.log.Info("bash task ignored SIGTERM; sending SIGKILL", "grace", t.cfg.grace)
			t.signal(pr, syscall.SIGKILL)
		}
	}
}

// signal sends sig to the task's process group. Only called before the leader is
// reaped.
func (t *task) signal(pr *progress, sig syscall.Signal) {
	pr.sent = sig
	if err := signalGroup(t.pid, sig); err != nil {
		t.log.Warn("bash: signalling the process group", "signal", signalName(sig), "err", err)
	}
}

// sweep is step 2: until no process of the task is left, SIGKILL the live ones and
// reap the orphaned zombies that are children of this process. It returns how many
// live processes it killed.
//
// It stops only after a scan of /proc that saw nothing of the task. A process
// forked while a scan is under way can be missed by it (after pid wrap-around it may
// get a pid the scan has passed), but then its parent or an ancestor, which only
// this process reaps once orphaned, is seen by that scan, and the next scan finds it.
func (t *task) sweep() (int, error) {
	known := map[int]uint64{} // pid → start time of processes identified as this task's
	killed := map[procInfo]bool{}
	deadline := time.Now().Add(sweepTimeout)
	backoff := 500 * time.Microsecond
	unsureUntil := time.Now().Add(maxUnsure)
	for {
		procs, err := scanProcs()
		if err != nil {
			return len(killed), fmt.Errorf("finding leftover processes: %w", err)
		}
		ours, unreadable := t.classify(procs, known)
		seen, alive := 0, 0
		for _, p := range ours {
			switch {
			case p.pid == t.pid: // the leader: os/exec reaps it in step 3
			case p.zombie && p.ppid == selfPid:
				reapOrphan(p)
				seen++
			case p.zombie:
				if _, parentOurs := ours[p.ppid]; parentOurs {
					seen++ // re-parented to us once its parent dies
				}
			default:
				if err := killProc(p); err != nil {
					t.log.Warn("bash: killing leftover process", "leftover", p.pid, "err", err)
				}
				killed[procInfo{pid: p.pid, start: p.start}] = true
				seen++
				alive++
			}
		}
		if seen == 0 && unreadable > 0 && time.Now().Before(unsureUntil) {
			// A candidate was in the middle of execve: look again shortly.
			pause(time.Millisecond)
			continue
		}
		if seen == 0 {
			if len(killed) > 0 {
				t.log.Info("bash task: killed leftover processes", "count", len(killed))
			}
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d processes survived SIGKILL for %s", alive, sweepTimeout)
		}
		if alive == 0 {
			continue // only reaped: look again at once
		}
		pause(backoff) // give SIGKILL time to land
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}

// maxUnsure bounds the time spent waiting for candidates caught in the middle of
// execve, whose marker cannot be read yet. An exec completes in microseconds; the
// bound only matters on a machine so loaded that it stalls for this long.
const maxUnsure = 2 * time.Second

// classify picks the task's processes out of procs: those in its session or process
// group, those whose start time was recorded as the task's, children of this process
// carrying the task's marker (escaped with setsid and orphaned), and every
// descendant of any of these. It records the live ones in known, so that they are
// still recognised as zombies, whose environment is gone. unreadable counts the
// candidates whose environment could not be read, so their marker is unknown.
func (t *task) classify(procs []procInfo, known map[int]uint64) (ours map[int]procInfo, unreadable int) {
	ours = map[int]procInfo{}
	children := map[int][]procInfo{}
	for _, p := range procs {
		if p.pid == selfPid || p.kthread {
			continue
		}
		children[p.ppid] = append(children[p.ppid], p)
		switch {
		case p.sid == t.pid || p.pgrp == t.pid:
		case known[p.pid] == p.start && p.start != 0:
		case !p.zombie && (p.ppid == selfPid || !t.cfg.subreaper):
			m, ok := environMarker(p.pid)
			if !ok {
				unreadable++
			}
			if m != t.marker {
				continue
			}
		default:
			continue
		}
		ours[p.pid] = p
	}
	queue := make([]int, 0, len(ours))
	for pid := range ours {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range children[pid] {
			if _, seen := ours[c.pid]; !seen {
				ours[c.pid] = c
				queue = append(queue, c.pid)
			}
		}
	}
	for _, p := range ours {
		if !p.zombie {
			known[p.pid] = p.start
		}
	}
	return ours, unreadable
}

// reapLeader is step 3.
func (t *task) reapLeader(pr *progress) (*os.ProcessState, error) {
	err := t.cmd.Wait()
	pr.reaped = true
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return nil, fmt.Errorf("reaping the shell: %w", err)
	}
	return t.cmd.ProcessState, nil
}

// drain is step 4: wait for the reader to reach the end of the pipe. Every known
// writer is dead by now, so the end comes at once unless an untracked process holds
// the pipe; after the drain timeout the reader is stopped and a note says why.
func (t *task) drain(pr *progress, drained <-chan error) (note string) {
	defer t.closePipe()
	if pr.drained {
		return ""
	}
	timer := time.NewTimer(t.cfg.drainTimeout)
	defer timer.Stop()
	select {
	case err := <-drained:
		pr.drained, pr.readErr = true, errors.Join(pr.readErr, err)
		return ""
	case <-timer.C:
	}
	t.log.Warn("bash: output pipe still open after every known process died; stopped reading")
	if err := t.pipe.SetReadDeadline(time.Now()); err != nil {
		t.closePipe() // unblocks the reader too
	}
	err := <-drained
	pr.drained, pr.readErr = true, errors.Join(pr.readErr, err)
	return "output pipe held open by an untracked process; stopped reading"
}

func (t *task) closePipe() {
	if err := t.pipe.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.log.Warn("bash: closing the output pipe", "err", err)
	}
}

// readAll is the reader goroutine: it copies the pipe into the output buffer until
// the end of the pipe or the drain deadline.
func (t *task) readAll() error {
	defer t.out.finish()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.pipe.Read(buf)
		if n > 0 {
			t.out.write(buf[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
			return nil
		default:
			return err
		}
	}
}

// decide turns the leader's wait status into the Outcome. A command we cancelled is
// killed by the signal that ended the leader, or by the last signal we sent when the
// leader exited on its own after it (a trap); anything else is completed with its
// exit code, or killed by the signal that ended it.
func (t *task) decide(pr *progress, state *os.ProcessState, leftovers int) messages.Outcome {
	ws, _ := state.Sys().(syscall.WaitStatus)
	switch {
	case pr.cancelled:
		sig := pr.sent
		if ws.Signaled() {
			sig = ws.Signal()
		}
		return messages.Outcome{Status: messages.Killed, Detail: "signal: " + signalName(sig)}
	case ws.Signaled():
		return messages.Outcome{Status: messages.Killed, Detail: "signal: " + signalName(ws.Signal())}
	}
	t.exitCode = ws.ExitStatus()
	detail := fmt.Sprintf("exit code: %d", t.exitCode)
	switch {
	case leftovers == 1:
		detail += "; killed 1 leftover process"
	case leftovers > 1:
		detail += fmt.Sprintf("; killed %d leftover processes", leftovers)
	}
	return messages.Outcome{Status: messages.Completed, Detail: detail}
}

// salvage ends a lifecycle that went wrong: it kills, sweeps, reaps and drains
// whatever the normal path did not, each step contained, and returns a failure.
func (t *task) salvage(pr *progress, exited, drained <-chan error, cause error) messages.Outcome {
	t.log.Error("bash task failed internally; killing it", "err", cause)
	if !pr.exited {
		if !pr.reaped {
			_ = contain(func() error { return signalGroup(t.pid, syscall.SIGKILL) })
		}
		<-exited
		pr.exited = true
	}
	_ = contain(func() error { _, err := t.sweep(); return err })
	if !pr.reaped {
		_ = contain(func() error { _, err := t.reapLeader(pr); return err })
	}
	if !pr.drained {
		_ = contain(func() error {
			if err := t.pipe.SetReadDeadline(time.Now()); err != nil {
				t.closePipe()
			}
			return nil
		})
		<-drained
		pr.drained = true
	}
	t.closePipe()
	return messages.Outcome{Status: messages.Failed, Detail: "internal error: " + cause.Error()}
}

// pause waits for d on a timer.
func pause(d time.Duration) {
	timer := time.NewTimer(d)
	<-timer.C
}

// contain runs f, turning a panic into an error.
func contain(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
