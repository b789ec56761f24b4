package actors

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// reply is how the typed client waits for an actor's answer: a one-shot
// actor.Process (what a protoactor Future is, without its timer and lock). Requests
// name it as their sender, so actors answer with an ordinary ctx.Respond, and the
// caller selects on its channel together with its context and the runtime's end.
//
// Every request gets exactly one answer, so a reply whose answer was received is clean
// and goes back to the runtime's free list (recycle); one whose caller gave up may
// still receive a late answer and leaves the process registry instead (release).
type reply struct {
	rt  *Runtime
	pid *actor.PID
	ch  chan any
}

// newReply takes a reply process from the runtime's free list, or registers a new one.
func newReply(rt *Runtime) *reply {
	select {
	case r := <-rt.replies:
		return r
	default:
	}
	r := &reply{rt: rt, ch: make(chan any, 1)}
	r.pid, _ = rt.system.ProcessRegistry.Add(r, "taskrt-reply"+rt.system.ProcessRegistry.NextId())
	return r
}

// recycle returns a reply whose one answer was received to the free list.
func (r *reply) recycle() {
	select {
	case r.rt.replies <- r:
	default:
		r.release()
	}
}

// SendUserMessage receives the answer.
func (r *reply) SendUserMessage(_ *actor.PID, msg any) {
	_, m, _ := actor.UnwrapEnvelope(msg)
	select {
	case r.ch <- m:
	default: // one-shot: anything after the first answer is dropped
	}
}

// SendSystemMessage ignores system messages.
func (r *reply) SendSystemMessage(*actor.PID, any) {}

// Stop does nothing: a reply leaves the registry through release.
func (r *reply) Stop(*actor.PID) {}

func (r *reply) release() { r.rt.system.ProcessRegistry.Remove(r.pid) }

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
	r := newReply(rt)
	rt.system.Root.RequestWithCustomSender(rt.registry, msg, r.pid)
	if ctx.Done() == nil { // a context that never ends (a start's calls): one case less
		return rt.await(r)
	}
	select {
	case m := <-r.ch:
		r.recycle()
		return rt.checkReply(m)
	case <-ctx.Done():
		r.release()
		return nil, ctx.Err()
	case <-rt.stopped:
		return rt.stoppedReply(r)
	}
}

// stoppedReply is a round trip's answer once the runtime stopped: the answer if it
// came, else ErrClosed.
func (rt *Runtime) stoppedReply(r *reply) (any, error) {
	r.release()
	select {
	case m := <-r.ch:
		return rt.checkReply(m)
	default:
		return nil, rt.closedErr()
	}
}

// abandonable sends a public request whose deadline travels inside it (a wait, a
// read until a pattern, a set wait) and waits for its one answer. If ctx ends first,
// it tells the registry abandon(the reply's pid) — whoever holds the request then
// answers at once with what it has — and waits for that answer: the request is
// answered exactly once either way, so nothing is left behind and the reply process
// is recycled. abandoned reports that ctx ended before the answer; the caller decides
// whether the answer still counts (a wait that found the task settled does).
func (rt *Runtime) abandonable(ctx context.Context, m messages.Request, abandon func(waiter *actor.PID) registryMsg) (answer any, abandoned bool, err error) {
	if rt.closed.Load() {
		return nil, false, rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	r := newReply(rt)
	rt.system.Root.RequestWithCustomSender(rt.registry, m, r.pid)
	if ctx.Done() == nil { // a context that never ends: nothing to abandon
		select {
		case a := <-r.ch:
			r.recycle()
			return a, false, nil
		case <-rt.stopped:
			r.release()
			return nil, false, rt.closedErr()
		}
	}
	select {
	case a := <-r.ch:
		r.recycle()
		return a, false, nil
	case <-rt.stopped:
		r.release()
		return nil, false, rt.closedErr()
	case <-ctx.Done():
	}
	tellRegistry(rt.system.Root, rt, abandon(r.pid))
	select {
	case a := <-r.ch:
		r.recycle()
		return a, true, nil
	case <-rt.stopped:
		r.release()
		return nil, true, rt.closedErr()
	}
}

// commit sends a start's commit and returns its answer, a *startReply. The commit of
// an owned task is answered by the registry with spawnVia: the task goes to its agent
// actor from here, and when the agent is idle this goroutine, about to wait for the
// task's answer anyway, runs the agent (its spawn, and the task's Started with it)
// instead of handing it to a dispatcher worker and waiting to be woken.
func (rt *Runtime) commit(c *commitStart) (any, error) {
	m, err := rt.callUntilReply(c)
	if err != nil {
		return nil, err
	}
	via, ok := m.(*spawnVia)
	if !ok {
		return m, nil
	}
	r := newReply(rt)
	via.task.starter = r.pid
	via.agent.postAndRun(&spawnTask{task: via.task}, r.answered)
	return rt.await(r)
}

// await waits for r's answer or the runtime's end.
func (rt *Runtime) await(r *reply) (any, error) {
	select {
	case m := <-r.ch:
		r.recycle()
		return rt.checkReply(m)
	case <-rt.stopped:
		return rt.stoppedReply(r)
	}
}

// answered reports whether the answer is there.
func (r *reply) answered() bool { return len(r.ch) > 0 }

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
