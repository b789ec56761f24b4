package bash

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// task is one running command. Its lifecycle, run by the monitor goroutine:
//
//  1. wait for the leader (bash) to exit, without reaping it; on Cancel send SIGTERM
//     to the task's processes, and SIGKILL when the grace period ends first;
//  2. settle the jail: kill whatever is left of the task and wait until nothing is
//     (the unreaped leader pins its pid, session and process group ids meanwhile);
//  3. reap the leader through os/exec;
//  4. drain the output pipe, with a bounded wait;
//  5. read the limits the task hit and release the jail (remove its cgroup);
//  6. deliver the Outcome on Done.
//
// The monitor owns two helper goroutines, the exit waiter and the pipe reader, and
// waits for both before step 6, so nothing of the task outlives Done.
type task struct {
	cfg    config
	log    *slog.Logger
	cmd    *exec.Cmd
	pid    int    // the leader's pid, also the task's process group and session id
	marker string // TASKRT_BASH_TASK value of this task
	jail   jail   // how the task's processes are kept together and ended
	out    *output.Buffer
	pipe   *os.File // read end of the output: the pipe's, or the terminal's master; used by the reader, closed by the monitor
	term   *os.File // the terminal's own end, held until the task's processes are gone (releaseTerminal); nil without one
	in     *input   // the command's input (StdinPipe, StdinTTY); nil for StdinNone
	tty    bool     // the command runs on a terminal of its own: pipe is its master
	// sandboxed: the leader is bwrap, which exits with 128+N when the shell died of
	// signal N (see decide).
	sandboxed bool

	cancelOnce sync.Once
	cancelled  chan struct{} // closed by the first Cancel
	reasonMu   sync.Mutex    // protects reason
	reason     string        // the first Cancel's reason

	// exitCode is the leader's exit code, or -1; written by the monitor before it
	// sends on done, so it may be read after receiving from done.
	exitCode int
	done     chan messages.Outcome // buffered; receives exactly one Outcome
}

// jail keeps a task's processes together and ends them: a cgroup of the task's own
// (taskCgroup) or the task's session, marker and parent links found in /proc
// (sweepJail). Its methods are called by the task's monitor only.
type jail interface {
	// terminate sends SIGTERM to the task's processes (at Cancel).
	terminate(leader int) error
	// kill sends SIGKILL to the task's processes (when the grace period ends).
	kill(leader int) error
	// settle runs once the leader has exited, before it is reaped: it kills
	// whatever is left of the task and returns once nothing is, with how many live
	// processes it killed.
	settle(leader int) (int, error)
	// reapOrphans runs once the leader is reaped: it reaps the zombies of the task
	// that settle left to it (cgroup mode, see taskCgroup.reapOrphans).
	reapOrphans(leader int) error
	// limitHits reports what the kernel recorded about the task's limits.
	limitHits() limitHits
	// release frees what the jail holds, once the leader is reaped.
	release() error
}

// sweepJail is sweep mode's jail: the process group for signals, the sweeper for
// what is left.
type sweepJail struct {
	marker    string
	subreaper bool
	log       *slog.Logger
}

func (j *sweepJail) terminate(leader int) error { return signalGroup(leader, syscall.SIGTERM) }
func (j *sweepJail) kill(leader int) error      { return signalGroup(leader, syscall.SIGKILL) }
func (j *sweepJail) limitHits() limitHits       { return limitHits{} }
func (j *sweepJail) release() error             { return nil }
func (j *sweepJail) reapOrphans(int) error      { return nil }

func (j *sweepJail) settle(leader int) (int, error) {
	return sweeps.run(leader, j.marker, j.subreaper, j.log)
}

// bareJail is no containment at all: the leader's process group for signals, and
// nothing else (no cgroup, no sweep, no orphan reaping). No producer uses it: only
// BenchmarkTrueGuarantees does (testHookBareJail), to measure what the containment
// costs beside the producer's own machinery.
type bareJail struct{}

func (bareJail) terminate(leader int) error { return signalGroup(leader, syscall.SIGTERM) }
func (bareJail) kill(leader int) error      { return signalGroup(leader, syscall.SIGKILL) }
func (bareJail) settle(int) (int, error)    { return 0, nil }
func (bareJail) reapOrphans(int) error      { return nil }
func (bareJail) limitHits() limitHits       { return limitHits{} }
func (bareJail) release() error             { return nil }

// testHookBareJail, when set (by BenchmarkTrueGuarantees, around its own
// producers' starts), makes start give its tasks a bareJail instead of their
// mode's.
var testHookBareJail atomic.Bool

// testHookLeaderExited, when set (by tests, before Start), runs in the monitor
// right after step 1; a test makes it panic to exercise containment.
var testHookLeaderExited func()

// testHookFlooding, when set (by tests, before Start), is called by the reader
// with the task's pipe once the reader has found the command flooding it.
var testHookFlooding func(pipe *os.File)

// start spawns c and its monitor.
func (p *Producer) start(c Command) (*task, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if p.startErr != nil {
		return nil, p.startErr
	}
	if err := checkCommand(c.Command); err != nil {
		return nil, err
	}
	if c.Stdin > StdinTTY {
		return nil, fmt.Errorf("%w: %s", errStdin, c.Stdin)
	}
	tty := c.Stdin == StdinTTY
	lim := c.Limits.or(p.cfg.limits)
	if lim.any() && p.tree == nil {
		return nil, fmt.Errorf("%w: %s limits need cgroup containment, and this producer uses %s mode (%s)",
			ErrLimitsUnavailable, lim.names(), p.mode, p.detail)
	}
	seq := p.seq.Add(1)
	marker := p.prefix + fmt.Sprint(seq)
	extraEnv := c.Env
	if tty {
		extraEnv = append([]string{"TERM=dumb"}, c.Env...) // Command.Env may set another
	}
	env, err := environ(extraEnv, marker)
	if err != nil {
		return nil, err
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
	sb, err := p.sandboxFor(c) // nil: no sandbox; an error: none can be had, so nothing runs
	if err != nil {
		return nil, err
	}
	if sb != nil {
		env = sb.environ(env, c.Env)
	}
	log := p.cfg.logger.With("marker", marker)

	var (
		j  jail
		cg *taskCgroup
	)
	bare := testHookBareJail.Load()
	if bare {
		j = bareJail{}
	} else if p.tree != nil {
		if lim.any() {
			cg, err = p.tree.newTask(p.taskDirPrefix()+fmt.Sprint(seq), lim, log)
		} else {
			cg, err = p.pool.get(log)
		}
		if err != nil {
			return nil, err
		}
		j = cg
	} else {
		j = &sweepJail{marker: marker, subreaper: p.cfg.subreaper, log: log}
	}
	var sj *sandboxJail
	if sb != nil {
		sj = &sandboxJail{jail: j, cg: cg, initFD: -1}
		j = sj
	}
	fail := func(err error) (*task, error) {
		if cg != nil {
			if rerr := cg.release(); rerr != nil {
				log.Warn("bash: removing the cgroup of a task that did not start", "err", rerr)
			}
		}
		return nil, err
	}

	args := []string{"-c", c.Command}
	var script *os.File
	if bigCommand(c.Command) {
		if script, err = scriptFile(c.Command); err != nil {
			return fail(fmt.Errorf("bash: handing the command over: %w", err))
		}
		defer script.Close()
		args = []string{"-c", fdScript}
	}
	st, err := p.openStreams(c.Stdin)
	if err != nil {
		return fail(err)
	}
	name, argv := p.cfg.shell, args
	if sb != nil {
		name, argv = sb.command(p.sb.path, p.cfg.shell, args, tty) // bwrap is the leader
	}
	cmd := exec.Command(name, argv...)
	cmd.Dir = c.Dir
	cmd.Env = env
	releaseNull := func() {}
	if st.childIn != nil {
		cmd.Stdin = st.childIn
	} else {
		var null *os.File
		null, releaseNull = p.null.acquire()
		if null != nil {
			cmd.Stdin = null // the producer's one descriptor (a nil *os.File would be a broken one)
		} // else os/exec opens /dev/null
	}
	cmd.Stdout = st.childOut // one pipe (or the terminal) for both: output merged in arrival order
	cmd.Stderr = st.childOut
	if script != nil {
		cmd.ExtraFiles = []*os.File{script} // descriptor 3
	}
	if sj != nil {
		if err := sj.attach(cmd); err != nil {
			st.closeOurs()
			return fail(err)
		}
	}
	// A new session detaches the command from any controlling terminal; sweep mode
	// also finds the task by it. In cgroup mode, when this process has no terminal
	// to detach from, a new process group is enough, and saves what a session costs
	// (a scheduler autogroup per command, about 0.3 to 0.5 ms on a loaded machine).
	// A terminal of the task's own needs a session to be its controlling terminal.
	// In a sandbox the shell takes its terminal as its controlling terminal itself
	// (setsid --ctty), so that bwrap, the leader, has none (see sandboxPlan.command).
	err = spawn(cmd, cg, (cg == nil && !bare) || p.ctty || tty, tty && sb == nil)
	releaseNull()
	if sj != nil {
		sj.started(err == nil, log)
	}
	if cerr := st.closeChild(); err == nil && cerr != nil {
		err = cerr // unreachable in practice; the child would hold the only writer
	}
	if err != nil {
		if cmd.Process != nil {
			if cg != nil {
				_ = cg.kill(cmd.Process.Pid)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if cg != nil {
				_ = waitFor(cg.dir+"/cgroup.events", sweepTimeout, func() bool { return cg.populated() != 1 })
			}
		}
		st.closeOurs()
		return fail(fmt.Errorf("bash: start %q: %w", shortLabel(c.Command), err))
	}
	if cg != nil {
		cg.closeFD()
	}
	leaders.add(cmd.Process.Pid, marker)
	t := &task{
		cfg:       p.cfg,
		log:       log.With("pid", cmd.Process.Pid),
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		marker:    marker,
		jail:      j,
		out:       output.New(p.cfg.outputOptions(c.BlockOutput)...),
		pipe:      st.out,
		term:      st.term,
		in:        st.in,
		tty:       tty,
		sandboxed: sb != nil,
		cancelled: make(chan struct{}),
		exitCode:  -1,
		done:      make(chan messages.Outcome, 1),
	}
	t.log.Debug("bash task started", "command", shortLabel(c.Command), "containment", p.mode.String(), "stdin", c.Stdin.String(), "sandbox", sandboxName(sb))
	go t.monitor()
	return t, nil
}

// hooks hands the task to the runtime. The output buffer is both Output (which the
// runtime prefers: reads up to a pattern, observer reads, output events) and, for
// callers of the hooks that only know consuming reads, ReadOutput: one cursor either
// way.
func (t *task) hooks() messages.Hooks {
	return messages.Hooks{
		Cancel:     t.cancel,
		Done:       t.done,
		ReadOutput: t.out.Read,
		Output:     t.out,
		Input:      t.inputHook(),
		Release:    t.out.Release,
	}
}

// inputHook is Hooks.Input: nil for StdinNone, so that the runtime answers input to
// such a task with messages.ErrNoInput.
func (t *task) inputHook() func(data []byte, eof bool) error {
	if t.in == nil {
		return nil
	}
	return t.in.write
}

// cancel is Hooks.Cancel: it records the reason and wakes the monitor, which does
// the signalling. Idempotent, never blocks, never fails.
func (t *task) cancel(reason string) error {
	t.cancelOnce.Do(func() {
		t.reasonMu.Lock()
		t.reason = reason
		t.reasonMu.Unlock()
		t.out.Unblock() // a reader waiting for room drains the pipe again, so the task ends within its grace
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
// the work without repeating a step. The steps on the leader and the jail happen in
// one order, on the normal path and the panic path alike, so how far they got is
// one phase; the reader's end (which may come at any time before step 4 completes)
// and Cancel's arrival are facts of their own.
type progress struct {
	phase     phase          // the last of steps 1, 2, 3 and 5 done
	drained   bool           // the reader reported
	cancelled bool           // Cancel arrived before the leader's exit
	sent      syscall.Signal // the last signal sent to the task (0: none)
	readErr   error          // the reader's error, if it failed
}

// phase is how far a task's leader and jail have gone:
//
//	phaseRunning ──exit waiter reported──▶ phaseExited ──jail settled──▶ phaseSettled
//	  ──os/exec reaped the leader──▶ phaseReaped ──jail released──▶ phaseReleased
type phase uint8

const (
	phaseRunning  phase = iota // the leader may be running
	phaseExited                // step 1: the exit waiter reported (the leader is a zombie)
	phaseSettled               // step 2: the jail settled (nothing else of the task is left)
	phaseReaped                // step 3: os/exec reaped the leader
	phaseReleased              // step 5: the jail was released
)

// reach is the transition function: it records that the step ending in p is done.
// Phases only move forward. The steps run in order, so a phase is reached from the
// one before it, except in salvage, which goes on past a step that failed (a panic
// in os/exec's Wait leaves the leader unreaped, and the jail is released all the
// same).
func (pr *progress) reach(p phase) { pr.phase = max(pr.phase, p) }

// done reports whether the step ending in p is done.
func (pr *progress) done(p phase) bool { return pr.phase >= p }

// monitor runs the lifecycle and delivers its outcome.
func (t *task) monitor() {
	exited := make(chan error, 1)
	drained := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { exited <- contain.Call("bash exit waiter", func() error { return waitExited(t.pid) }) })
	wg.Go(func() { drained <- contain.Call("bash output reader", t.readAll) })
	o := t.lifecycle(exited, drained)
	t.in.end() // done at the leader's exit already, unless the lifecycle failed before it
	wg.Wait()
	t.done <- o
}

// lifecycle runs steps 1 to 5 and returns the outcome. A panic is contained: the
// task is then killed, settled, reaped, drained and released all the same, and
// fails.
func (t *task) lifecycle(exited, drained <-chan error) messages.Outcome {
	pr := &progress{}
	var o messages.Outcome
	if err := contain.Call("bash lifecycle", func() error { o = t.steps(pr, exited, drained); return nil }); err != nil {
		return t.salvage(pr, exited, drained, err)
	}
	return o
}

// steps runs steps 1 to 5 and returns the outcome.
func (t *task) steps(pr *progress, exited, drained <-chan error) (o messages.Outcome) {
	// 1. Wait for the leader to exit, acting on Cancel and the grace period.
	if err := t.awaitLeader(pr, exited, drained); err != nil {
		return t.salvage(pr, exited, drained, fmt.Errorf("waiting for the shell: %w", err))
	}
	t.in.end() // nothing reads the input any more
	if testHookLeaderExited != nil {
		testHookLeaderExited()
	}
	// 2. Kill whatever is left of the task.
	leftovers, settleErr := t.jail.settle(t.pid)
	pr.reach(phaseSettled)
	// 3. Reap the leader, then what the settle left to reap.
	state, err := t.reapLeader(pr)
	if err != nil {
		return t.salvage(pr, exited, drained, err)
	}
	settleErr = errors.Join(settleErr, t.jail.reapOrphans(t.pid))
	// 4. Drain the output pipe.
	t.releaseTerminal()
	drainNote := t.drain(pr, drained)
	// 5. Read the limits hit, release the jail.
	hits := t.jail.limitHits()
	releaseErr := t.jail.release()
	pr.reach(phaseReleased)

	o = t.decide(pr, state, leftovers, hits)
	if settleErr != nil {
		o.Status, o.Detail = messages.Failed, o.Detail+"; "+settleErr.Error()
	}
	if pr.readErr != nil {
		o.Status, o.Detail = messages.Failed, o.Detail+"; reading output: "+pr.readErr.Error()
	}
	if drainNote != "" {
		o.Detail += "; " + drainNote
	}
	if releaseErr != nil {
		t.log.Warn("bash: removing the task's cgroup", "err", releaseErr)
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
			pr.reach(phaseExited)
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
				pr.reach(phaseExited)
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

// signal sends sig to the task's processes. Only called before the leader is
// reaped.
func (t *task) signal(pr *progress, sig syscall.Signal) {
	pr.sent = sig
	var err error
	if sig == syscall.SIGKILL {
		err = t.jail.kill(t.pid)
	} else {
		err = t.jail.terminate(t.pid)
	}
	if err != nil {
		t.log.Warn("bash: signalling the task", "signal", signalName(sig), "err", err)
	}
}

// reapLeader is step 3.
func (t *task) reapLeader(pr *progress) (*os.ProcessState, error) {
	err := t.cmd.Wait()
	pr.reach(phaseReaped)
	leaders.remove(t.pid, t.marker)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return nil, fmt.Errorf("reaping the shell: %w", err)
	}
	return t.cmd.ProcessState, nil
}

// drain is step 4: wait for the reader to reach the end of the pipe. Every known
// writer is dead by now, so the end comes at once unless an untracked process holds
// the pipe, or the reader waits for the owner to read (BlockOutput); after the drain
// timeout with neither, the reader is stopped and a note says why.
func (t *task) drain(pr *progress, drained <-chan error) (note string) {
	defer t.closePipe()
	if pr.drained {
		return ""
	}
	timer := time.NewTimer(t.cfg.drainTimeout)
	defer timer.Stop()
	for waiting := true; waiting; {
		select {
		case err := <-drained:
			pr.drained, pr.readErr = true, errors.Join(pr.readErr, err)
			return ""
		case <-timer.C:
			// A reader that waits for the owner to read (BlockOutput) is not held
			// up by an untracked process: what the command wrote before it died is
			// delivered as it is read, and a Cancel ends the wait (Unblock).
			if waiting = t.out.Full(); waiting {
				timer.Reset(t.cfg.drainTimeout)
			}
		}
	}
	what := "output pipe"
	if t.tty {
		what = "terminal"
	}
	t.log.Warn("bash: " + what + " still open after every known process died; stopped reading")
	if err := t.pipe.SetReadDeadline(time.Now()); err != nil {
		t.closePipe() // unblocks the reader too
	}
	err := <-drained
	pr.drained, pr.readErr = true, errors.Join(pr.readErr, err)
	return what + " held open by an untracked process; stopped reading"
}

// releaseTerminal closes this process's end of the task's terminal once the task's
// processes are gone (the leader reaped, the rest settled): the master then reads
// what is left and EIO. A shell that wrote its last line and exited at once could
// otherwise hand the master its EIO before the line reached it — the terminal's
// last holder gone while the kernel's flip buffer still held the line — and the
// line was lost (TestTTYStdin, 3 in 6,000 runs beside a loaded machine).
func (t *task) releaseTerminal() {
	if t.term != nil {
		_ = t.term.Close()
		t.term = nil
	}
}

func (t *task) closePipe() {
	if err := t.pipe.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.log.Warn("bash: closing the output pipe", "err", err)
	}
}

// readAll is the reader goroutine: it copies the pipe into the output buffer until
// the end of the pipe or the drain deadline.
func (t *task) readAll() error {
	defer t.out.Close()
	bp := readBufs.Get().(*[]byte) // readChunk bytes, back to the pool at the end
	defer readBufs.Put(bp)
	buf := *bp
	full := 0 // reads in a row that filled buf
	for {
		n, err := t.pipe.Read(buf)
		if n > 0 {
			_, _ = t.out.Write(buf[:n]) // never fails: what does not fit is counted as dropped
		}
		if n < len(buf) || len(buf) == floodChunk {
			full = 0
		} else if full++; full == floodReads {
			buf = t.flooding()
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
			return nil
		case t.tty && errors.Is(err, syscall.EIO):
			return nil // a terminal's master reads EIO once no process holds the terminal: its end
		default:
			return err
		}
	}
}

const (
	readChunk  = 32 << 10  // what the reader asks of the pipe at first
	floodChunk = 256 << 10 // and once the command floods it (see flooding)
	floodReads = 8         // reads in a row that fill the buffer: a flood
	floodPipe  = 1 << 20   // the pipe's capacity asked for during a flood
)

// flooding is called when the command keeps the pipe full: the pipe grows to
// floodPipe (where the system allows; a pipe's default is 64 KiB) and the reader
// asks for floodChunk bytes at a time, so a flood costs fewer wake-ups of the
// writer and fewer, larger reads and spill writes. A task that writes little never
// pays for the larger buffers. It returns the reader's new buffer.
func (t *task) flooding() []byte {
	if !t.tty {
		growPipe(t.pipe, floodPipe)
	}
	if testHookFlooding != nil {
		testHookFlooding(t.pipe)
	}
	return make([]byte, floodChunk)
}

// readBufs are the readers' buffers: the output buffer copies what it keeps, so a
// buffer is free again when its reader returns.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// decide turns the leader's wait status into the Outcome. A command we cancelled is
// killed by the signal that ended the leader, or by the last signal we sent when the
// leader exited on its own after it (a trap); a leader killed by the OOM killer is
// killed by its memory limit; anything else is completed with its exit code, or
// killed by the signal that ended it. Limits the task hit are named in the detail.
func (t *task) decide(pr *progress, state *os.ProcessState, leftovers int, hits limitHits) messages.Outcome {
	ws, _ := state.Sys().(syscall.WaitStatus)
	note := hits.note()
	with := func(detail string) string {
		if note == "" {
			return detail
		}
		return detail + "; " + note
	}
	switch {
	case pr.cancelled:
		sig := pr.sent
		if ws.Signaled() {
			sig = ws.Signal()
		}
		return messages.Outcome{Status: messages.Killed, Detail: with("signal: " + signalName(sig))}
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && hits.oomKills > 0,
		t.sandboxed && ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL) && hits.oomKills > 0:
		return messages.Outcome{Status: messages.Killed, Detail: note}
	case ws.Signaled():
		return messages.Outcome{Status: messages.Killed, Detail: with("signal: " + signalName(ws.Signal()))}
	}
	t.exitCode = ws.ExitStatus()
	detail := fmt.Sprintf("exit code: %d", t.exitCode)
	switch {
	case leftovers == 1:
		detail += "; killed 1 leftover process"
	case leftovers > 1:
		detail += fmt.Sprintf("; killed %d leftover processes", leftovers)
	}
	return messages.Outcome{Status: messages.Completed, Detail: with(detail)}
}

// salvage ends a lifecycle that went wrong: it kills, settles, reaps, drains and
// releases whatever the normal path did not, each step contained, and returns a
// failure. A contained panic reads "internal error: panic: VALUE" in the detail; its
// stack goes to the log.
func (t *task) salvage(pr *progress, exited, drained <-chan error, cause error) messages.Outcome {
	var pe *messages.PanicError
	if errors.As(cause, &pe) {
		t.log.Error("bash task failed internally; killing it", "err", cause, "stack", string(pe.Stack))
		cause = fmt.Errorf("panic: %v", pe.Value)
	} else {
		t.log.Error("bash task failed internally; killing it", "err", cause)
	}
	if !pr.done(phaseExited) { // the leader is not reaped either
		_ = contain.Call("bash salvage kill", func() error { return t.jail.kill(t.pid) })
		<-exited
		pr.reach(phaseExited)
	}
	t.in.end()
	if !pr.done(phaseSettled) {
		_ = contain.Call("bash salvage settle", func() error { _, err := t.jail.settle(t.pid); return err })
		pr.reach(phaseSettled)
	}
	if !pr.done(phaseReaped) {
		_ = contain.Call("bash salvage reap", func() error { _, err := t.reapLeader(pr); return err })
	}
	_ = contain.Call("bash salvage orphans", func() error { return t.jail.reapOrphans(t.pid) })
	t.releaseTerminal()
	if !pr.drained {
		_ = contain.Call("bash salvage drain", func() error {
			if err := t.pipe.SetReadDeadline(time.Now()); err != nil {
				t.closePipe()
			}
			return nil
		})
		<-drained
		pr.drained = true
	}
	t.closePipe()
	if !pr.done(phaseReleased) {
		_ = contain.Call("bash salvage release", t.jail.release)
		pr.reach(phaseReleased)
	}
	return messages.Outcome{Status: messages.Failed, Detail: "internal error: " + cause.Error()}
}

// pause waits for d on a timer.
func pause(d time.Duration) {
	timer := time.NewTimer(d)
	<-timer.C
}
