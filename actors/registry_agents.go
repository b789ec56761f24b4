package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// This file is the agents' life as the registry sees it: registration, the
// disposal's phases (advanceAgent), and the notice claim that depends on them.

// agentEntry is the registry's view of an agent.
type agentEntry struct {
	id       messages.AgentID
	pid      *actor.PID
	box      *mailbox // pid's mailbox (Runtime.commit)
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
//	tearingDown ──tasksSettled──▶ awaitingChildren ──no child agent left──▶ stopping ──Terminated──▶ (removed;
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
	var box *mailbox
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
