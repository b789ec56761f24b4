package actors

import (
	"fmt"
	"reflect"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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

	// evicted stops the actors of the records retention evicts (retention.go).
	evicted stopQueue

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

	spawner *taskSpawner // spawns the unowned task actors; nil until the first
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
	box         *mailbox // pid's mailbox, made by the spawner; nil with pid
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
	err := messages.Contain("registry", func() error { r.receive(ctx); return nil })
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
	if err := messages.Contain("registry", func() error { r.beginClose(ctx); return nil }); err != nil {
		ctx.Stop(ctx.Self())
	}
}

func (r *registry) receive(ctx actor.Context) {
	if r.rt.cfg.registryHook != nil {
		r.rt.cfg.registryHook(ctx.Message())
	}
	if req, ok := ctx.Message().(messages.Request); ok && ctx.Sender() == nil {
		r.noSender(ctx, req)
		return
	}
	switch m := ctx.Message().(type) {
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

	// ---- public requests (messages.Request) ----
	case *messages.GetTask:
		e, ok := r.tasks[m.ID]
		if !ok || !r.visible(e.snap.Owner, m.Caller) {
			ctx.Respond(&messages.SnapshotReply{Err: notFound(m.ID)})
			return
		}
		ctx.Respond(&messages.SnapshotReply{Snapshot: e.snap})
	case *messages.ListTasks:
		ctx.Respond(&messages.ListReply{Snapshots: r.list(m.Caller)})
	case *messages.ReadTask:
		r.read(ctx, m)
	case *messages.KillTask:
		r.kill(ctx, m)
	case *messages.ReadUntil:
		r.readUntil(ctx, m)
	case *messages.PeekTask:
		r.peek(ctx, m)
	case *messages.InputTask:
		r.input(ctx, m)
	case *messages.WaitTask:
		r.wait(ctx, m)
	case *messages.WaitTasks:
		req, err := r.checkWaitSet(m)
		if err != nil {
			ctx.Respond(&messages.WaitTasksReply{Err: err})
			return
		}
		pid := ctx.Spawn(newSetWaiterProps(r.rt, req, ctx.Sender()))
		r.setWaiters[pid.Id] = [2]*actor.PID{pid, ctx.Sender()}
	case *abandonSet:
		for _, w := range r.setWaiters {
			if w[1].Equal(m.requester) {
				tellSetWaiter(ctx, w[0], m)
			}
		}
	case messages.GetTask, messages.ListTasks, messages.ReadTask, messages.KillTask, messages.WaitTask, messages.WaitTasks,
		messages.InputTask, messages.ReadUntil, messages.PeekTask:
		r.byValue(ctx, m)

	// ---- starts ----
	case *reserveStart:
		if rep := r.reserve(m, ctx.Sender()); rep != nil {
			ctx.Respond(rep)
		}
	case *commitStart:
		r.commit(ctx, m)
	case *abortStart:
		if res, ok := r.starts[m.token]; ok {
			delete(r.starts, m.token)
			r.startResolved(ctx, res.owner, res.b)
			r.keyAborted(ctx, res)
			r.unreserve(ctx, res)
		}
	case *startsOverdue:
		delete(r.overdue, m.owner)
		r.abandonStarts(ctx, m.owner)
	case *taskSpawned:
		r.spawned(ctx, m)
		if m.settled != nil {
			r.settled(ctx, m.settled)
		}
	case *taskChanged:
		if e, ok := r.tasks[m.snap.ID]; ok {
			if e.pid == nil { // evicted meanwhile: the change can only be Reported
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
			reported := e.snap.Reported // Reported only goes from false to true; the registry may know first
			e.snap = m.snap
			e.snap.Reported = e.snap.Reported || reported
		}
	case *taskSettled:
		r.settled(ctx, m)
	case *abandonWait:
		r.abandonWait(ctx, m)

	// ---- surfaces, listeners, notices ----
	case *attachSurface:
		r.nextSurface++
		r.surfaces[r.nextSurface] = m.name
		ctx.Respond(&attachReply{handle: r.nextSurface})
	case *detachSurface:
		delete(r.surfaces, m.handle)
	case *addListener:
		if r.phase != runtimeOpen {
			ctx.Respond(&addListenerReply{})
			return
		}
		pid := ctx.Spawn(newListenerProps(r.rt, m.l))
		r.listeners[pid.Id] = pid
		ctx.Respond(&addListenerReply{pid: pid})
	case *dropListener:
		if _, ok := r.listeners[m.pid.Id]; ok {
			delete(r.listeners, m.pid.Id)
			ctx.Poison(m.pid)
		}
	case *notifyTask:
		if !r.holdClaim(ctx, m.id) {
			ctx.Respond(r.claimNotice(m.id))
		}
	case *queuePosition:
		r.queuePosition(ctx, m)
	case *watchTask:
		r.watch(ctx, m)
	case *watchEnded:
		r.watchEnded(ctx, m)
	case *countWatches:
		r.countWatches(ctx, m)
	case *subscribeEvents:
		if r.phase != runtimeOpen {
			ctx.Respond(&errReply{err: r.rt.closedErr()})
			return
		}
		r.subscribers[m.s] = struct{}{}
		r.rt.nSubscribers.Store(int64(len(r.subscribers)))
		ctx.Respond(&errReply{})
	case *unsubscribeEvents:
		for s := range r.subscribers {
			if s.sub == m.sub {
				delete(r.subscribers, s)
				close(s.sub.ch)
			}
		}
		r.rt.nSubscribers.Store(int64(len(r.subscribers)))
	case *taskOutput:
		if e, ok := r.tasks[m.snap.ID]; ok && e.pid != nil {
			r.publish(messages.Event{Kind: messages.EventTaskOutput, Agent: m.snap.Owner, Task: e.snap, Bytes: m.bytes})
		}
	case *lookupAgent:
		a, ok := r.agents[m.id]
		if !ok || a.phase != agentOpen {
			ctx.Respond(&agentReply{})
			return
		}
		ctx.Respond(&agentReply{live: true, injector: a.injector})

	// ---- agents ----
	case *registerAgent:
		ctx.Respond(&errReply{err: r.register(ctx, m)})
	case *addCleanup:
		a, ok := r.agents[m.agent]
		if !ok || a.phase > agentCleaning || (a.phase != agentOpen && (m.drain == 0 || m.drain != a.drain)) {
			ctx.Respond(&addCleanupReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.agent)})
			return
		}
		ctx.Forward(a.pid)
	case *removeCleanup:
		if a, ok := r.agents[m.agent]; ok && a.phase <= agentCleaning {
			ctx.Forward(a.pid)
		}
	case *disposeAgent:
		a, ok := r.agents[m.id]
		if !ok {
			ctx.Respond(&errReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.id)})
			return
		}
		a.disposers = append(a.disposers, ctx.Sender())
		r.beginDisposal(ctx, a, "owner disposed")
	case *agentFailed:
		if a, ok := r.agents[m.id]; ok {
			r.agentFailed(ctx, a, m.err)
		}
	case *cleanupsRan:
		if a, ok := r.agents[m.id]; ok && a.phase == agentCleaning {
			r.advanceAgent(ctx, a, agentTearingDown)
		}
	case *tasksSettled:
		if a, ok := r.agents[m.id]; ok && a.phase == agentTearingDown {
			r.advanceAgent(ctx, a, agentAwaitingChildren)
		}

	// ---- close ----
	case *closeRuntime:
		r.closeWaiters = append(r.closeWaiters, ctx.Sender())
		r.beginClose(ctx)
	case *teardownDone:
		delete(r.awaiting, m.pid.Id)
		r.advanceClose(ctx)
	case *actor.Terminated:
		if a, ok := r.byPID[m.Who.Id]; ok {
			r.agentGone(ctx, a)
			return
		}
		delete(r.setWaiters, m.Who.Id)
		delete(r.awaiting, m.Who.Id) // a torn-down task that stopped without answering
		r.advanceClose(ctx)
	case *actor.Stopped:
		r.rt.nActors.Add(-1)
		r.closeSubscribers()
		for _, t := range r.overdue {
			t.Stop()
		}
		for _, w := range r.closeWaiters {
			r.rt.send(w, &errReply{})
		}
		close(r.rt.stopped)
	default:
		// An unknown message, or an internal one of another actor sent here: log it,
		// and answer a requester so that it does not wait forever.
		r.rt.log.Error("taskrt: registry received an unexpected message", "type", fmt.Sprintf("%T", m))
		if ctx.Sender() != nil {
			ctx.Respond(fmt.Errorf("%w: the registry does not accept %T", messages.ErrInvalidArgument, m))
		}
	}
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

// list returns the caller-visible tasks in start order: the unowned ones, the
// caller's own, and (with ancestor access) its descendants'. Each bucket holds its
// ids in start order (appended as tasks are indexed, in sequence), so a merge by
// sequence number gives the view without sorting.
func (r *registry) list(caller messages.AgentID) []messages.Snapshot {
	lists := [][]messages.TaskID{r.unowned.ids}
	if a, ok := r.agents[caller]; ok && caller != "" {
		lists = append(lists, a.ids)
		if r.rt.cfg.ancestors {
			lists = r.descendantIDs(a, lists)
		}
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]messages.Snapshot, 0, n)
	for {
		// Pick the list whose first live record has the lowest sequence number;
		// forgotten tombstones are skipped.
		best := -1
		var be *taskEntry
		for i := range lists {
			for len(lists[i]) > 0 {
				if e, ok := r.tasks[lists[i][0]]; ok {
					if be == nil || e.seq < be.seq {
						best, be = i, e
					}
					break
				}
				lists[i] = lists[i][1:]
			}
		}
		if be == nil {
			return out
		}
		out = append(out, be.snap)
		lists[best] = lists[best][1:]
	}
}

// descendantIDs appends the id lists of a's child agents, recursively.
func (r *registry) descendantIDs(a *agentEntry, lists [][]messages.TaskID) [][]messages.TaskID {
	for id := range a.children {
		if c, ok := r.agents[id]; ok {
			lists = r.descendantIDs(c, append(lists, c.ids))
		}
	}
	return lists
}

func notFound(id messages.TaskID) error {
	return fmt.Errorf("%w: %s", messages.ErrTaskNotFound, id)
}
