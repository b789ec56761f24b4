package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// agent is the actor of one owning agent. Its children are the task actors of the
// tasks it owns; it holds the agent's cleanup registrations. All its state is
// touched by its mailbox only: cleanups run on goroutines that report back with
// cleanupDone, and a registration made from inside a running cleanup arrives as a
// message before that cleanup's cleanupDone (the cleanup waits for the reply).
//
// It has no phase of its own: the registry owns the agent's disposal
// (registry_agents.go) and sends it commands, each carried out and reported once:
//
//	runCleanups    run the cleanups one at a time, registrations made from inside one
//	               joining the queue (a drain); report cleanupsRan
//	tearDownTasks  send teardown to every task child; report tasksTornDown once each
//	               answered teardownDone or stopped
//	stopAgent      stop once every task actor has stopped (the registry has dropped
//	               the records and poisoned them, so every request routed to them
//	               before is answered first)
//
// A command sent again after a fault (agentFailed) is carried out again where that
// is harmless and ignored where it is not.
type agent struct {
	rt     *Runtime
	id     messages.AgentID
	reason string // the teardown reason: "owner disposed" or "runtime closed"

	cleanups   []*cleanupEntry // registration order; ran entries are removed
	nextHandle uint64
	drain      uint64        // the drain runCleanups began, 0 when none runs: marks its cleanups' contexts
	running    *cleanupEntry // the cleanup in flight (during a drain only)
	// awaiting holds the task children torn down that have neither answered
	// teardownDone nor stopped: nil until tearDownTasks, empty once tasksTornDown was
	// reported. A child may stop without answering: retention evicts settled tasks by
	// poisoning their actors, and a teardown that lands in a mailbox behind the poison
	// pill is dropped unanswered.
	awaiting map[string]struct{}
	stopping bool            // stopAgent arrived: stop once no task actor is left
	spawner  *kernel.Spawner // spawns its task actors, their Started on its goroutine
}

type cleanupEntry struct {
	handle uint64
	fn     messages.Cleanup
}

// newAgentProps is an agent actor's Props; its mailbox is stored in *box (the
// registry's entry for the agent: Runtime.commit hands spawns to it there).
func newAgentProps(rt *Runtime, id messages.AgentID, box **kernel.Mailbox) *actor.Props {
	return rt.kernel.Props(func() actor.Actor { return &agent{rt: rt, id: id} },
		func(m *kernel.Mailbox) { *box = m }, actor.WithSupervisor(neverRestart))
}

func (a *agent) Receive(ctx actor.Context) {
	err := contain.Call("agent actor", func() error { a.receive(ctx); return nil })
	if err == nil {
		return
	}
	pe := err.(*messages.PanicError)
	a.rt.log.Error("taskrt: agent actor panicked", "agent", a.id, "message", fmt.Sprintf("%T", ctx.Message()), "err", pe, "stack", string(pe.Stack))
	a.fail(ctx, pe)
}

// fail handles a panic in the agent actor's own code: a runtime bug that may have
// lost the message it was handling (a command of the registry, a cleanup's end, a
// task's teardownDone), and with it the event the disposal waits for. The actor is
// not restarted (its children are its tasks). Instead a requester is answered with
// the fault, the fault goes to the registry (which returns it from Dispose and sends
// its current command again: a lost command is carried out then), and the agent
// redoes what the lost event would have done, so that the disposal still ends:
//
//	cleanupDone                the cleanup is over: the drain goes on with the next
//	teardownDone, Terminated   every task not yet accounted for is asked again (a
//	                           settled task answers at once; one that stopped counts
//	                           as done), and a stopping agent stops if none is left
//
// A panic while doing that is logged and goes no further.
func (a *agent) fail(ctx actor.Context, pe *messages.PanicError) {
	if ctx.Sender() != nil {
		ctx.Respond(fmt.Errorf("taskrt: agent %s: the runtime failed: %w", a.id, pe))
	}
	tellRegistry(ctx, a.rt, &agentFailed{id: a.id, err: pe})
	err := contain.Call("agent actor recovery", func() error {
		switch ctx.Message().(type) {
		case *cleanupDone:
			a.running = nil
			a.runNext(ctx)
		case *teardownDone, *actor.Terminated:
			if len(a.awaiting) > 0 {
				a.tearDown(ctx)
			}
			a.stopIfEmpty(ctx)
		}
		return nil
	})
	if err != nil {
		a.rt.log.Error("taskrt: agent actor panicked again while recovering", "agent", a.id, "err", err)
	}
}

func (a *agent) receive(ctx actor.Context) {
	if a.rt.cfg.agentHook != nil {
		a.rt.cfg.agentHook(a.id, ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *spawnTask:
		// Never after stopAgent: the registry stops routing to an agent it stopped.
		if a.spawner == nil {
			a.spawner = a.rt.kernel.InlineSpawner()
		}
		if _, err := a.spawner.Spawn(ctx, string(m.task.snap.ID), m.task); err != nil {
			a.rt.log.Error("taskrt: spawning task actor failed", "task", m.task.snap.ID, "err", err)
			ctx.Send(m.task.starter, &startReply{err: fmt.Errorf("spawn task actor: %w", err)})
		}
	case *addCleanup:
		ctx.Respond(a.addCleanup(m))
	case *removeCleanup:
		for i, c := range a.cleanups {
			if c.handle == m.handle {
				a.cleanups = append(a.cleanups[:i], a.cleanups[i+1:]...)
				break
			}
		}
	case *runCleanups:
		if m.drain == a.drain {
			return // sent again while this drain runs
		}
		a.reason, a.drain = m.reason, m.drain
		a.runNext(ctx)
	case *cleanupDone:
		if m.err != nil {
			a.rt.log.Error("taskrt: cleanup failed", "agent", a.id, "err", m.err)
		}
		a.running = nil
		a.runNext(ctx)
	case *tearDownTasks:
		if a.awaiting != nil {
			return // sent again: the teardown began (fail asks the tasks again)
		}
		a.reason = m.reason
		a.awaiting = map[string]struct{}{}
		for _, c := range ctx.Children() {
			a.awaiting[c.Id] = struct{}{}
		}
		a.tearDown(ctx)
	case *teardownDone:
		a.accountedFor(ctx, m.pid.Id)
	case *stopAgent:
		a.stopping = true
		a.stopIfEmpty(ctx)
	case *actor.Terminated:
		a.accountedFor(ctx, m.Who.Id)
		a.stopIfEmpty(ctx)
	case *actor.Stopped:
		a.rt.nActors.Add(-1)
	}
}

// runNext runs the drain's next cleanup, one at a time, or reports the drain done
// (cleanupsRan) when none is left. Rule: cleanups run before the tasks are torn
// down (a cleanup may still use them); the registry sends tearDownTasks only after
// cleanupsRan.
func (a *agent) runNext(ctx actor.Context) {
	if a.drain == 0 || a.running != nil {
		return
	}
	if len(a.cleanups) > 0 {
		a.runCleanup(ctx)
		return
	}
	a.drain = 0
	tellRegistry(ctx, a.rt, &cleanupsRan{id: a.id})
}

// tearDown cancels every task child still awaited with the disposal's reason (again,
// after a fault: a settled task answers at once), forgets those that have stopped,
// and reports tasksTornDown if none is left.
func (a *agent) tearDown(ctx actor.Context) {
	live := map[string]bool{}
	for _, c := range ctx.Children() {
		if _, ok := a.awaiting[c.Id]; ok {
			live[c.Id] = true
			requestTask(ctx, c, &teardown{reason: a.reason})
		}
	}
	for id := range a.awaiting {
		if !live[id] {
			delete(a.awaiting, id)
		}
	}
	if len(a.awaiting) == 0 {
		tellRegistry(ctx, a.rt, &tasksTornDown{id: a.id})
	}
}

// accountedFor takes a torn-down task off the awaited ones (it answered teardownDone,
// or stopped) and reports tasksTornDown when it was the last.
func (a *agent) accountedFor(ctx actor.Context, child string) {
	if _, ok := a.awaiting[child]; !ok {
		return
	}
	delete(a.awaiting, child)
	if len(a.awaiting) == 0 {
		tellRegistry(ctx, a.rt, &tasksTornDown{id: a.id})
	}
}

// stopIfEmpty stops the agent, once stopAgent arrived, when no task actor is left.
func (a *agent) stopIfEmpty(ctx actor.Context) {
	if a.stopping && len(ctx.Children()) == 0 {
		ctx.Stop(ctx.Self())
	}
}

// addCleanup accepts a registration the registry let through: while the agent is
// open (no drain has begun: m.drain 0), or made from inside the running drain
// (m.drain is its mark). A registration that arrives after its drain reported
// cleanupsRan is refused: nothing would run it.
func (a *agent) addCleanup(m *addCleanup) *addCleanupReply {
	if m.drain != a.drain || (m.drain == 0 && a.reason != "") {
		return &addCleanupReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, a.id)}
	}
	a.nextHandle++
	a.cleanups = append(a.cleanups, &cleanupEntry{handle: a.nextHandle, fn: m.fn})
	return &addCleanupReply{handle: a.nextHandle}
}

// runCleanup runs the first registered cleanup on a goroutine the runtime owns; its
// end comes back as cleanupDone. Its context carries the drain's mark, so that a
// cleanup it registers is accepted and runs in this drain.
func (a *agent) runCleanup(ctx actor.Context) {
	c := a.cleanups[0]
	a.cleanups = a.cleanups[1:]
	a.running = c
	cctx := context.WithValue(a.rt.abort, drainKey{}, drainMark{agent: a.id, token: a.drain})
	self, rt := ctx.Self(), a.rt
	rt.goSafe("cleanup", func() {
		err := contain.Call("cleanup", func() error { return c.fn(cctx) })
		tellAgent(rt.system.Root, self, &cleanupDone{handle: c.handle, err: err})
	})
}

// drainKey marks the context a cleanup runs with, so that a cleanup registered from
// inside a running drain is accepted (and run in the same drain).
type drainKey struct{}

type drainMark struct {
	agent messages.AgentID
	token uint64
}
