package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// agent is the actor of one owning agent. Its children are the task actors of the
// tasks it owns; it holds the agent's cleanup registrations. All its state is
// touched by its mailbox only: cleanups run on goroutines that report back with
// cleanupDone, and a registration made from inside a running cleanup arrives as a
// message before that cleanup's cleanupDone (the cleanup waits for the reply).
//
// Its life, in phases (advance is the only place the phase changes):
//
//	open ──beginDispose──▶ draining ──no cleanup left──▶ tearingDown ──every task settled──▶ quiesced
//	                       (one cleanup at a time,       (teardown sent to every            (agentQuiesced
//	                        mid-drain registrations       task child; each answers           sent to the
//	                        join the queue)               teardownDone once settled,         registry)
//	                                                      or stops)
//	quiesced ──stopAgent──▶ stopping ──last task actor stopped──▶ (stopped; the registry sees Terminated)
//
// The registry sends beginDispose once no start for this owner is in flight, and
// stopAgent once it has dropped the agent's records and poisoned its task actors (so
// every request it routed to them before is answered first).
type agent struct {
	rt     *Runtime
	id     messages.AgentID
	phase  agentActorPhase
	reason string // the teardown reason: "owner disposed" or "runtime closed"

	cleanups   []*cleanupEntry // registration order; ran entries are removed
	nextHandle uint64
	running    *cleanupEntry // the cleanup in flight (draining only)
	drainToken uint64        // marks the contexts of this agent's drain
	// awaiting holds the task children torn down that have neither answered
	// teardownDone nor stopped (tearingDown only). A child may stop without answering:
	// retention evicts settled tasks by poisoning their actors, and a teardown that
	// lands in a mailbox behind the poison pill is dropped unanswered.
	awaiting map[string]struct{}
}

type agentActorPhase int

const (
	agentActorOpen        agentActorPhase = iota // accepting cleanups
	agentActorDraining                           // running cleanups; only mid-drain registrations accepted
	agentActorTearingDown                        // cancelling and awaiting every task child
	agentActorQuiesced                           // told the registry; waiting for stopAgent
	agentActorStopping                           // stopping once every task actor has stopped
)

type cleanupEntry struct {
	handle uint64
	fn     messages.Cleanup
}

func newAgentProps(rt *Runtime, id messages.AgentID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &agent{rt: rt, id: id} },
		actor.WithSupervisor(neverRestart), actor.WithDispatcher(rt.pool))
}

func (a *agent) Receive(ctx actor.Context) {
	err := messages.Contain("agent actor", func() error { a.receive(ctx); return nil })
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
// its current command again: beginDispose or stopAgent), and the agent redoes the
// step of its phase that waits for an event, so that the disposal still ends:
//
//	open         nothing waits yet: carry on
//	draining     the cleanup in flight is given up (its end may have been the lost
//	             message); the rest still run, then the tasks are torn down
//	tearingDown  every task not yet accounted for is asked again (a settled task
//	             answers at once); one that stopped meanwhile counts as done
//	quiesced     agentQuiesced is sent again (the registry takes it once)
//	stopping     stop if no task actor is left
//
// A panic while doing that is logged and goes no further.
func (a *agent) fail(ctx actor.Context, pe *messages.PanicError) {
	if ctx.Sender() != nil {
		ctx.Respond(fmt.Errorf("taskrt: agent %s: the runtime failed: %w", a.id, pe))
	}
	tellRegistry(ctx, a.rt, &agentFailed{id: a.id, err: pe})
	err := messages.Contain("agent actor recovery", func() error {
		switch a.phase {
		case agentActorDraining:
			a.running = nil
			a.advance(ctx, agentActorDraining)
		case agentActorTearingDown:
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
			a.advance(ctx, agentActorTearingDown)
		case agentActorQuiesced:
			tellRegistry(ctx, a.rt, &agentQuiesced{id: a.id})
		case agentActorStopping:
			a.advance(ctx, agentActorStopping)
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
	case *actor.Started:
		a.rt.nActors.Add(1)
	case *spawnTask:
		// Never after stopAgent: the registry stops routing to an agent it stopped.
		if _, err := ctx.SpawnNamed(newTaskProps(a.rt, m.snap, m.hooks, m.run, m.starter), string(m.snap.ID)); err != nil {
			a.rt.log.Error("taskrt: spawning task actor failed", "task", m.snap.ID, "err", err)
			ctx.Send(m.starter, &startReply{err: fmt.Errorf("spawn task actor: %w", err)})
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
	case *beginDispose:
		if a.phase != agentActorOpen {
			return // sent again after a fault (agentFailed)
		}
		a.reason = m.reason
		a.drainToken = a.rt.nextToken.Add(1)
		a.advance(ctx, agentActorDraining)
	case *cleanupDone:
		if m.err != nil {
			a.rt.log.Error("taskrt: cleanup failed", "agent", a.id, "err", m.err)
		}
		a.running = nil
		a.advance(ctx, agentActorDraining)
	case *teardownDone:
		delete(a.awaiting, m.pid.Id)
		a.advance(ctx, agentActorTearingDown)
	case *stopAgent:
		a.advance(ctx, agentActorQuiesced)
	case *actor.Terminated:
		if _, ok := a.awaiting[m.Who.Id]; ok {
			delete(a.awaiting, m.Who.Id)
			a.advance(ctx, agentActorTearingDown)
			return
		}
		a.advance(ctx, agentActorStopping)
	case *actor.Stopped:
		a.rt.nActors.Add(-1)
	}
}

// advance moves the agent as far as its facts allow, starting from phase from (the
// phase an event belongs to; an event for another phase changes nothing). It is the
// only place a.phase changes.
func (a *agent) advance(ctx actor.Context, from agentActorPhase) {
	switch {
	case from == agentActorDraining && (a.phase == agentActorOpen || a.phase == agentActorDraining):
		a.phase = agentActorDraining
		if a.running != nil {
			return // one cleanup at a time
		}
		if len(a.cleanups) > 0 {
			a.runCleanup(ctx)
			return
		}
		// Rule: cleanups run before the tasks are torn down (a cleanup may still use
		// them); then every task child is cancelled with the disposal's reason.
		a.phase = agentActorTearingDown
		a.awaiting = map[string]struct{}{}
		for _, c := range ctx.Children() {
			a.awaiting[c.Id] = struct{}{}
			requestTask(ctx, c, &teardown{reason: a.reason})
		}
		fallthrough
	case from == agentActorTearingDown && a.phase == agentActorTearingDown:
		if len(a.awaiting) > 0 {
			return
		}
		a.phase = agentActorQuiesced
		tellRegistry(ctx, a.rt, &agentQuiesced{id: a.id})
	case from == agentActorQuiesced && a.phase == agentActorQuiesced: // stopAgent
		a.phase = agentActorStopping
		fallthrough
	case from == agentActorStopping && a.phase == agentActorStopping: // a task actor stopped
		if len(ctx.Children()) == 0 {
			ctx.Stop(ctx.Self())
		}
	}
}

func (a *agent) addCleanup(m *addCleanup) *addCleanupReply {
	switch {
	case a.phase == agentActorOpen,
		a.phase == agentActorDraining && m.drain != 0 && m.drain == a.drainToken:
	default:
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
	cctx := context.WithValue(a.rt.abort, drainKey{}, drainMark{agent: a.id, token: a.drainToken})
	self, rt := ctx.Self(), a.rt
	rt.goSafe("cleanup", func() {
		err := messages.Contain("cleanup", func() error { return c.fn(cctx) })
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
