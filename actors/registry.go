package actors

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// registry is the root actor of a runtime. It owns the id counters, the index of
// tasks (id → owner, task actor, mirrored snapshot), the agents, the attached
// surfaces and the start reservations, and it routes every caller request after the
// owner check. It never runs producer code, listener code or cleanup code, and it never
// waits: everything slow happens on the task and agent actors or on goroutines the
// runtime owns, and comes back as messages.
type registry struct {
	rt *Runtime

	surfaces    map[uint64]string
	nextSurface uint64

	counters     map[string]int // per-kind id counters
	reservations map[uint64]*reservation
	nextToken    uint64
	seq          uint64 // start order

	tasks    map[messages.TaskID]*taskEntry
	unowned  bucket
	agents   map[messages.AgentID]*agentEntry
	agentPID map[string]*agentEntry // by actor id, for Terminated

	closing       bool
	closeWaiters  []*actor.PID
	unownedOwed   int  // TeardownDone answers owed by unowned tasks during close
	pendingTotal  int  // reservations in flight, all owners
	unownedPoison bool // unowned tasks were poisoned; stop when they are gone
}

type reservation struct {
	kind, label string
	owner       messages.AgentID
	b           *bucket
}

// bucket is one owner's share: its slot count and its tasks in start order.
type bucket struct {
	live    int // running + stopping + reserved
	pending int // reservations not yet committed and indexed
	ids     []messages.TaskID
}

type taskEntry struct {
	snap     messages.Snapshot
	pid      *actor.PID
	seq      uint64
	notified bool // the completion notice was claimed (NotifyTask)
}

type agentEntry struct {
	id       messages.AgentID
	pid      *actor.PID
	parent   messages.AgentID
	injector messages.Injector
	bucket
	children map[messages.AgentID]struct{}

	disposing  bool
	reason     string
	beginSent  bool
	quiesced   bool
	stopSent   bool
	terminated bool
	waiters    []*actor.PID
}

func newRegistry(rt *Runtime) *registry {
	return &registry{
		rt:           rt,
		surfaces:     map[uint64]string{},
		counters:     map[string]int{},
		reservations: map[uint64]*reservation{},
		tasks:        map[messages.TaskID]*taskEntry{},
		agents:       map[messages.AgentID]*agentEntry{},
		agentPID:     map[string]*agentEntry{},
	}
}

func visible(owner, caller messages.AgentID) bool { return owner == "" || owner == caller }

func (r *registry) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			r.rt.log.Error("taskrt: registry panicked", "message", fmt.Sprintf("%T", ctx.Message()), "panic", fmt.Sprint(p))
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.rt.nActors.Add(1)
	case *messages.ReserveStart:
		ctx.Respond(r.reserve(m))
	case *messages.CommitStart:
		r.commit(ctx, m)
	case *messages.AbortStart:
		if res, ok := r.reservations[m.Token]; ok {
			delete(r.reservations, m.Token)
			res.b.live--
			r.resolvePending(ctx, res)
		}
	case *messages.TaskSpawned:
		r.spawned(ctx, m)
	case *messages.TaskChanged:
		if e, ok := r.tasks[m.Snapshot.ID]; ok {
			e.snap = m.Snapshot
		}
	case *messages.TaskSettled:
		r.settled(m)
	case *messages.GetTask:
		e, ok := r.tasks[m.ID]
		if !ok || !visible(e.snap.Owner, m.Caller) {
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
	case *messages.WaitTask:
		if !r.route(ctx, m.ID, m.Caller) {
			ctx.Respond(&messages.WaitReply{Err: notFound(m.ID)})
		}
	case *messages.AbandonWait:
		// Nothing to answer when the task is gone: its actor answered every waiter
		// when it stopped.
		if e, ok := r.tasks[m.ID]; ok && visible(e.snap.Owner, m.Caller) {
			ctx.Forward(e.pid)
		}
	case *messages.AttachSurface:
		r.nextSurface++
		r.surfaces[r.nextSurface] = m.Name
		ctx.Respond(&messages.AttachReply{Handle: r.nextSurface})
	case *messages.DetachSurface:
		delete(r.surfaces, m.Handle)
	case *messages.RegisterAgent:
		ctx.Respond(&messages.ErrReply{Err: r.register(ctx, m)})
	case *messages.AddCleanup:
		a, ok := r.agents[m.Agent]
		if !ok || (a.disposing && m.Drain == 0) || a.quiesced {
			ctx.Respond(&messages.AddCleanupReply{Err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.Agent)})
			return
		}
		ctx.Forward(a.pid)
	case *messages.RemoveCleanup:
		if a, ok := r.agents[m.Agent]; ok && !a.quiesced {
			ctx.Forward(a.pid)
		}
	case *messages.LookupAgent:
		a, ok := r.agents[m.ID]
		if !ok || a.disposing {
			ctx.Respond(&messages.AgentReply{})
			return
		}
		ctx.Respond(&messages.AgentReply{Live: true, Injector: a.injector})
	case *messages.NotifyTask:
		ctx.Respond(r.claimNotice(m.ID))
	case *messages.DisposeAgent:
		a, ok := r.agents[m.ID]
		if !ok {
			ctx.Respond(&messages.ErrReply{Err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.ID)})
			return
		}
		a.waiters = append(a.waiters, ctx.Sender())
		r.beginDisposal(ctx, a, "owner disposed")
	case *messages.AgentQuiesced:
		if a, ok := r.agents[m.ID]; ok {
			a.quiesced = true
			r.maybeFinalize(ctx, a)
		}
	case *messages.TeardownDone:
		r.unownedOwed--
		r.checkClose(ctx)
	case *messages.CloseRuntime:
		r.closeWaiters = append(r.closeWaiters, ctx.Sender())
		r.beginClose(ctx)
	case *actor.Terminated:
		if a, ok := r.agentPID[m.Who.Id]; ok {
			a.terminated = true
			r.maybeFinalize(ctx, a)
			return
		}
		r.checkClose(ctx)
	case *actor.Stopped:
		r.rt.nActors.Add(-1)
		for _, w := range r.closeWaiters {
			r.rt.send(w, &messages.ErrReply{})
		}
		close(r.rt.stopped)
	}
}

// ---- starts ----

func (r *registry) reserve(m *messages.ReserveStart) *messages.ReserveStartReply {
	fail := func(err error) *messages.ReserveStartReply { return &messages.ReserveStartReply{Err: err} }
	if r.closing {
		return fail(messages.ErrClosed)
	}
	if len(r.surfaces) == 0 {
		return fail(messages.ErrNoSurface)
	}
	if !messages.KindPattern.MatchString(m.Kind) {
		return fail(fmt.Errorf("%w: kind %q must match %s", messages.ErrInvalidSpec, m.Kind, messages.KindPattern))
	}
	if strings.TrimSpace(m.Label) == "" {
		return fail(fmt.Errorf("%w: label is empty", messages.ErrInvalidSpec))
	}
	b := &r.unowned
	if m.Owner != "" {
		a, ok := r.agents[m.Owner]
		if !ok || a.disposing {
			return fail(fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.Owner))
		}
		b = &a.bucket
	}
	if limit := r.rt.cfg.ownerLimit; limit > 0 && b.live >= limit {
		return fail(fmt.Errorf("%w for this owner (limit: %d); use task_kill to stop an unneeded task, wait for it to finish, then retry",
			messages.ErrOwnerLimit, limit))
	}
	b.live++
	b.pending++
	r.pendingTotal++
	r.nextToken++
	r.reservations[r.nextToken] = &reservation{kind: m.Kind, label: m.Label, owner: m.Owner, b: b}
	return &messages.ReserveStartReply{Token: r.nextToken}
}

func (r *registry) commit(ctx actor.Context, m *messages.CommitStart) {
	res, ok := r.reservations[m.Token]
	if !ok {
		ctx.Respond(&messages.StartReply{Err: fmt.Errorf("%w: unknown start token", messages.ErrInvalidArgument)})
		return
	}
	delete(r.reservations, m.Token)
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
	// The task actor announces itself (TaskSpawned) before it answers the starter, so
	// the index holds the task before anyone can name it. A disposal of the owner
	// waits for this (the reservation stays pending until TaskSpawned), so the agent
	// actor is never asked to spawn once it started stopping.
	if res.owner == "" {
		if _, err := ctx.SpawnNamed(newTaskProps(r.rt, snap, m.Hooks, ctx.Sender()), string(snap.ID)); err != nil {
			r.rt.log.Error("taskrt: spawning task actor failed", "task", snap.ID, "err", err)
		}
		return
	}
	a := r.agents[res.owner]
	ctx.Send(a.pid, &messages.SpawnTask{Snapshot: snap, Hooks: m.Hooks, Starter: ctx.Sender()})
}

func (r *registry) spawned(ctx actor.Context, m *messages.TaskSpawned) {
	r.seq++
	r.tasks[m.Snapshot.ID] = &taskEntry{snap: m.Snapshot, pid: m.PID, seq: r.seq}
	b := &r.unowned
	var a *agentEntry
	if m.Snapshot.Owner != "" {
		a = r.agents[m.Snapshot.Owner]
		b = &a.bucket
	}
	b.ids = append(b.ids, m.Snapshot.ID)
	b.pending--
	r.pendingTotal--
	if a != nil {
		r.maybeBegin(ctx, a)
	} else if r.closing {
		// Committed after the close began: tear it down like the others.
		r.unownedOwed++
		ctx.Request(m.PID, &messages.Teardown{Reason: "runtime closed"})
	}
	r.checkClose(ctx)
}

func (r *registry) resolvePending(ctx actor.Context, res *reservation) {
	res.b.pending--
	r.pendingTotal--
	if res.owner != "" {
		if a, ok := r.agents[res.owner]; ok {
			r.maybeBegin(ctx, a)
		}
	}
	r.checkClose(ctx)
}

func (r *registry) settled(m *messages.TaskSettled) {
	e, ok := r.tasks[m.Snapshot.ID]
	if !ok {
		return
	}
	e.snap = m.Snapshot
	r.rt.nRunning.Add(-1)
	if m.Snapshot.Owner == "" {
		r.unowned.live--
	} else if a, ok := r.agents[m.Snapshot.Owner]; ok {
		a.live--
	}
	r.rt.hub.publish(m.Snapshot)
}

// ---- reads ----

// route forwards a request to the task actor after the owner fence; the task answers
// the original sender. It reports false for an unknown id and, alike, for a task the
// caller may not reach: the caller then answers with the same not-found error.
func (r *registry) route(ctx actor.Context, id messages.TaskID, caller messages.AgentID) bool {
	e, ok := r.tasks[id]
	if !ok || !visible(e.snap.Owner, caller) {
		return false
	}
	ctx.Forward(e.pid)
	return true
}

// list merges the unowned bucket and the caller's bucket. Each bucket holds its ids in
// start order (they are appended as tasks are indexed, in sequence), so a merge by
// sequence number gives the caller's view in start order without sorting.
func (r *registry) list(caller messages.AgentID) []messages.Snapshot {
	u := r.unowned.ids
	var own []messages.TaskID
	if a, ok := r.agents[caller]; ok && caller != "" {
		own = a.ids
	}
	out := make([]messages.Snapshot, 0, len(u)+len(own))
	for len(u) > 0 || len(own) > 0 {
		var id messages.TaskID
		if len(own) == 0 || (len(u) > 0 && r.tasks[u[0]].seq < r.tasks[own[0]].seq) {
			id, u = u[0], u[1:]
		} else {
			id, own = own[0], own[1:]
		}
		out = append(out, r.tasks[id].snap)
	}
	return out
}

// ---- agents ----

func (r *registry) register(ctx actor.Context, m *messages.RegisterAgent) error {
	if r.closing {
		return messages.ErrClosed
	}
	if _, ok := r.agents[m.ID]; ok {
		return fmt.Errorf("%w: %s", messages.ErrAgentExists, m.ID)
	}
	var parent *agentEntry
	if m.Parent != "" {
		p, ok := r.agents[m.Parent]
		if !ok || p.disposing {
			return fmt.Errorf("%w: parent %s", messages.ErrOwnerUnknown, m.Parent)
		}
		parent = p
	}
	pid := ctx.Spawn(newAgentProps(r.rt, m.ID))
	a := &agentEntry{id: m.ID, pid: pid, parent: m.Parent, injector: m.Injector, children: map[messages.AgentID]struct{}{}}
	r.agents[m.ID] = a
	r.agentPID[pid.Id] = a
	if parent != nil {
		parent.children[m.ID] = struct{}{}
	}
	r.rt.nAgents.Add(1)
	return nil
}

// beginDisposal marks an agent (and, recursively, its child agents) disposing: no new
// start, no new cleanup except mid-drain ones, no notices. The agent actor is told to
// begin once no start for it is in flight.
func (r *registry) beginDisposal(ctx actor.Context, a *agentEntry, reason string) {
	if a.disposing {
		return
	}
	a.disposing = true
	a.reason = reason
	for id := range a.children {
		if c, ok := r.agents[id]; ok {
			r.beginDisposal(ctx, c, reason)
		}
	}
	r.maybeBegin(ctx, a)
}

func (r *registry) maybeBegin(ctx actor.Context, a *agentEntry) {
	if a.disposing && !a.beginSent && a.pending == 0 {
		a.beginSent = true
		ctx.Send(a.pid, &messages.BeginDispose{Reason: a.reason})
	}
}

// maybeFinalize moves a disposing agent forward: once it is quiesced and its child
// agents are gone, drop its records and stop its actor; once the actor terminated,
// unregister it and answer the Dispose callers.
func (r *registry) maybeFinalize(ctx actor.Context, a *agentEntry) {
	if !a.quiesced || len(a.children) > 0 {
		return
	}
	if !a.stopSent {
		a.stopSent = true
		// Remove the routes first, then poison: every request routed before this
		// point is already in the task's mailbox ahead of the poison pill, so it is
		// answered; nothing can be routed after.
		for _, id := range a.ids {
			if e, ok := r.tasks[id]; ok {
				delete(r.tasks, id)
				r.rt.nRecords.Add(-1)
				if !e.snap.Status.Terminal() {
					r.rt.nRunning.Add(-1) // cannot happen after teardown; keep the count honest
				}
				ctx.Poison(e.pid)
			}
		}
		a.ids = nil
		ctx.Send(a.pid, &messages.StopAgent{})
	}
	if !a.terminated {
		return
	}
	delete(r.agents, a.id)
	delete(r.agentPID, a.pid.Id)
	r.rt.nAgents.Add(-1)
	for _, w := range a.waiters {
		ctx.Send(w, &messages.ErrReply{})
	}
	a.waiters = nil
	if p, ok := r.agents[a.parent]; ok {
		delete(p.children, a.id)
		if p.disposing {
			r.maybeFinalize(ctx, p)
		}
	}
	r.checkClose(ctx)
}

// claimNotice hands out the owner's injector for a task's one completion notice.
func (r *registry) claimNotice(id messages.TaskID) *messages.AgentReply {
	e, ok := r.tasks[id]
	if !ok || e.notified || e.snap.Reported || !e.snap.Status.Terminal() || e.snap.Owner == "" {
		return &messages.AgentReply{}
	}
	a, ok := r.agents[e.snap.Owner]
	if !ok || a.disposing {
		return &messages.AgentReply{}
	}
	e.notified = true
	return &messages.AgentReply{Live: true, Injector: a.injector}
}

// ---- close ----

func (r *registry) beginClose(ctx actor.Context) {
	if r.closing {
		r.checkClose(ctx)
		return
	}
	r.closing = true
	for _, a := range r.agents {
		r.beginDisposal(ctx, a, "runtime closed")
	}
	for _, id := range r.unowned.ids {
		if e, ok := r.tasks[id]; ok {
			r.unownedOwed++
			ctx.Request(e.pid, &messages.Teardown{Reason: "runtime closed"})
		}
	}
	r.checkClose(ctx)
}

// checkClose stops the registry once a close is under way and everything settled:
// no start in flight, no agent left, every unowned task torn down. The unowned task
// actors are poisoned first (after their routes are removed) and the registry stops
// when they have terminated.
func (r *registry) checkClose(ctx actor.Context) {
	if !r.closing || r.pendingTotal > 0 || len(r.agents) > 0 || r.unownedOwed > 0 {
		return
	}
	if !r.unownedPoison {
		r.unownedPoison = true
		for _, id := range r.unowned.ids {
			if e, ok := r.tasks[id]; ok {
				delete(r.tasks, id)
				r.rt.nRecords.Add(-1)
				ctx.Poison(e.pid)
			}
		}
		r.unowned.ids = nil
	}
	if len(ctx.Children()) == 0 {
		ctx.Stop(ctx.Self())
	}
}
