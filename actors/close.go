package actors

import "github.com/asynkron/protoactor-go/actor"

// This file is the runtime's close, as the registry runs it (see registry.go for
// the phases: open → closing → stopping → stopped).

// beginClose starts the close: every agent's disposal begins (reason "runtime
// closed"), every unowned task is torn down, and starts still in flight are bounded
// by the settle timeout.
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
			r.awaiting[e.pid.Id] = struct{}{}
			requestTask(ctx, e.pid, &teardown{reason: "runtime closed"})
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
		if len(r.starts) > 0 || len(r.agents) > 0 || len(r.awaiting) > 0 || r.unowned.pending > 0 {
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

// terminated: a child actor of the registry stopped — an agent's actor (its
// disposal ends), a set waiter, or a torn-down task that stopped without answering.
func (r *registry) terminated(ctx actor.Context, m *actor.Terminated) {
	if a, ok := r.byPID[m.Who.Id]; ok {
		r.agentGone(ctx, a)
		return
	}
	delete(r.setWaiters, m.Who.Id)
	delete(r.awaiting, m.Who.Id)
	r.advanceClose(ctx)
}

// stopped is the registry's end: subscriptions closed, timers stopped, Close
// callers answered, and every call still waiting released (rt.stopped).
func (r *registry) stopped() {
	r.rt.nActors.Add(-1)
	r.closeSubscribers()
	for _, t := range r.overdue {
		t.Stop()
	}
	for _, w := range r.closeWaiters {
		r.rt.send(w, &errReply{})
	}
	close(r.rt.stopped)
}
