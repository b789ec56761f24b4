package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// agent is the actor of one owning agent. Its children are the task actors of the
// tasks it owns; it also holds the agent's cleanup registrations.
//
// Disposal, in order (each step starts when the previous one finished):
//
//  1. BeginDispose (from the registry, once no start for this owner is in flight):
//     run every cleanup, one at a time, in registration order, off the mailbox; a
//     cleanup registered mid-drain (with the drain's context) joins the queue.
//  2. Send Teardown to every task child; each answers TeardownDone once settled
//     (cancelled with the disposal's reason, force-failed if Cancel errors,
//     abandoned after the settle timeout).
//  3. Tell the registry AgentQuiesced. The registry drops the tasks from its index,
//     poisons each task actor (so any request it already routed is answered first)
//     and sends StopAgent.
//  4. Stop once every task child has stopped (their Stopped handlers call Release).
//     The registry sees Terminated and answers the Dispose callers.
type agent struct {
	rt     *Runtime
	id     messages.AgentID
	reason string

	mu         sync.Mutex // protects cleanups, nextHandle and phase (shared with the drain goroutine)
	cleanups   []*cleanupEntry
	nextHandle uint64
	phase      agentPhase
	drainToken uint64

	awaiting int  // TeardownDone answers still owed
	stopWhen bool // StopAgent received: stop once the children are gone
}

type agentPhase int

const (
	phaseOpen     agentPhase = iota // accepting cleanups
	phaseDraining                   // running cleanups; only mid-drain registrations accepted
	phaseDrained                    // cleanups done; no more registrations
)

type cleanupEntry struct {
	handle  uint64
	fn      messages.Cleanup
	removed bool
	ran     bool
}

// cleanupsDrained is the drain goroutine telling its agent it is finished.
type cleanupsDrained struct{}

func newAgentProps(rt *Runtime, id messages.AgentID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &agent{rt: rt, id: id} },
		actor.WithSupervisor(neverRestart), actor.WithDispatcher(rt.pool))
}

func (a *agent) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			a.rt.log.Error("taskrt: agent actor panicked", "agent", a.id, "panic", fmt.Sprint(p))
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.rt.nActors.Add(1)
	case *messages.SpawnTask:
		// Never after StopAgent: the registry stops routing to a quiesced agent.
		if _, err := ctx.SpawnNamed(newTaskProps(a.rt, m.Snapshot, m.Hooks, m.Starter), string(m.Snapshot.ID)); err != nil {
			a.rt.log.Error("taskrt: spawning task actor failed", "task", m.Snapshot.ID, "err", err)
		}
	case *messages.AddCleanup:
		ctx.Respond(a.addCleanup(m))
	case *messages.RemoveCleanup:
		a.mu.Lock()
		for _, c := range a.cleanups {
			if c.handle == m.Handle {
				c.removed = true
			}
		}
		a.mu.Unlock()
	case *messages.BeginDispose:
		a.reason = m.Reason
		a.mu.Lock()
		a.phase = phaseDraining
		a.drainToken = a.rt.nextToken.Add(1)
		a.mu.Unlock()
		self := ctx.Self()
		a.rt.goSafe("cleanup drain", func() { a.drain(self) })
	case *cleanupsDrained:
		children := ctx.Children()
		a.awaiting = len(children)
		for _, c := range children {
			ctx.Request(c, &messages.Teardown{Reason: a.reason})
		}
		if a.awaiting == 0 {
			ctx.Send(a.rt.registry, &messages.AgentQuiesced{ID: a.id})
		}
	case *messages.TeardownDone:
		a.awaiting--
		if a.awaiting == 0 {
			ctx.Send(a.rt.registry, &messages.AgentQuiesced{ID: a.id})
		}
	case *messages.StopAgent:
		a.stopWhen = true
		if len(ctx.Children()) == 0 {
			ctx.Stop(ctx.Self())
		}
	case *actor.Terminated:
		if a.stopWhen && len(ctx.Children()) == 0 {
			ctx.Stop(ctx.Self())
		}
	case *actor.Stopped:
		a.rt.nActors.Add(-1)
	}
}

func (a *agent) addCleanup(m *messages.AddCleanup) *messages.AddCleanupReply {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.phase == phaseDrained,
		a.phase == phaseDraining && (m.Drain == 0 || m.Drain != a.drainToken):
		return &messages.AddCleanupReply{Err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, a.id)}
	}
	a.nextHandle++
	a.cleanups = append(a.cleanups, &cleanupEntry{handle: a.nextHandle, fn: m.Cleanup})
	return &messages.AddCleanupReply{Handle: a.nextHandle}
}

// drain runs the cleanups one at a time until none is left, then reports home. The
// emptiness check and the switch to phaseDrained happen under one lock, so a
// registration either joins this drain or is refused.
func (a *agent) drain(self *actor.PID) {
	ctx := context.WithValue(a.rt.abort, drainKey{}, drainMark{agent: a.id, token: a.drainToken})
	for {
		a.mu.Lock()
		var next *cleanupEntry
		for _, c := range a.cleanups {
			if !c.ran && !c.removed {
				next = c
				break
			}
		}
		if next == nil {
			a.phase = phaseDrained
			a.cleanups = nil
			a.mu.Unlock()
			a.rt.send(self, &cleanupsDrained{})
			return
		}
		next.ran = true
		a.mu.Unlock()
		if err := runCleanup(ctx, next.fn); err != nil {
			a.rt.log.Error("taskrt: cleanup failed", "agent", a.id, "err", err)
		}
	}
}

func runCleanup(ctx context.Context, fn messages.Cleanup) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cleanup panicked: %v", p)
		}
	}()
	return fn(ctx)
}
