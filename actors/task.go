package actors

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// task is the actor of one background task. It owns the task's phase and snapshot,
// its read cursor (the producer's consuming ReadOutput is only ever called here, one
// call at a time), the final outcome, the pending waiters and the kills in flight. It
// is the only writer of its snapshot; every change is sent to the registry's index
// (taskChanged, taskSettled) before the caller that caused it is answered, so a Get
// that follows a reply always sees the change.
//
// Its life is the task machine below: transition is the only place its phase and
// its status change, and every arrow is a rule (taskRule) named after what it
// implements; docs and other files link here rather than draw it again.
//
//	               queuedStarted (the registry gave it a slot; Run returned hooks)
//	queued ───────────────────────────────────────────────▶ running
//	  │ killedWhileQueued (kill, teardown: nothing ran)        │  │
//	  │ queuedStartFailed (Run failed)                         │  │ killAccepted (a kill's Cancel returned nil)
//	  │ runtimePanicked                                        │  │ teardownBegan (before teardown's Cancel)
//	  │                                                        │  ▼
//	  │                       outcomeDelivered, contractBroken │ stopping
//	  │                       runtimePanicked                  │  │ outcomeDelivered, contractBroken,
//	  ▼                                                        ▼  ▼ teardownCancelFailed, settleTimedOut, runtimePanicked
//	settled ◀─────────────────────────────────────────────────────┘
//
// A task started at once begins running; one queued at its owner's cap
// (WithQueue) begins queued, with status queued. settled is the last phase: the
// record is then dropped (evicted by retention, owner disposed, runtime closed) by
// stopping the actor, whose Stopped handler runs the producer's Release once every
// producer call returned. That is the end of the actor, not a phase of it.
//
// The Done channel is awaited off the mailbox (Kernel.SelectDone), which sends the
// outcome home, and Cancel runs on a goroutine that sends its result home, so no
// producer code ever runs on the mailbox except the non-blocking ReadOutput.
type task struct {
	rt      *Runtime
	self    *actor.PID
	phase   taskPhase
	snap    messages.Snapshot
	hooks   messages.Hooks
	starter *actor.PID // answered with startReply once the registry indexed the task
	// spawning is the task's announcement, made at commit with the registry's record
	// (handed back untouched) and held until the end of Started (see toRegistry);
	// nil once sent.
	spawning *taskSpawned
	output   string // final output, final-only kinds

	waiters    []*waiter // pending waits, in arrival order
	nextWaiter uint64    // numbers waiters for their timers

	calls producerCalls // producer calls off the mailbox (Cancel, Input)

	// pending holds the requests most tasks never see — kills whose Cancel runs, a
	// teardown, ReadUntils, watches, inputs — made by the first of them
	// (pendingOf); nil until then, so that a task that only starts and settles
	// stays in a smaller allocation size class.
	pending *pendingRequests
	queue   *queuedStart // a queued start's state (queue.go); nil for a task started at once
	grew    atomic.Bool  // an outputGrew is on its way (coalesces the producer's growth callbacks)
	// listening is set while a ReadUntil or a watch is pending (written on the
	// mailbox, read by the growth callback): growth is sent home only then or while
	// events have a subscriber.
	listening atomic.Bool
	writing   bool // an Input call is in flight
	inputShut bool // an input with eof was accepted: later inputs are refused
	overdue   bool // the settle timer fired: answer teardown even with a Cancel hung

	done *kernel.DoneSlot // where Done is awaited; nil when the outcome was there at once
}

// pendingRequests are the requests a task holds until an event answers them, and
// when its stop began.
type pendingRequests struct {
	kills      []*actor.PID   // KillTask requesters whose Cancel call is in flight
	teardownBy *actor.PID     // who asked for teardown; answered teardownDone, then cleared
	untils     []*untilWaiter // pending ReadUntil requests, in arrival order
	watches    []*outputWatch // live watches (watch.go), in arrival order
	inputs     []*inputReq    // accepted inputs not yet answered, in arrival order; [0] is being written when writing
	parked     *parkedInput   // a failed write whose answer waits for the task's end
	settleT    *time.Timer    // armed by teardown; fires settleTimeout
	stopAt     time.Time      // when the task moved to stopping (for the stop-duration metric)
}

// pendingOf returns t.pending, made on first use: for code that changes it.
func (t *task) pendingOf() *pendingRequests {
	if t.pending == nil {
		t.pending = &pendingRequests{}
	}
	return t.pending
}

// listened reports whether a ReadUntil or a watch is pending.
func (t *task) listened() bool {
	pr := t.pending
	return pr != nil && (len(pr.untils) > 0 || len(pr.watches) > 0)
}

// stopBegan is when the task's stop began (zero: none began).
func (t *task) stopBegan() time.Time {
	if t.pending == nil {
		return time.Time{}
	}
	return t.pending.stopAt
}

type taskPhase int

const (
	phaseQueued   taskPhase = iota // waiting for a slot, then for its Run (queue.go)
	phaseRunning                   // the producer's work is live
	phaseStopping                  // cancel accepted or teardown begun; awaiting Done
	phaseSettled                   // terminal; serves reads until the actor stops
)

func (p taskPhase) String() string {
	return [...]string{"queued", "running", "stopping", "settled"}[p]
}

// taskRule is an arrow of the task machine, named after the rule it implements.
type taskRule int

const (
	// queuedStarted: a queued task the registry gave a slot runs once its Run
	// returned hooks (queued → running).
	queuedStarted taskRule = iota
	// queuedStartFailed: a queued task whose Run failed settles failed ("start
	// failed: …"), without having run (queued → settled).
	queuedStartFailed
	// killedWhileQueued: a kill or a teardown of a queued task settles it killed
	// ("never started: …"), and nothing runs (queued → settled).
	killedWhileQueued
	// killAccepted: a kill whose Cancel returned nil moves running → stopping; a
	// failing Cancel leaves the task untouched (docs/semantics.md, rule 6).
	killAccepted
	// teardownBegan: teardown (dispose, close) moves running → stopping before the
	// producer's Cancel is called, so no observer sees running once the producer was
	// asked to stop (docs/semantics.md, rule 4).
	teardownBegan
	// outcomeDelivered: the first terminal outcome Done delivers settles the task
	// (docs/semantics.md, rule 4).
	outcomeDelivered
	// contractBroken: Done closed without an outcome, or with a non-terminal one, is
	// a producer contract violation that fails the task (docs/semantics.md, rule 12).
	contractBroken
	// teardownCancelFailed: a Cancel that errors during teardown force-fails the
	// task, and teardown goes on (docs/semantics.md, rule 12).
	teardownCancelFailed
	// settleTimedOut: a torn-down task that does not settle within SettleTimeout is
	// recorded failed as abandoned (docs/semantics.md, rule 10).
	settleTimedOut
	// runtimePanicked: a panic in the runtime's own code on the task's actor records
	// the task failed ("runtime panic: …") rather than restart it: a restart would
	// run the work again.
	runtimePanicked
)

// taskRules are the arrows: from which phases each rule applies, and where it
// leads. transition refuses a rule from any other phase.
var taskRules = [...]struct {
	name string
	from []taskPhase
	to   taskPhase
}{
	queuedStarted:        {"queuedStarted", []taskPhase{phaseQueued}, phaseRunning},
	queuedStartFailed:    {"queuedStartFailed", []taskPhase{phaseQueued}, phaseSettled},
	killedWhileQueued:    {"killedWhileQueued", []taskPhase{phaseQueued}, phaseSettled},
	killAccepted:         {"killAccepted", []taskPhase{phaseRunning}, phaseStopping},
	teardownBegan:        {"teardownBegan", []taskPhase{phaseRunning}, phaseStopping},
	outcomeDelivered:     {"outcomeDelivered", []taskPhase{phaseRunning, phaseStopping}, phaseSettled},
	contractBroken:       {"contractBroken", []taskPhase{phaseRunning, phaseStopping}, phaseSettled},
	teardownCancelFailed: {"teardownCancelFailed", []taskPhase{phaseStopping}, phaseSettled},
	settleTimedOut:       {"settleTimedOut", []taskPhase{phaseStopping}, phaseSettled},
	runtimePanicked:      {"runtimePanicked", []taskPhase{phaseQueued, phaseRunning, phaseStopping}, phaseSettled},
}

func (r taskRule) String() string { return taskRules[r].name }

// applies reports whether rule r applies to a task in phase p.
func (r taskRule) applies(p taskPhase) bool {
	return slices.Contains(taskRules[r].from, p)
}

// newTask makes a task actor's state; a queued task (run set) starts in phaseQueued
// and calls run when the registry hands it a slot (queue.go).
func newTask(rt *Runtime, snap messages.Snapshot, hooks messages.Hooks, run func() (messages.Hooks, error), starter *actor.PID) *task {
	t := &task{rt: rt, snap: snap, hooks: hooks, starter: starter, phase: phaseRunning}
	if run != nil {
		t.phase, t.queue = phaseQueued, &queuedStart{run: run}
	}
	return t
}

func (t *task) Receive(ctx actor.Context) {
	// The runtime's own code should never panic here; if it does, the task is
	// recorded failed rather than restarted (a restart would lose the outcome and
	// could never be what a background task wants).
	if err := contain.Call("task actor", func() error { t.receive(ctx); return nil }); err != nil {
		t.rt.log.Error("taskrt: task actor panicked", "task", t.snap.ID, "err", err, "stack", string(err.(*messages.PanicError).Stack))
		t.transition(ctx, runtimePanicked, messages.Outcome{Status: messages.Failed, Detail: fmt.Sprintf("runtime panic: %v", err.(*messages.PanicError).Value)})
		if t.spawning != nil && t.spawning.pid != nil {
			t.flushSpawning(ctx) // a panic in Started after the announcement was made
		}
		// A panic in the Started handler after the actor announced itself must not
		// leave its starter waiting: answer it now, after the failed settlement.
		if t.starter != nil && t.self != nil {
			ctx.Send(t.starter, &startReply{id: t.snap.ID})
			t.starter = nil
		}
	}
	if !t.listened() && t.listening.Load() {
		t.listening.Store(false)
	}
}

func (t *task) receive(ctx actor.Context) {
	if t.rt.cfg.taskHook != nil {
		if _, started := ctx.Message().(*actor.Started); !started { // Started calls it itself
			t.rt.cfg.taskHook(t.snap.ID, ctx.Message())
		}
	}
	switch m := ctx.Message().(type) {
	case messages.Request:
		t.request(ctx, m)
	case taskMsg:
		t.fromRuntime(ctx, m)
	case *actor.Started:
		t.started(ctx)
	case *actor.Stopped:
		t.stopped()
	case *actor.Stopping, *actor.Restarting:
	default:
		t.rt.log.Error("taskrt: task actor received an unexpected message", "task", t.snap.ID, "type", fmt.Sprintf("%T", m))
	}
}

// request dispatches the public requests the registry routed here, each to its
// file.
func (t *task) request(ctx actor.Context, req messages.Request) {
	switch m := req.(type) {
	case *messages.ReadTask:
		t.read(ctx)
	case *messages.KillTask:
		t.kill(ctx, m)
	case *messages.WaitTask:
		t.wait(ctx, m)
	case *messages.ReadUntil:
		t.readUntil(ctx, m)
	case *messages.PeekTask:
		t.peek(ctx, m)
	case *messages.InputTask:
		t.input(ctx, m)
	}
}

// fromRuntime dispatches the task's internal messages: its producer's results
// coming home, its timers, the registry's and its owner's commands.
func (t *task) fromRuntime(ctx actor.Context, msg taskMsg) {
	switch m := msg.(type) {
	case *outcomeMsg:
		t.outcome(ctx, m)
	case *cancelResult:
		t.cancelled(ctx, m)
	case *runQueued:
		t.runQueued()
	case *queuedRan:
		t.queuedRan(ctx, m)
	case *waitTimeout:
		t.endWait(ctx, func(w *waiter) bool { return w.n == m.n })
	case *abandonWait:
		t.abandonWait(ctx, m)
	case *untilTimeout:
		t.endUntil(ctx, func(w *untilWaiter) bool { return w.n == m.n }, true)
	case *outputGrew:
		t.outputGrew(ctx)
	case *outputFull:
		t.checkFull(ctx)
	case *inputDone:
		t.inputDone(ctx, m)
	case *inputGraceOver:
		t.inputGraceOver(ctx)
	case *watchTask:
		t.startWatch(ctx, m)
	case *watchTimeout:
		t.watchTimedOut(m)
	case *watchCapped:
		t.endWatch(m.n, "")
	case *teardown:
		t.teardown(ctx, m)
	case *settleTimeout:
		t.settleTimedOut(ctx)
	case *reportedByRegistry:
		t.markReported() // the registry knows: it answered a wait or a kill for it
	}
}

// started is the task's first message: it announces itself to the registry (with
// a settlement made within Run riding on the announcement), follows its output and
// its Done — unless it is queued: it does that once it runs — and answers its
// starter last.
func (t *task) started(ctx actor.Context) {
	t.rt.nActors.Add(1)
	t.self = ctx.Self()
	// The announcement waits until the end of Started, so that work done within
	// Run, settled below, rides on it (toRegistry): one message to the registry
	// instead of two. It still reaches the registry before anything else this
	// task sends it, and before the starter's answer.
	t.spawning.pid = t.self
	if t.rt.cfg.taskHook != nil {
		t.rt.cfg.taskHook(t.snap.ID, ctx.Message())
	}
	// Output first: output written before now is announced with a message to
	// self, which must reach the mailbox before any outcome the done selector
	// forwards, so that a task's output event never follows its settlement.
	if t.phase != phaseQueued {
		t.followOutput()
		t.selectDone(ctx)
	}
	t.flushSpawning(ctx)
	// The starter last: a task whose work was done within Run has settled by
	// now (selectDone), so the settlement is indexed before the id is known.
	if t.starter != nil {
		ctx.Send(t.starter, &startReply{id: t.snap.ID})
		t.starter = nil
	}
}

// transition is the only place the task's phase and status change: it applies
// rule r with outcome o (the settled status and detail, for a rule that settles)
// and tells the registry, once, in one message that carries every change made
// before it (Reported included). It returns false when r does not apply from the
// task's phase (the first settled outcome wins; a terminal snapshot is immutable
// but for Reported).
func (t *task) transition(ctx actor.Context, r taskRule, o messages.Outcome) bool {
	if !r.applies(t.phase) {
		return false
	}
	if hook := t.rt.cfg.ruleHook; hook != nil {
		hook(t.snap.ID, r.String())
	}
	t.phase = taskRules[r].to
	switch t.phase {
	case phaseRunning:
		t.snap.Status = messages.Running
		t.snap.Started = time.Now()
		t.toRegistry(ctx, &taskChanged{snap: t.snap})
	case phaseStopping:
		t.snap.Status = messages.Stopping
		t.snap.OutputFull = false                    // the stop ends block mode (the producer's Cancel unblocks its writer)
		if pr := t.pendingOf(); pr.stopAt.IsZero() { // a kill's stop began when it was asked for (cancelAsync)
			pr.stopAt = time.Now()
		}
		t.toRegistry(ctx, &taskChanged{snap: t.snap})
		t.failQueuedInputs(ctx)
	case phaseSettled:
		t.settle(ctx, o)
	}
	return true
}

// settle is the settled phase's entry: the outcome recorded, the registry told,
// and everyone waiting on the end answered.
func (t *task) settle(ctx actor.Context, o messages.Outcome) {
	t.snap.Status = o.Status
	t.snap.Detail = o.Detail
	t.snap.Finished = time.Now()
	t.snap.OutputFull = false
	if at := t.stopBegan(); !at.IsZero() {
		t.rt.metrics.taskStopped(t.snap.Kind, t.snap.Finished.Sub(at))
	}
	if !t.streams() {
		t.output = o.Output
	}
	// A wait pending at settlement returns the terminal state, and a kill in
	// flight answers for it: either way the model learns of the end.
	if t.liveWaiters() > 0 || t.killsInFlight() > 0 {
		t.markReported()
	}
	t.stopSelect()
	t.endWatches() // after a last scan: their notices come before the completion notice
	var size int64
	if out := t.stream(); out != nil {
		size, _ = contain.Value("output", func() (int64, error) { return out.Written(), nil })
	}
	t.toRegistry(ctx, &taskSettled{id: t.snap.ID, status: t.snap.Status, detail: t.snap.Detail, finished: t.snap.Finished,
		reported: t.snap.Reported, bytes: size, queued: t.queue != nil && !t.queue.dispatched})
	t.waitersAtSettle(ctx)
	t.endUntils(ctx, messages.UntilEnded)
	t.failQueuedInputs(ctx)
	t.answerTeardown(ctx)
}

// toRegistry tells the registry m. While Started runs, the task's announcement
// (taskSpawned) is held: a settlement made then rides on it, and anything else
// sends the announcement first, so the registry sees the task's messages in the
// order they were made.
func (t *task) toRegistry(ctx actor.Context, m registryMsg) {
	if sp := t.spawning; sp != nil {
		if s, ok := m.(*taskSettled); ok && sp.settled == nil {
			sp.settled = s
			return
		}
		t.flushSpawning(ctx)
	}
	tellRegistry(ctx, t.rt, m)
}

// flushSpawning sends the held announcement, if any.
func (t *task) flushSpawning(ctx actor.Context) {
	if sp := t.spawning; sp != nil {
		t.spawning = nil
		tellRegistry(ctx, t.rt, sp)
	}
}

// report marks the task reported and tells the registry: the model has seen the
// task's end, killed it, or teardown ended it, so no completion notice will be sent.
func (t *task) report(ctx actor.Context) {
	if t.markReported() {
		t.toRegistry(ctx, &taskChanged{snap: t.snap})
	}
}

// markReported is the one place Reported is set; it reports whether it changed.
// Reported only ever goes from false to true.
func (t *task) markReported() bool {
	if t.snap.Reported {
		return false
	}
	t.snap.Reported = true
	return true
}

func (t *task) outcome(ctx actor.Context, m *outcomeMsg) {
	switch {
	case !m.ok:
		t.rt.log.Error("taskrt: producer contract violation: Done closed without an outcome", "task", t.snap.ID)
		t.transition(ctx, contractBroken, messages.Outcome{Status: messages.Failed,
			Detail: "producer contract violation: Done closed without an outcome"})
	case !m.outcome.Status.Terminal():
		t.rt.log.Error("taskrt: producer contract violation: non-terminal outcome", "task", t.snap.ID, "status", m.outcome.Status)
		t.transition(ctx, contractBroken, messages.Outcome{Status: messages.Failed,
			Detail: fmt.Sprintf("producer contract violation: outcome status %q is not terminal", m.outcome.Status)})
	default:
		t.transition(ctx, outcomeDelivered, m.outcome)
	}
}

// selectDone awaits the producer's Done off the mailbox and sends the outcome home.
// An outcome that is there already (work done within Run) is taken at once, without
// a selector: it settles the task on the spot when no output announcement
// is on its way to the mailbox (grew unset: nothing written before now needs an
// event, or no one subscribes), and otherwise goes home as a message, after what
// followOutput sent, so that output is announced before the settlement either way.
// Called on the mailbox, after followOutput.
func (t *task) selectDone(ctx actor.Context) {
	done, self, rt := t.hooks.Done, t.self, t.rt
	select {
	case o, ok := <-done:
		if t.grew.Load() {
			tellTask(ctx, self, &outcomeMsg{outcome: o, ok: ok})
			return
		}
		t.outcome(ctx, &outcomeMsg{outcome: o, ok: ok})
		return
	default:
	}
	t.done = rt.kernel.SelectDone(done, self)
}

// stopSelect leaves the done selector (settled, or the actor stops).
func (t *task) stopSelect() {
	if t.done != nil {
		t.done.Stop()
	}
}

// producerCalls tracks the producer calls a task makes off its mailbox. A call is in
// flight from run (on the mailbox) until the mailbox has taken its result (taken):
// teardown is answered only once none is. Its producer code runs from run until it
// returns, which is what Release waits for once the actor may be gone.
type producerCalls struct {
	inFlight int            // calls whose result the mailbox has not taken yet
	running  sync.WaitGroup // calls whose producer code (and result send) has not returned
}

// run starts f, a producer call that sends its result home, on a goroutine the
// runtime owns. Called on the mailbox.
func (c *producerCalls) run(rt *Runtime, what string, f func()) {
	c.inFlight++
	c.running.Add(1)
	rt.goSafe(what, func() {
		defer c.running.Done()
		f()
	})
}

// taken: the mailbox took a call's result. Called on the mailbox.
func (c *producerCalls) taken() { c.inFlight-- }

// cancelAsync calls the producer's Cancel off the mailbox; the result comes back as a
// cancelResult. sender is the KillTask requester; nil for a teardown's Cancel.
func (t *task) cancelAsync(reason string, sender *actor.PID) {
	if sender != nil && t.phase == phaseRunning && t.stopBegan().IsZero() {
		// A kill's stop begins now: the work may settle while Cancel runs, before
		// the kill is accepted, and its stop is still timed (stop_duration).
		t.pendingOf().stopAt = time.Now()
	}
	cancel, self, rt := t.hooks.Cancel, t.self, t.rt
	t.calls.run(rt, "cancel", func() {
		err := contain.Call("cancel", func() error { return cancel(reason) })
		tellTask(rt.system.Root, self, &cancelResult{err: err, sender: sender})
	})
}

// cancelled takes a Cancel call's result: a teardown's (force-fail when it errs) or
// a kill's (killCancelled).
func (t *task) cancelled(ctx actor.Context, r *cancelResult) {
	t.calls.taken()
	if r.teardown() {
		t.teardownCancelled(ctx, r)
	} else {
		t.killCancelled(ctx, r)
	}
	t.answerTeardown(ctx)
}

// stopped runs when the record is dropped. Any waiter still pending is answered (none
// should be: records are dropped after settlement), and a task stopped while its work
// is live (only when the runtime failed) has its work cancelled. Release runs once
// every Cancel call returned.
func (t *task) stopped() {
	t.rt.nActors.Add(-1)
	// Every request still pending gets its answer now: the answers that waited on an
	// event or on producer code still running (a kill's Cancel, an input's write)
	// would come as messages to an actor that is gone.
	t.endWatches()
	t.waitersAtStop()
	t.untilsAtStop()
	t.killsAtStop()
	t.inputsAtStop()
	t.teardownAtStop()
	if t.phase != phaseSettled {
		t.stopSelect()
		t.rt.log.Error("taskrt: task actor stopped before its work settled; cancelling it", "task", t.snap.ID)
		t.cancelAsync("runtime failed", nil)
	}
	release := t.hooks.Release
	if release == nil {
		return
	}
	run := func() {
		if err := contain.Call("release", func() error { release(); return nil }); err != nil {
			t.rt.log.Error("taskrt: Release panicked", "task", t.snap.ID, "err", err)
		}
	}
	if t.calls.inFlight == 0 {
		run()
		return
	}
	t.rt.goSafe("release", func() { t.calls.running.Wait(); run() })
}

func invalidWaitTimeout(d time.Duration) error {
	return fmt.Errorf("%w: invalid wait timeout %s: it must be positive", messages.ErrInvalidArgument, d)
}
