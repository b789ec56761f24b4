package actors

import (
	"fmt"
	"reflect"
	"strings"
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

	closeWaiters []*actor.PID // Close callers, answered when the registry stopped
	owed         int          // closing: teardown answers still owed by unowned tasks

	surfaces    map[uint64]string
	nextSurface uint64

	counters  map[string]int // per-kind id counters
	starts    map[uint64]*reservation
	nextToken uint64
	seq       uint64 // start order

	tasks   map[messages.TaskID]*taskEntry
	unowned bucket
	agents  map[messages.AgentID]*agentEntry
	byPID   map[string]*agentEntry // by actor id, for Terminated

	listeners  map[string]*actor.PID    // OnDone listener actors, by actor id
	setWaiters map[string][2]*actor.PID // set waiter actors by actor id: {waiter, requester}

	overdue map[messages.AgentID]*time.Timer // armed start-overdue timers, by owner ("" = close)

	subscribers map[*subscriber]struct{} // event subscriptions (Runtime.Subscribe)
}

type runtimePhase int

const (
	runtimeOpen     runtimePhase = iota // serving
	runtimeClosing                      // Close began: tearing everything down
	runtimeStopping                     // everything settled: stopping the remaining children
)

type reservation struct {
	kind, label string
	owner       messages.AgentID
	b           *bucket
}

// bucket is one owner's share (or the unowned tasks'): its slot count, its records
// in start order, and the two retention queues.
type bucket struct {
	live    int // running + stopping + reserved
	pending int // reservations not yet committed and indexed
	// ids holds every record and tombstone in start order. A forgotten tombstone's id
	// stays until the slice is compacted (when more than half of it is forgotten), so
	// forgetting costs O(1) amortized.
	ids       []messages.TaskID
	forgotten int
	retained  queue // settled tasks with full records, oldest settled first
	tombs     queue // tombstones, oldest evicted first
}

// queue is a FIFO of ids.
type queue struct{ ids []messages.TaskID }

func (q *queue) push(id messages.TaskID) { q.ids = append(q.ids, id) }
func (q *queue) len() int                { return len(q.ids) }
func (q *queue) pop() messages.TaskID {
	id := q.ids[0]
	q.ids[0] = ""
	q.ids = q.ids[1:]
	return id
}

// taskEntry is the registry's record of a task: a live or retained task (pid set) or
// a tombstone (pid nil, snap.Evicted set), which the registry answers itself.
type taskEntry struct {
	snap     messages.Snapshot
	pid      *actor.PID
	seq      uint64
	notified bool // the completion notice was claimed (notifyTask)
}

// report marks a tombstone reported; while the task actor lives, the actor does.
func (e *taskEntry) report() { e.snap.Reported = true }

// agentEntry is the registry's view of an agent.
type agentEntry struct {
	id       messages.AgentID
	pid      *actor.PID
	parent   messages.AgentID
	injector messages.Injector
	bucket
	children map[messages.AgentID]struct{}

	phase     agentPhase
	reason    string       // the teardown reason, once disposing
	disposers []*actor.PID // Dispose callers, answered when the agent is gone
}

// agentPhase is an agent's life as the registry sees it (advanceAgent is the only
// place it changes):
//
//	open ──dispose──▶ awaitingStarts ──no start in flight──▶ draining ──agentQuiesced──▶ awaitingChildren
//	awaitingChildren ──no child agent left──▶ stopping ──Terminated──▶ (removed; Dispose callers answered)
type agentPhase int

const (
	agentOpen             agentPhase = iota // accepting starts, cleanups and notices
	agentAwaitingStarts                     // disposing: starts in flight must commit or abort first
	agentDraining                           // the agent actor runs cleanups, then tears its tasks down
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
	for a, ok := r.agents[owner]; ok && a.parent != ""; a, ok = r.agents[a.parent] {
		if a.parent == caller {
			return true
		}
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
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.rt.nActors.Add(1)
	case *actor.Stopping, *actor.Restarting:
	case *actor.DeadLetterResponse:
		// A request of ours reached a stopped actor; the only requests the registry
		// makes are close teardowns, so count the answer as given.
		if r.phase == runtimeClosing && r.owed > 0 {
			r.owed--
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
		if !r.route(ctx, m.ID, m.Caller) {
			ctx.Respond(&messages.ReadReply{Err: notFound(m.ID)})
		}
	case *messages.KillTask:
		if !r.route(ctx, m.ID, m.Caller) {
			ctx.Respond(&messages.KillReply{Err: notFound(m.ID)})
		}
	case *messages.ReadUntil:
		switch {
		case m.Timeout <= 0:
			ctx.Respond(&messages.ReadUntilReply{Err: invalidWaitTimeout(m.Timeout)})
		case !r.route(ctx, m.ID, m.Caller):
			ctx.Respond(&messages.ReadUntilReply{Err: notFound(m.ID)})
		}
	case *messages.PeekTask:
		if !r.route(ctx, m.ID, m.Caller) {
			ctx.Respond(&messages.PeekReply{Err: notFound(m.ID)})
		}
	case *messages.InputTask:
		switch {
		case len(m.Data) > messages.MaxInput:
			ctx.Respond(&messages.InputReply{Err: fmt.Errorf("%w: input of %d bytes is over the bound of %d bytes per call",
				messages.ErrInvalidArgument, len(m.Data), messages.MaxInput)})
		case !r.route(ctx, m.ID, m.Caller):
			ctx.Respond(&messages.InputReply{Err: notFound(m.ID)})
		}
	case *messages.WaitTask:
		switch {
		case m.Timeout <= 0:
			ctx.Respond(&messages.WaitReply{ID: m.ID, Err: invalidWaitTimeout(m.Timeout)})
		case !r.route(ctx, m.ID, m.Caller):
			ctx.Respond(&messages.WaitReply{ID: m.ID, Err: notFound(m.ID)})
		}
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
				ctx.Send(w[0], m)
			}
		}
	case messages.GetTask, messages.ListTasks, messages.ReadTask, messages.KillTask, messages.WaitTask, messages.WaitTasks,
		messages.InputTask, messages.ReadUntil, messages.PeekTask:
		r.byValue(ctx, m)

	// ---- starts ----
	case *reserveStart:
		ctx.Respond(r.reserve(m))
	case *commitStart:
		r.commit(ctx, m)
	case *abortStart:
		if res, ok := r.starts[m.token]; ok {
			delete(r.starts, m.token)
			res.b.live--
			r.startResolved(ctx, res.owner, res.b)
		}
	case *startsOverdue:
		delete(r.overdue, m.owner)
		r.abandonStarts(ctx, m.owner)
	case *taskSpawned:
		r.spawned(ctx, m)
	case *taskChanged:
		if e, ok := r.tasks[m.snap.ID]; ok {
			if e.pid == nil { // evicted meanwhile: the change can only be Reported
				e.snap.Reported = e.snap.Reported || m.snap.Reported
				return
			}
			if e.snap.Status != messages.Stopping && m.snap.Status == messages.Stopping {
				r.publish(messages.Event{Kind: messages.EventTaskStopping, Agent: m.snap.Owner, Task: m.snap})
			}
			e.snap = m.snap
		}
	case *taskSettled:
		r.settled(ctx, m)
	case *abandonWait:
		// Nothing to do when the task is gone or evicted: its actor answered every
		// waiter when it settled or stopped.
		if e, ok := r.tasks[m.id]; ok && e.pid != nil && r.visible(e.snap.Owner, m.caller) {
			ctx.Forward(e.pid)
		}

	// ---- surfaces, listeners, notices ----
	case *attachSurface:
		r.nextSurface++
		r.surfaces[r.nextSurface] = m.name
		ctx.Respond(&attachReply{handle: r.nextSurface})
	case *detachSurface:
		delete(r.surfaces, m.handle)
	case *subscribe:
		if r.phase != runtimeOpen {
			ctx.Respond(&subscribeReply{})
			return
		}
		pid := ctx.Spawn(newListenerProps(r.rt, m.l))
		r.listeners[pid.Id] = pid
		ctx.Respond(&subscribeReply{pid: pid})
	case *unsubscribe:
		if _, ok := r.listeners[m.pid.Id]; ok {
			delete(r.listeners, m.pid.Id)
			ctx.Poison(m.pid)
		}
	case *notifyTask:
		ctx.Respond(r.claimNotice(m.id))
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
		if !ok || a.phase > agentDraining || (a.phase != agentOpen && m.drain == 0) {
			ctx.Respond(&addCleanupReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.agent)})
			return
		}
		ctx.Forward(a.pid)
	case *removeCleanup:
		if a, ok := r.agents[m.agent]; ok && a.phase <= agentDraining {
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
	case *agentQuiesced:
		if a, ok := r.agents[m.id]; ok && a.phase == agentDraining {
			r.advanceAgent(ctx, a, agentAwaitingChildren)
		}

	// ---- close ----
	case *closeRuntime:
		r.closeWaiters = append(r.closeWaiters, ctx.Sender())
		r.beginClose(ctx)
	case *teardownDone:
		r.owed--
		r.advanceClose(ctx)
	case *actor.Terminated:
		if a, ok := r.byPID[m.Who.Id]; ok {
			r.agentGone(ctx, a)
			return
		}
		delete(r.setWaiters, m.Who.Id)
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
	err := fmt.Errorf("%w: send *messages.%s, not a value", messages.ErrInvalidArgument, reflect.TypeOf(m).Name())
	switch m.(type) {
	case messages.GetTask:
		ctx.Respond(&messages.SnapshotReply{Err: err})
	case messages.ListTasks:
		ctx.Respond(&messages.ListReply{Err: err})
	case messages.ReadTask:
		ctx.Respond(&messages.ReadReply{Err: err})
	case messages.KillTask:
		ctx.Respond(&messages.KillReply{Err: err})
	case messages.WaitTask:
		ctx.Respond(&messages.WaitReply{Err: err})
	case messages.WaitTasks:
		ctx.Respond(&messages.WaitTasksReply{Err: err})
	case messages.InputTask:
		ctx.Respond(&messages.InputReply{Err: err})
	case messages.ReadUntil:
		ctx.Respond(&messages.ReadUntilReply{Err: err})
	case messages.PeekTask:
		ctx.Respond(&messages.PeekReply{Err: err})
	}
}

// ---- starts ----

func (r *registry) reserve(m *reserveStart) *reserveReply {
	fail := func(err error) *reserveReply { return &reserveReply{err: err} }
	if r.phase != runtimeOpen {
		return fail(r.rt.closedErr())
	}
	if len(r.surfaces) == 0 {
		return fail(messages.ErrNoSurface)
	}
	if !messages.KindPattern.MatchString(m.kind) {
		return fail(fmt.Errorf("%w: kind %q must match %s", messages.ErrInvalidSpec, m.kind, messages.KindPattern))
	}
	if strings.TrimSpace(m.label) == "" {
		return fail(fmt.Errorf("%w: label is empty", messages.ErrInvalidSpec))
	}
	b := &r.unowned
	if m.owner != "" {
		a, ok := r.agents[m.owner]
		if !ok || a.phase != agentOpen {
			return fail(fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.owner))
		}
		b = &a.bucket
	}
	if limit := r.rt.cfg.ownerLimit; limit > 0 && b.live >= limit {
		return fail(&messages.LimitError{Limit: limit, Stopping: r.stopping(b)})
	}
	b.live++
	b.pending++
	r.nextToken++
	r.starts[r.nextToken] = &reservation{kind: m.kind, label: m.label, owner: m.owner, b: b}
	return &reserveReply{token: r.nextToken}
}

// stopping counts a bucket's stopping tasks (for the cap error only).
func (r *registry) stopping(b *bucket) int {
	n := 0
	for _, id := range b.ids {
		if e, ok := r.tasks[id]; ok && e.snap.Status == messages.Stopping {
			n++
		}
	}
	return n
}

func (r *registry) commit(ctx actor.Context, m *commitStart) {
	res, ok := r.starts[m.token]
	if !ok {
		// The reservation was abandoned by a teardown that could not wait for this
		// start any longer (or the token is not ours).
		err := fmt.Errorf("%w: the start took longer than the settle timeout while its owner was torn down", messages.ErrOwnerUnknown)
		if r.phase != runtimeOpen {
			err = r.rt.closedErr()
		}
		ctx.Respond(&startReply{err: err})
		return
	}
	delete(r.starts, m.token)
	r.counters[res.kind]++
	snap := messages.Snapshot{
		ID:      messages.TaskID(fmt.Sprintf("%s-%d", res.kind, r.counters[res.kind])),
		Kind:    res.kind,
		Label:   res.label,
		Owner:   res.owner,
		Status:  messages.Running,
		Started: time.Now(),
	}
	r.rt.nRecords.Add(1)
	r.rt.nRunning.Add(1)
	// The task actor announces itself (taskSpawned) before it answers the starter, so
	// the index holds the task before anyone can name it. The reservation stays
	// pending until taskSpawned, so a disposal of the owner waits for it and the
	// agent actor is never asked to spawn once it began its teardown.
	if res.owner == "" {
		if _, err := ctx.SpawnNamed(newTaskProps(r.rt, snap, m.hooks, ctx.Sender()), string(snap.ID)); err != nil {
			r.rt.log.Error("taskrt: spawning task actor failed", "task", snap.ID, "err", err)
		}
		return
	}
	ctx.Send(r.agents[res.owner].pid, &spawnTask{snap: snap, hooks: m.hooks, starter: ctx.Sender()})
}

func (r *registry) spawned(ctx actor.Context, m *taskSpawned) {
	r.seq++
	r.tasks[m.snap.ID] = &taskEntry{snap: m.snap, pid: m.pid, seq: r.seq}
	b := &r.unowned
	if m.snap.Owner != "" {
		b = &r.agents[m.snap.Owner].bucket
	}
	b.ids = append(b.ids, m.snap.ID)
	r.publish(messages.Event{Kind: messages.EventTaskStarted, Agent: m.snap.Owner, Task: m.snap})
	r.rt.metrics.taskStarted(m.snap.Kind)
	if m.snap.Owner == "" && r.phase == runtimeClosing {
		// Committed after the close began: tear it down like the others.
		r.owed++
		ctx.Request(m.pid, &teardown{reason: "runtime closed"})
	}
	r.startResolved(ctx, m.snap.Owner, b)
}

// startResolved accounts for a start that committed (and was indexed) or aborted:
// a disposal or a close waiting for it may go on.
func (r *registry) startResolved(ctx actor.Context, owner messages.AgentID, b *bucket) {
	b.pending--
	if a, ok := r.agents[owner]; ok && owner != "" {
		r.advanceAgent(ctx, a, a.phase)
	}
	r.advanceClose(ctx)
}

// abandonStarts gives up on the starts in flight of a disposing owner, or on every
// start in flight of a closing runtime (owner ""): their Run has held a teardown for
// the settle timeout. Each such start fails at commit, and its caller cancels the
// work Run started and awaits it (see Tasks.Start).
func (r *registry) abandonStarts(ctx actor.Context, owner messages.AgentID) {
	if owner == "" && r.phase == runtimeOpen {
		return
	}
	for token, res := range r.starts {
		if owner != "" && res.owner != owner {
			continue
		}
		if a, ok := r.agents[res.owner]; ok && a.phase == agentOpen {
			continue // not being torn down
		}
		r.rt.log.Error("taskrt: a start's Run did not return within the settle timeout during teardown; abandoned",
			"kind", res.kind, "owner", res.owner, "after", r.rt.cfg.settleTimeout)
		delete(r.starts, token)
		res.b.live--
		r.startResolved(ctx, res.owner, res.b)
	}
}

// armStartsOverdue bounds how long a teardown waits for starts in flight: once per
// disposal (owner) or close (""), the settle timeout later, abandonStarts runs. The
// timer is stopped when the registry stops.
func (r *registry) armStartsOverdue(owner messages.AgentID) {
	if _, armed := r.overdue[owner]; armed {
		return
	}
	self, rt := r.rt.registry, r.rt
	r.overdue[owner] = time.AfterFunc(rt.cfg.settleTimeout, func() { rt.send(self, &startsOverdue{owner: owner}) })
}

func (r *registry) disarmStartsOverdue(owner messages.AgentID) {
	if t, ok := r.overdue[owner]; ok {
		t.Stop()
		delete(r.overdue, owner)
	}
}

func (r *registry) settled(ctx actor.Context, m *taskSettled) {
	e, ok := r.tasks[m.snap.ID]
	if !ok {
		return
	}
	e.snap = m.snap
	r.rt.nRunning.Add(-1)
	r.rt.nRetained.Add(1)
	r.publish(messages.Event{Kind: messages.EventTaskSettled, Agent: m.snap.Owner, Task: m.snap})
	r.rt.metrics.taskSettled(m.snap)
	if m.snap.Owner != "" && m.snap.Reported {
		// Reported at settlement (a kill, a pending wait, teardown): no notice.
		e.notified = true
		r.rt.metrics.notice("suppressed")
	}
	// Listeners are silent from the moment Close begins.
	if r.phase == runtimeOpen && !r.rt.closing.Load() {
		for _, pid := range r.listeners {
			ctx.Send(pid, &settlement{snap: m.snap})
		}
	}
	b := r.bucketOf(m.snap.Owner)
	if b == nil {
		return
	}
	b.live--
	b.retained.push(m.snap.ID)
	for b.retained.len() > r.rt.cfg.retention {
		r.evict(ctx, b, b.retained.pop())
	}
}

// bucketOf is the bucket of an owner ("" = the unowned tasks), nil once it is gone.
func (r *registry) bucketOf(owner messages.AgentID) *bucket {
	if owner == "" {
		return &r.unowned
	}
	if a, ok := r.agents[owner]; ok {
		return &a.bucket
	}
	return nil
}

// evict turns the oldest retained record of a bucket into a tombstone (retention
// rule): the route goes first, then the task actor is poisoned — every request routed
// to it before is answered; it stops, and its Stopped handler runs the producer's
// Release. Past the tombstone bound, the oldest tombstone is forgotten.
func (r *registry) evict(ctx actor.Context, b *bucket, id messages.TaskID) {
	e, ok := r.tasks[id]
	if !ok || e.pid == nil {
		return
	}
	ctx.Poison(e.pid)
	e.pid = nil
	e.snap.Evicted = true
	r.publish(messages.Event{Kind: messages.EventTaskEvicted, Agent: e.snap.Owner, Task: e.snap})
	r.rt.metrics.evicted.Add(bg, 1)
	r.rt.nRecords.Add(-1)
	r.rt.nRetained.Add(-1)
	r.rt.nTombstones.Add(1)
	b.tombs.push(id)
	for b.tombs.len() > r.rt.cfg.tombstones {
		r.forget(b, b.tombs.pop())
	}
}

// forget drops a tombstone: from now on its id reads as not found.
func (r *registry) forget(b *bucket, id messages.TaskID) {
	if _, ok := r.tasks[id]; !ok {
		return
	}
	delete(r.tasks, id)
	r.rt.nTombstones.Add(-1)
	b.forgotten++
	if b.forgotten*2 > len(b.ids) {
		kept := make([]messages.TaskID, 0, len(b.ids)-b.forgotten)
		for _, id := range b.ids {
			if _, ok := r.tasks[id]; ok {
				kept = append(kept, id)
			}
		}
		b.ids, b.forgotten = kept, 0
	}
}

// ---- reads ----

// route forwards a request to the task actor after the owner fence; the task answers
// the original sender. It reports false for an unknown id and, alike, for a task the
// caller may not reach: the caller then answers with the same not-found error.
// A tombstone is answered by the registry itself, from its snapshot.
func (r *registry) route(ctx actor.Context, id messages.TaskID, caller messages.AgentID) bool {
	e, ok := r.tasks[id]
	if !ok || !r.visible(e.snap.Owner, caller) {
		return false
	}
	if e.pid != nil {
		ctx.Forward(e.pid)
		return true
	}
	// A tombstone: the answer shows the task's end, so the task is reported.
	e.report()
	switch m := ctx.Message().(type) {
	case *messages.ReadTask:
		ctx.Respond(&messages.ReadReply{Result: messages.ReadResult{Snapshot: e.snap}})
	case *messages.KillTask:
		ctx.Respond(&messages.KillReply{Result: messages.KillAlreadyTerminal})
	case *messages.WaitTask:
		ctx.Respond(&messages.WaitReply{ID: e.snap.ID, Snapshot: e.snap})
	case *messages.ReadUntil:
		ctx.Respond(&messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Snapshot: e.snap}, Reason: messages.UntilEnded}})
	case *messages.PeekTask:
		ctx.Respond(&messages.PeekReply{Result: messages.PeekResult{Next: max(m.Offset, 0), Snapshot: e.snap}})
	case *messages.InputTask:
		ctx.Respond(&messages.InputReply{Snapshot: e.snap,
			Err: fmt.Errorf("%w: %s is %s", messages.ErrTaskEnded, e.snap.ID, e.snap.Status)})
	}
	return true
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

// claimNotice hands out the owner's injector for a task's one completion notice.
func (r *registry) claimNotice(id messages.TaskID) *agentReply {
	e, ok := r.tasks[id]
	if !ok || e.notified || !e.snap.Status.Terminal() || e.snap.Owner == "" {
		return &agentReply{}
	}
	if e.snap.Reported {
		// The model has seen the end: the notice is suppressed (counted once).
		e.notified = true
		r.rt.metrics.notice("suppressed")
		return &agentReply{}
	}
	a, ok := r.agents[e.snap.Owner]
	if !ok || a.phase != agentOpen {
		return &agentReply{}
	}
	e.notified = true
	return &agentReply{live: true, injector: a.injector}
}

// ---- agents ----

func (r *registry) register(ctx actor.Context, m *registerAgent) error {
	if r.phase != runtimeOpen {
		return r.rt.closedErr()
	}
	if _, ok := r.agents[m.id]; ok {
		return fmt.Errorf("%w: %s", messages.ErrAgentExists, m.id)
	}
	var parent *agentEntry
	if m.parent != "" {
		p, ok := r.agents[m.parent]
		if !ok || p.phase != agentOpen {
			return fmt.Errorf("%w: parent %s", messages.ErrOwnerUnknown, m.parent)
		}
		parent = p
	}
	pid := ctx.Spawn(newAgentProps(r.rt, m.id))
	a := &agentEntry{id: m.id, pid: pid, parent: m.parent, injector: m.injector, children: map[messages.AgentID]struct{}{}}
	r.agents[m.id] = a
	r.byPID[pid.Id] = a
	if parent != nil {
		parent.children[m.id] = struct{}{}
	}
	r.rt.nAgents.Add(1)
	r.publish(messages.Event{Kind: messages.EventAgentRegistered, Agent: m.id, Parent: m.parent})
	return nil
}

// beginDisposal starts an agent's disposal and, recursively, its child agents': no
// new start, no new cleanup except mid-drain ones, no notices.
func (r *registry) beginDisposal(ctx actor.Context, a *agentEntry, reason string) {
	if a.phase != agentOpen {
		return
	}
	a.reason = reason
	r.advanceAgent(ctx, a, agentAwaitingStarts)
	for id := range a.children {
		if c, ok := r.agents[id]; ok {
			r.beginDisposal(ctx, c, reason)
		}
	}
}

// advanceAgent moves a disposing agent to phase to, then as far as its facts allow.
// It is the only place an agent's phase changes; each step is named after its rule.
func (r *registry) advanceAgent(ctx actor.Context, a *agentEntry, to agentPhase) {
	if to < a.phase {
		return
	}
	a.phase = to
	for {
		switch a.phase {
		case agentAwaitingStarts:
			// A start in flight for this owner commits (and is torn down with the
			// rest) or aborts before the agent actor begins: it is never asked to
			// spawn a task once its teardown began. Starts that outlast the settle
			// timeout are abandoned.
			if a.pending > 0 {
				r.armStartsOverdue(a.id)
				return
			}
			r.disarmStartsOverdue(a.id)
			a.phase = agentDraining
			ctx.Send(a.pid, &beginDispose{reason: a.reason})
		case agentAwaitingChildren:
			// An agent is gone only after its child agents are (transitive quiescence).
			if len(a.children) > 0 {
				return
			}
			// Drop the routes first, then poison: every request routed before this
			// point is already in the task's mailbox ahead of the poison pill, so it
			// is answered; nothing can be routed after.
			a.phase = agentStopping
			for _, id := range a.ids {
				if e, ok := r.tasks[id]; ok {
					r.dropRecord(ctx, id, e)
				}
			}
			a.bucket = bucket{}
			ctx.Send(a.pid, &stopAgent{})
		default: // open, draining, stopping: waiting for an event
			return
		}
	}
}

// agentGone finishes a disposal once the agent actor terminated: unregister it,
// answer the Dispose callers, and let a disposing parent go on.
func (r *registry) agentGone(ctx actor.Context, a *agentEntry) {
	r.publish(messages.Event{Kind: messages.EventAgentDisposed, Agent: a.id, Parent: a.parent})
	delete(r.agents, a.id)
	delete(r.byPID, a.pid.Id)
	r.rt.nAgents.Add(-1)
	for _, w := range a.disposers {
		ctx.Send(w, &errReply{})
	}
	if p, ok := r.agents[a.parent]; ok {
		delete(p.children, a.id)
		r.advanceAgent(ctx, p, p.phase)
	}
	r.advanceClose(ctx)
}

// dropRecord removes a record or tombstone for good (owner disposed, runtime closed)
// and poisons its actor if it has one.
func (r *registry) dropRecord(ctx actor.Context, id messages.TaskID, e *taskEntry) {
	delete(r.tasks, id)
	switch {
	case e.pid == nil:
		r.rt.nTombstones.Add(-1)
		return
	case e.snap.Status.Terminal():
		r.rt.nRetained.Add(-1)
	default:
		r.rt.nRunning.Add(-1) // only after a fault; keep the count honest
	}
	r.rt.nRecords.Add(-1)
	ctx.Poison(e.pid)
}

// ---- close ----

func (r *registry) beginClose(ctx actor.Context) {
	if r.phase != runtimeOpen {
		r.advanceClose(ctx)
		return
	}
	r.setPhase(runtimeClosing)
	for _, a := range r.agents {
		r.beginDisposal(ctx, a, "runtime closed")
	}
	for _, id := range r.unowned.ids {
		if e, ok := r.tasks[id]; ok && e.pid != nil {
			r.owed++
			ctx.Request(e.pid, &teardown{reason: "runtime closed"})
		}
	}
	if r.unowned.pending > 0 {
		r.armStartsOverdue("")
	}
	r.advanceClose(ctx)
}

// advanceClose moves a closing runtime on: once no start is in flight, no agent is
// left and every unowned task answered its teardown, the unowned task actors and the
// listener actors are poisoned (routes removed first), and the registry stops once
// they have terminated.
func (r *registry) advanceClose(ctx actor.Context) {
	switch r.phase {
	case runtimeClosing:
		if len(r.starts) > 0 || len(r.agents) > 0 || r.owed > 0 || r.unowned.pending > 0 {
			return
		}
		r.setPhase(runtimeStopping)
		r.disarmStartsOverdue("")
		for _, id := range r.unowned.ids {
			if e, ok := r.tasks[id]; ok {
				r.dropRecord(ctx, id, e)
			}
		}
		r.unowned = bucket{}
		for id, pid := range r.listeners {
			delete(r.listeners, id)
			ctx.Poison(pid)
		}
		fallthrough
	case runtimeStopping:
		if len(ctx.Children()) == 0 {
			ctx.Stop(ctx.Self())
		}
	}
}

// setPhase is the only place the runtime's phase changes.
func (r *registry) setPhase(p runtimePhase) {
	if p > r.phase {
		r.phase = p
		r.rt.closing.Store(true)
	}
}

func notFound(id messages.TaskID) error {
	return fmt.Errorf("%w: %s", messages.ErrTaskNotFound, id)
}
