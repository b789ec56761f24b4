package actors

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/messages"
)

// This file is how the typed client reaches the registry: one request, one answer,
// through the kernel's reply processes (Kernel.Call). A call ends with the answer,
// the caller's context, or the runtime's end (ErrClosed).

// call sends one of the registry's internal requests and waits for its reply, the
// context, or the runtime's end.
func (rt *Runtime) call(ctx context.Context, m registryMsg) (any, error) { return rt.roundTrip(ctx, m) }

// ask is call for a public request (messages.Request), the typed client's way to the
// same surface actor-native embedders use.
func (rt *Runtime) ask(ctx context.Context, m messages.Request) (any, error) {
	return rt.roundTrip(ctx, m)
}

func (rt *Runtime) roundTrip(ctx context.Context, msg any) (any, error) {
	if rt.closed.Load() {
		return nil, rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := rt.kernel.Call(ctx, rt.registry, msg, rt.stopped)
	if err != nil {
		return nil, rt.stoppedErr(err)
	}
	return rt.checkReply(m)
}

// stoppedErr is ErrClosed for a call the runtime's end cut short, else err (the
// caller's context ended).
func (rt *Runtime) stoppedErr(err error) error {
	if errors.Is(err, kernel.ErrStopped) {
		return rt.closedErr()
	}
	return err
}

// abandonable sends a public request whose deadline travels inside it (a wait, a
// read until a pattern, a set wait) and waits for its one answer. If ctx ends first,
// it tells the registry abandon(the reply's pid) — whoever holds the request then
// answers at once with what it has — and waits for that answer: the request is
// answered exactly once either way. abandoned reports that ctx ended before the
// answer; the caller decides whether the answer still counts (a wait that found the
// task settled does).
func (rt *Runtime) abandonable(ctx context.Context, m messages.Request, abandon func(waiter *actor.PID) registryMsg) (answer any, abandoned bool, err error) {
	if rt.closed.Load() {
		return nil, false, rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	answer, abandoned, err = rt.kernel.CallAbandonable(ctx, rt.registry, m, rt.stopped, func(waiter *actor.PID) {
		tellRegistry(rt.system.Root, rt, abandon(waiter))
	})
	if err != nil {
		return nil, abandoned, rt.stoppedErr(err)
	}
	return answer, abandoned, nil
}

// commit sends a start's commit and returns its answer, a *startReply. The commit of
// an owned task is answered by the registry with spawnVia: the task goes to its agent
// actor from here (Kernel.PostAndAwait), and when the agent is idle this goroutine,
// about to wait for the task's answer anyway, runs the agent (its spawn, and the
// task's Started with it) instead of handing it to a dispatcher worker and waiting
// to be woken.
func (rt *Runtime) commit(c *commitStart) (any, error) {
	m, err := rt.callUntilReply(c)
	if err != nil {
		return nil, err
	}
	via, ok := m.(*spawnVia)
	if !ok {
		return m, nil
	}
	m, err = rt.kernel.PostAndAwait(via.agent, func(starter *actor.PID) any {
		via.task.starter = starter
		return &spawnTask{task: via.task}
	}, rt.stopped)
	if err != nil {
		return nil, rt.stoppedErr(err)
	}
	return rt.checkReply(m)
}

// callUntilReply is call for requests that must not be abandoned midway (a start's
// reserve and commit): it waits for the reply or the runtime's end only.
func (rt *Runtime) callUntilReply(m registryMsg) (any, error) {
	return rt.call(context.Background(), m)
}

// errDeadLetter is a request that reached no actor. For a request about a task it
// means the task's record is gone (not found); for anything else, that the runtime
// is gone.
var errDeadLetter = errors.New("taskrt: request reached no actor")

func (rt *Runtime) checkReply(m any) (any, error) {
	switch m := m.(type) {
	case *actor.DeadLetterResponse:
		return nil, errDeadLetter
	case error:
		return nil, m
	}
	return m, nil
}
