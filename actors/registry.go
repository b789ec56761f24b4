package actors

import (
	"fmt"
	"reflect"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// registry is the root actor of a runtime. It owns the id counters, the index of
// tasks (id → owner, task actor, mirrored snapshot), the agents, the attached
// surfaces, the start reservations and the OnDone listener actors, and it routes
// every caller request after the owner check. It never runs producer, listener or
// cleanup code and never waits: everything slow happens on task and agent actors or
// on goroutines the runtime owns, and comes back as messages.
//
// The runtime's life, in phases (setPhase is the only place it changes):
//
//	open ──Close──▶ closing ──no start in flight, no agent left,──▶ stopping ──no child left──▶ (stopped)
//	                (starts and registrations    every unowned task      (unowned task actors and
//	                 refused; agents disposing;  answered teardown)      listener actors poisoned)
//	                 unowned tasks torn down)
//
// A panic in the registry's own code is a runtime bug that may have left its state
// half-updated; the registry does not carry on as if nothing happened. It records the
// fault (Runtime.Close returns it, and every later call fails with ErrClosed wrapping
// it), then closes: every task is torn down and every agent disposed as far as the
// state allows. A second panic during that teardown stops the tree outright; a task
// actor stopped while its work is live cancels the work itself.
type registry struct {
	rt    *Runtime
	phase runtimePhase

	closeWaiters []*actor.PID // Close callers, answered when the registry stopped
	// awaiting holds the unowned task actors a close tore down that have neither
	// answered teardownDone nor stopped (closing only). As for an agent's tasks, an
	// actor retention evicts may stop without answering.
	awaiting map[string]struct{}

	surfaces    map[uint64]string
	nextSurface uint64

	counters map[string]int // per-kind id counters
	starts   map[uint64]*reservation
	// committing holds the keyed starts committed but not yet indexed, by id, with
	// the duplicates parked behind them (keys.go).
	committing map[messages.TaskID]*reservation
	nextToken  uint64
	seq        uint64 // start order

	tasks   map[messages.TaskID]*taskEntry
	unowned bucket
	// globalLive counts every bucket's live (running, stopping, reserved) against
	// WithGlobalLimit; fair is the round robin of queued starts (queue.go).
	globalLive int
	fair       fairness
	agents     map[messages.AgentID]*agentEntry
	byPID      map[string]*agentEntry // by actor id, for Terminated

	listeners  map[string]*actor.PID    // OnDone listener actors, by actor id
	setWaiters map[string][2]*actor.PID // set waiter actors by actor id: {waiter, requester}

	overdue map[messages.AgentID]*time.Timer // armed start-overdue timers, by owner ("" = close)

	subscribers map[*subscriber]struct{} // event subscriptions (Runtime.Subscribe)

	spawner *kernel.Spawner // spawns the unowned task actors; nil until the first
}

type runtimePhase int

const (
	runtimeOpen     runtimePhase = iota // serving
	runtimeClosing                      // Close began: tearing everything down
	runtimeStopping                     // everything settled: stopping the remaining children
)

// taskEntry is the registry's record of a task: a live or retained task (pid set) or
// a tombstone (pid nil, snap.Evicted set), which the registry answers itself.
type taskEntry struct {
	snap        messages.Snapshot
	pid         *actor.PID
	box         *kernel.Mailbox // pid's mailbox, made by the spawner; nil with pid (kernel.Stop)
	seq         uint64
	notified    bool   // the completion notice was claimed (notifyTask)
	key         string // Spec.Key, "" for none (keys.go)
	watchCounts        // live watches and the notice claims they hold (watch.go)
}

// report marks a tombstone reported; while the task actor lives, the actor does.
func (e *taskEntry) report() { e.snap.Reported = true }

const (
	agentOpen             agentPhase = iota // accepting starts, cleanups and notices
	agentAwaitingStarts                     // disposing: starts in flight must commit or abort first
	agentCleaning                           // the agent actor runs its cleanups (runCleanups)
	agentTearingDown                        // the agent actor tears its tasks down (tearDownTasks)
	agentAwaitingChildren                   // its tasks settled; its child agents are still disposing
	agentStopping                           // records dropped, task actors poisoned, actor stopping
)

func newRegistry(rt *Runtime) *registry {
	return &registry{
		rt:          rt,
		surfaces:    map[uint64]string{},
		counters:    map[string]int{},
		starts:      map[uint64]*reservation{},
		tasks:       map[messages.TaskID]*taskEntry{},
		agents:      map[messages.AgentID]*agentEntry{},
		byPID:       map[string]*agentEntry{},
		listeners:   map[string]*actor.PID{},
		setWaiters:  map[string][2]*actor.PID{},
		overdue:     map[messages.AgentID]*time.Timer{},
		subscribers: map[*subscriber]struct{}{},
		awaiting:    map[string]struct{}{},
	}
}

// visible is the owner fence: unowned tasks are open to every caller; an owned task
// to its owner and to the owner's ancestors (agents registered WithParent above it),
// unless WithoutAncestorAccess. Descendants, siblings and unrelated agents never see
// it.
func (r *registry) visible(owner, caller messages.AgentID) bool {
	if owner == "" || owner == caller {
		return true
	}
	if caller == "" || !r.rt.cfg.ancestors {
		return false
	}
	return r.descends(owner, caller)
}

// descends reports whether agent is ancestor or one of its descendants (agents
// registered WithParent below it), walking agent's parents. The owner fence (visible)
// and event scopes (publish) both ask it.
func (r *registry) descends(agent, ancestor messages.AgentID) bool {
	for a := agent; a != ""; {
		if a == ancestor {
			return true
		}
		e, ok := r.agents[a]
		if !ok {
			return false
		}
		a = e.parent
	}
	return false
}

func (r *registry) Receive(ctx actor.Context) {
	err := contain.Call("registry", func() error { r.receive(ctx); return nil })
	if err == nil {
		return
	}
	pe := err.(*messages.PanicError)
	r.rt.log.Error("taskrt: registry panicked; closing the runtime", "message", fmt.Sprintf("%T", ctx.Message()), "err", pe, "stack", string(pe.Stack))
	if !r.rt.recordFault(pe) {
		// A panic while handling the first one: stop the tree outright.
		ctx.Stop(ctx.Self())
		return
	}
	if err := contain.Call("registry", func() error { r.beginClose(ctx); return nil }); err != nil {
		ctx.Stop(ctx.Self())
	}
}

func (r *registry) receive(ctx actor.Context) {
	if r.rt.cfg.registryHook != nil {
		r.rt.cfg.registryHook(ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case messages.Request:
		r.request(ctx, m)
	case registryCall:
		r.fromCaller(ctx, m)
	case registryReport:
		r.fromRuntime(ctx, m)
	default:
		r.system(ctx, m)
	}
}

// request dispatches the public requests (messages.Request), each to its file.
func (r *registry) request(ctx actor.Context, req messages.Request) {
	if ctx.Sender() == nil {
		r.noSender(ctx, req)
		return
	}
	switch m := req.(type) {
	case *messages.GetTask:
		r.get(ctx, m)
	case *messages.ListTasks:
		r.listTasks(ctx, m)
	case *messages.ReadTask:
		r.read(ctx, m)
	case *messages.KillTask:
		r.kill(ctx, m)
	case *messages.WaitTask:
		r.wait(ctx, m)
	case *messages.WaitTasks:
		r.waitTasks(ctx, m)
	case *messages.ReadUntil:
		r.readUntil(ctx, m)
	case *messages.PeekTask:
		r.peek(ctx, m)
	case *messages.InputTask:
		r.input(ctx, m)
	}
}

// fromCaller dispatches the typed client's internal requests.
func (r *registry) fromCaller(ctx actor.Context, msg registryCall) {
	switch m := msg.(type) {
	case *reserveStart:
		if rep := r.reserve(m, ctx.Sender()); rep != nil {
			ctx.Respond(rep)
		}
	case *commitStart:
		r.commit(ctx, m)
	case *abortStart:
		r.abortStart(ctx, m)
	case *attachSurface:
		r.attachSurface(ctx, m)
	case *detachSurface:
		delete(r.surfaces, m.handle)
	case *abandonWait:
		r.abandonWait(ctx, m)
	case *abandonSet:
		r.abandonSet(ctx, m)
	case *queuePosition:
		r.queuePosition(ctx, m)
	case *watchTask:
		r.watch(ctx, m)
	case *countWatches:
		r.countWatches(ctx, m)
	case *notifyTask:
		r.notifyTask(ctx, m)
	case *lookupAgent:
		r.lookupAgent(ctx, m)
	case *addListener:
		r.addListener(ctx, m)
	case *dropListener:
		r.dropListener(ctx, m)
	case *subscribeEvents:
		r.subscribe(ctx, m)
	case *unsubscribeEvents:
		r.unsubscribe(m)
	case *registerAgent:
		ctx.Respond(&errReply{err: r.register(ctx, m)})
	case *addCleanup:
		r.addCleanup(ctx, m)
	case *removeCleanup:
		r.removeCleanup(ctx, m)
	case *disposeAgent:
		r.disposeAgent(ctx, m)
	case *closeRuntime:
		r.closeWaiters = append(r.closeWaiters, ctx.Sender())
		r.beginClose(ctx)
	}
}

// fromRuntime dispatches what the runtime's own actors and timers report.
func (r *registry) fromRuntime(ctx actor.Context, msg registryReport) {
	switch m := msg.(type) {
	case *taskSpawned:
		r.spawned(ctx, m)
	case *taskChanged:
		r.taskChanged(m)
	case *taskSettled:
		r.settled(ctx, m)
	case *taskOutput:
		r.taskOutput(m)
	case *watchEnded:
		r.watchEnded(ctx, m)
	case *startsOverdue:
		delete(r.overdue, m.owner)
		r.abandonStarts(ctx, m.owner)
	case *agentFailed:
		if a, ok := r.agents[m.id]; ok {
			r.agentFailed(ctx, a, m.err)
		}
	case *cleanupsRan:
		if a, ok := r.agents[m.id]; ok && a.phase == agentCleaning {
			r.advanceAgent(ctx, a, agentTearingDown)
		}
	case *tasksTornDown:
		if a, ok := r.agents[m.id]; ok && a.phase == agentTearingDown {
			r.advanceAgent(ctx, a, agentAwaitingChildren)
		}
	case *teardownDone:
		delete(r.awaiting, m.pid.Id)
		r.advanceClose(ctx)
	}
}

// system handles protoactor's messages, and a message the registry does not
// accept: logged, and a requester answered, so that it does not wait forever.
func (r *registry) system(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *actor.Started:
		r.rt.nActors.Add(1)
	case *actor.Stopping, *actor.Restarting:
	case *actor.DeadLetterResponse:
		// A request of ours reached a stopped actor; the only requests the registry
		// makes are close teardowns, so count the answer as given.
		if _, ok := r.awaiting[m.Target.Id]; ok {
			delete(r.awaiting, m.Target.Id)
			r.advanceClose(ctx)
		}
	case *actor.Terminated:
		r.terminated(ctx, m)
	case *actor.Stopped:
		r.stopped()
	case messages.GetTask, messages.ListTasks, messages.ReadTask, messages.KillTask, messages.WaitTask, messages.WaitTasks,
		messages.InputTask, messages.ReadUntil, messages.PeekTask:
		r.byValue(ctx, m)
	default:
		r.rt.log.Error("taskrt: registry received an unexpected message", "type", fmt.Sprintf("%T", m))
		if ctx.Sender() != nil {
			ctx.Respond(fmt.Errorf("%w: the registry does not accept %T", messages.ErrInvalidArgument, m))
		}
	}
}

// taskChanged takes a task's changed snapshot into the index, with the events and
// metrics the change makes.
func (r *registry) taskChanged(m *taskChanged) {
	e, ok := r.tasks[m.snap.ID]
	if !ok {
		return
	}
	if e.tombstone() { // evicted meanwhile: the change can only be Reported
		e.snap.Reported = e.snap.Reported || m.snap.Reported
		return
	}
	if e.snap.Status != messages.Stopping && m.snap.Status == messages.Stopping {
		r.publish(messages.Event{Kind: messages.EventTaskStopping, Agent: m.snap.Owner, Task: m.snap})
	}
	// The metrics before the event: a subscriber that saw it reads them updated.
	if e.snap.Status == messages.Queued && m.snap.Status != messages.Queued {
		r.rt.metrics.queueLeft(m.snap.Kind)
	}
	if e.snap.Status == messages.Queued && m.snap.Status == messages.Running {
		r.rt.metrics.taskStarted(m.snap.Kind)
		r.publish(messages.Event{Kind: messages.EventTaskStarted, Agent: m.snap.Owner, Task: m.snap})
	}
	if e.snap.OutputFull != m.snap.OutputFull {
		r.publish(messages.Event{Kind: messages.EventTaskOutputFull, Agent: m.snap.Owner, Task: m.snap})
	}
	reported := e.snap.Reported // Reported only goes from false to true; the registry may know first
	e.snap = m.snap
	e.snap.Reported = e.snap.Reported || reported
}

// byValue answers a public request sent by value instead of by pointer with the
// matching reply carrying ErrInvalidArgument.
func (r *registry) byValue(ctx actor.Context, m any) {
	ctx.Respond(refusal(m, fmt.Errorf("%w: send *messages.%s, not a value", messages.ErrInvalidArgument, reflect.TypeOf(m).Name())))
}

// noSender refuses a public request that came without a sender (sent with Send, not
// Request or RequestFuture): nobody could be answered, and a task must not act on a
// request whose answer has nowhere to go (before, a routed one failed the task with a
// nil-pointer panic when it answered). The refusal is logged, and its reply goes to
// the actor system's dead letters (a DeadLetterEvent on its EventStream), where the
// embedder can see it.
func (r *registry) noSender(ctx actor.Context, m messages.Request) {
	r.rt.log.Error("taskrt: request without a sender refused; send it with Request or RequestFuture", "type", fmt.Sprintf("%T", m))
	ctx.Respond(refusal(m, fmt.Errorf("%w: %T sent without a sender (use Request or RequestFuture): nobody to answer", messages.ErrInvalidArgument, m)))
}

// refusal is the reply to the public request m (by pointer or by value) that carries
// err.
func refusal(m any, err error) any {
	switch m.(type) {
	case *messages.GetTask, messages.GetTask:
		return &messages.SnapshotReply{Err: err}
	case *messages.ListTasks, messages.ListTasks:
		return &messages.ListReply{Err: err}
	case *messages.ReadTask, messages.ReadTask:
		return &messages.ReadReply{Err: err}
	case *messages.KillTask, messages.KillTask:
		return &messages.KillReply{Err: err}
	case *messages.WaitTask, messages.WaitTask:
		return &messages.WaitReply{Err: err}
	case *messages.WaitTasks, messages.WaitTasks:
		return &messages.WaitTasksReply{Err: err}
	case *messages.InputTask, messages.InputTask:
		return &messages.InputReply{Err: err}
	case *messages.ReadUntil, messages.ReadUntil:
		return &messages.ReadUntilReply{Err: err}
	case *messages.PeekTask, messages.PeekTask:
		return &messages.PeekReply{Err: err}
	}
	return err
}

// ---- settlements ----

// settled takes in a task's settlement: the index and counters, the event and the
// metrics, the listeners, the owner's slot, and retention.
func (r *registry) settled(ctx actor.Context, m *taskSettled) {
	e, ok := r.tasks[m.id]
	if !ok {
		return
	}
	if e.snap.Status == messages.Queued {
		r.rt.metrics.queueLeft(e.snap.Kind) // settled while queued
	}
	e.snap.Status, e.snap.Detail, e.snap.Finished = m.status, m.detail, m.finished
	e.snap.Reported = e.snap.Reported || m.reported
	snap := e.snap
	r.rt.nRunning.Add(-1)
	r.rt.nRetained.Add(1)
	r.publish(messages.Event{Kind: messages.EventTaskSettled, Agent: snap.Owner, Task: snap, Bytes: m.bytes})
	r.rt.metrics.taskSettled(snap)
	if snap.Owner != "" && snap.Reported {
		// Reported at settlement (a kill, a pending wait, teardown): no notice.
		e.notified = true
		r.rt.metrics.notice("suppressed")
	}
	// Listeners are silent from the moment Close begins.
	if r.phase == runtimeOpen && !r.rt.closing.Load() {
		for _, pid := range r.listeners {
			tellListener(ctx, pid, &settlement{snap: snap})
		}
	}
	b := r.bucketOf(snap.Owner)
	if b == nil {
		return
	}
	r.slotFreed(ctx, b, m)
	b.retained.push(e)
	for b.retained.len() > r.rt.cfg.retention {
		r.evict(ctx, b, b.retained.pop())
	}
}

// ---- reads ----

// reach is the owner fence: the caller's record of task id, or nil for an unknown
// id and, alike, for a task the caller may not reach — one not-found answer for
// both, so that no task's existence leaks.
func (r *registry) reach(id messages.TaskID, caller messages.AgentID) *taskEntry {
	e, ok := r.tasks[id]
	if !ok || !r.visible(e.snap.Owner, caller) {
		return nil
	}
	return e
}

// tombstone reports whether e is an evicted task's tombstone, which the registry
// answers itself.
func (e *taskEntry) tombstone() bool { return e.pid == nil }

// reportSettled marks a settled task whose actor lives reported, for an answer
// the registry gives from its index without the hop to the task (a wait or a kill:
// the registry's snapshot of a settled task is the task's own, taskSettled having
// come before), and tells the task (reportedByRegistry), ahead of every later
// request it routes there, so that the task's later replies show it. The answer
// shows the model the task's end, so the task is reported before it is answered:
// a completion notice claimed after it is suppressed.
func (r *registry) reportSettled(ctx actor.Context, e *taskEntry) {
	if !e.snap.Reported {
		e.snap.Reported = true
		tellTask(ctx, e.pid, &reportedByRegistry{})
	}
}

func notFound(id messages.TaskID) error {
	return fmt.Errorf("%w: %s", messages.ErrTaskNotFound, id)
}
