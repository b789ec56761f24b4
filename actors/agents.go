package actors

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/messages"
)

// This file is the agents' life as the registry sees it: registration, the
// disposal's phases (advanceAgent), and the notice claim that depends on them.

// agentEntry is the registry's view of an agent.
type agentEntry struct {
	id       messages.AgentID
	pid      *actor.PID
	box      *kernel.Mailbox // pid's mailbox (Runtime.commit)
	parent   messages.AgentID
	injector messages.Injector
	bucket
	children map[messages.AgentID]struct{}
	watches  int // live watches on its tasks (watch.go)

	phase     agentPhase
	reason    string               // the teardown reason, once disposing
	drain     uint64               // the mark of the agent's drain (runCleanups), once cleaning
	disposers []*actor.PID         // Dispose callers, answered when the agent is gone
	fault     *messages.PanicError // the agent actor's first panic (agentFailed), returned by Dispose
}

// agentPhase is an agent's life (advanceAgent is the only place it changes). The
// registry owns it; the agent actor carries out the command each phase sends on
// entry and reports when it is done (agent.go):
//
//	open ──dispose──▶ awaitingStarts ──no start in flight──▶ cleaning ──cleanupsRan──▶ tearingDown
//	                                                         (runCleanups)            (tearDownTasks)
//	tearingDown ──tasksTornDown──▶ awaitingChildren ──no child agent left──▶ stopping ──Terminated──▶ (removed;
//	                                                                        (stopAgent)             Dispose callers answered)
type agentPhase int

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
	var box *kernel.Mailbox
	pid := ctx.Spawn(newAgentProps(r.rt, m.id, &box))
	// Counted from its spawn, not from its Started (which runs on its own mailbox,
	// after Register has answered): the agent is there for Stats as soon as Register
	// returns, and a restart (a second Started) does not count it twice.
	r.rt.nActors.Add(1)
	a := &agentEntry{id: m.id, pid: pid, box: box, parent: m.parent, injector: m.injector, children: map[messages.AgentID]struct{}{}}
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
	enter := to > a.phase // a phase sends its command once, on entry
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
			a.phase, enter = agentCleaning, true
		case agentCleaning:
			// Cleanups run before the tasks are torn down: a cleanup may still use them.
			if enter {
				a.drain = r.rt.nextToken.Add(1)
				tellAgent(ctx, a.pid, &runCleanups{reason: a.reason, drain: a.drain})
			}
			return
		case agentTearingDown:
			if enter {
				tellAgent(ctx, a.pid, &tearDownTasks{reason: a.reason})
			}
			return
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
			tellAgent(ctx, a.pid, &stopAgent{})
		default: // open, stopping: waiting for an event
			return
		}
	}
}

// agentFailed records an agent actor's first fault, which Dispose returns, and sends
// the command the agent may have lost to the panic again (the agent takes each once).
func (r *registry) agentFailed(ctx actor.Context, a *agentEntry, pe *messages.PanicError) {
	if a.fault == nil {
		a.fault = pe
	}
	switch a.phase {
	case agentCleaning:
		tellAgent(ctx, a.pid, &runCleanups{reason: a.reason, drain: a.drain})
	case agentTearingDown:
		tellAgent(ctx, a.pid, &tearDownTasks{reason: a.reason})
	case agentStopping:
		tellAgent(ctx, a.pid, &stopAgent{})
	}
}

// agentGone finishes a disposal once the agent actor terminated: unregister it,
// answer the Dispose callers, and let a disposing parent go on.
func (r *registry) agentGone(ctx actor.Context, a *agentEntry) {
	r.publish(messages.Event{Kind: messages.EventAgentDisposed, Agent: a.id, Parent: a.parent})
	delete(r.agents, a.id)
	delete(r.byPID, a.pid.Id)
	r.forgetOwner(a.id)
	r.rt.nAgents.Add(-1)
	var err error
	if a.fault != nil {
		err = fmt.Errorf("taskrt: agent %s: the runtime failed: %w", a.id, a.fault)
	}
	for _, w := range a.disposers {
		ctx.Send(w, &errReply{err: err})
	}
	if p, ok := r.agents[a.parent]; ok {
		delete(p.children, a.id)
		r.advanceAgent(ctx, p, p.phase)
	}
	r.advanceClose(ctx)
}

// AgentOption configures an agent at Register.
type AgentOption interface{ applyAgent(*registerAgent) }

type agentOptionFunc func(*registerAgent)

func (f agentOptionFunc) applyAgent(r *registerAgent) { f(r) }

// WithInjector sets how completion notices reach the agent's session.
func WithInjector(inj messages.Injector) AgentOption {
	return agentOptionFunc(func(r *registerAgent) { r.injector = inj })
}

// WithParent records the agent's parent agent: disposing the parent disposes this
// agent too (after or alongside the parent's own teardown). The parent must be
// registered and not disposing.
func WithParent(id messages.AgentID) AgentOption {
	return agentOptionFunc(func(r *registerAgent) { r.parent = id })
}

// Register registers an owning agent. Its id must be non-empty and not registered;
// an id may be registered again once its Dispose returned.
func (a *Agents) Register(ctx context.Context, id messages.AgentID, opts ...AgentOption) error {
	req := &registerAgent{id: id}
	for _, o := range opts {
		o.applyAgent(req)
	}
	if strings.TrimSpace(string(id)) == "" {
		return fmt.Errorf("%w: agent id is empty", messages.ErrInvalidArgument)
	}
	m, err := a.rt.call(ctx, req)
	if err != nil {
		return a.rt.noActorErr(err)
	}
	return m.(*errReply).err
}

// OnCleanup registers a cleanup that runs when the agent is disposed, before its tasks
// are torn down. Cleanups run one at a time in registration order; a failing or
// panicking cleanup is logged and the rest still run. The returned function
// unregisters the cleanup if it has not run yet. For an unknown or disposing agent,
// OnCleanup returns ErrOwnerUnknown — except when called with the context of one of
// that agent's running cleanups: such a mid-drain registration is accepted and runs in
// the same drain.
func (a *Agents) OnCleanup(ctx context.Context, id messages.AgentID, cleanup func(context.Context) error) (unregister func(), err error) {
	if cleanup == nil {
		return nil, fmt.Errorf("%w: cleanup is nil", messages.ErrInvalidArgument)
	}
	req := &addCleanup{agent: id, fn: cleanup}
	if mark, ok := ctx.Value(drainKey{}).(drainMark); ok && mark.agent == id {
		req.drain = mark.token
	}
	m, err := a.rt.call(ctx, req)
	if err != nil {
		return nil, a.rt.noActorErr(err)
	}
	r := m.(*addCleanupReply)
	if r.err != nil {
		return nil, r.err
	}
	rt := a.rt
	var once sync.Once
	return func() {
		once.Do(func() {
			if !rt.closed.Load() {
				tellRegistry(rt.system.Root, rt, &removeCleanup{agent: id, handle: r.handle})
			}
		})
	}, nil
}

// Dispose disposes an agent: refuse new starts for it, run its cleanups, cancel
// (reason "owner disposed") and await every task it owns, dispose its child agents,
// drop its records and unregister it. It returns when all of that is done; concurrent
// calls for the same agent all wait for the same disposal. If ctx ends first, Dispose
// returns ctx.Err() and the disposal goes on. Do not call Dispose for an agent from
// inside one of its own cleanups: the disposal would wait for itself.
func (a *Agents) Dispose(ctx context.Context, id messages.AgentID) error {
	m, err := a.rt.call(ctx, &disposeAgent{id: id})
	if err != nil {
		return a.rt.noActorErr(err)
	}
	return m.(*errReply).err
}

// addCleanup passes a cleanup to its agent's actor: while the agent is open, or,
// during its cleanups, from inside that very drain.
func (r *registry) addCleanup(ctx actor.Context, m *addCleanup) {
	a, ok := r.agents[m.agent]
	if !ok || a.phase > agentCleaning || (a.phase != agentOpen && (m.drain == 0 || m.drain != a.drain)) {
		ctx.Respond(&addCleanupReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.agent)})
		return
	}
	ctx.Forward(a.pid)
}

// removeCleanup passes the removal of a cleanup that has not run to its agent.
func (r *registry) removeCleanup(ctx actor.Context, m *removeCleanup) {
	if a, ok := r.agents[m.agent]; ok && a.phase <= agentCleaning {
		ctx.Forward(a.pid)
	}
}

// disposeAgent begins an agent's disposal (or joins the one under way); the
// disposer is answered when it is complete.
func (r *registry) disposeAgent(ctx actor.Context, m *disposeAgent) {
	a, ok := r.agents[m.id]
	if !ok {
		ctx.Respond(&errReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.id)})
		return
	}
	a.disposers = append(a.disposers, ctx.Sender())
	r.beginDisposal(ctx, a, "owner disposed")
}
