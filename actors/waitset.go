package actors

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// setWaiter is the actor of one wait on a set of tasks (WaitTasks), a child of the
// registry. It is built from the per-task waits: it sends one WaitTask per id through
// the registry (which routes it, or answers from a tombstone), and every task answers
// each wait exactly once — at settlement, at the wait's own deadline, or when the
// wait is abandoned. So the set waiter never polls and never leaves a waiter behind:
//
//	waiting ──any: one terminal answer / all: every answer terminal,──▶ finishing ──every wait answered──▶ (replies, stops)
//	          a deadline passed, an error, or the caller gave up        (abandonWait sent for the rest)
type setWaiter struct {
	rt        *Runtime
	req       *messages.WaitTasks // IDs deduplicated and fence-checked by the registry
	requester *actor.PID

	snaps       []messages.Snapshot
	answered    []bool
	outstanding int
	settled     int
	err         error
	finishing   bool
}

func newSetWaiterProps(rt *Runtime, req *messages.WaitTasks, requester *actor.PID) *actor.Props {
	return rt.kernel.Props(func() actor.Actor {
		return &setWaiter{rt: rt, req: req, requester: requester,
			snaps: make([]messages.Snapshot, len(req.IDs)), answered: make([]bool, len(req.IDs))}
	}, nil, actor.WithSupervisor(neverRestart))
}

func (w *setWaiter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for _, id := range w.req.IDs {
			w.outstanding++
			ctx.Request(w.rt.registry, &messages.WaitTask{ID: id, Caller: w.req.Caller, Timeout: w.req.Timeout})
		}
	case *messages.WaitReply:
		i := slices.Index(w.req.IDs, m.ID)
		if i < 0 || w.answered[i] {
			return
		}
		w.answered[i] = true
		w.outstanding--
		w.snaps[i] = m.Snapshot
		switch {
		case m.Err != nil:
			if w.err == nil {
				w.err = m.Err
			}
			w.finish(ctx)
		case m.Snapshot.Status.Terminal():
			w.settled++
			if w.req.Mode == messages.WaitAny || w.settled == len(w.req.IDs) {
				w.finish(ctx)
			}
		default: // this wait's deadline passed: the set's has too
			w.finish(ctx)
		}
		w.replyWhenDone(ctx)
	case *abandonSet:
		w.finish(ctx)
	}
}

// finish abandons the waits still pending; each is then answered once more.
func (w *setWaiter) finish(ctx actor.Context) {
	if w.finishing {
		return
	}
	w.finishing = true
	for i, id := range w.req.IDs {
		if !w.answered[i] {
			tellRegistry(ctx, w.rt, &abandonWait{id: id, caller: w.req.Caller, waiter: ctx.Self()})
		}
	}
}

func (w *setWaiter) replyWhenDone(ctx actor.Context) {
	if w.outstanding > 0 {
		return
	}
	if w.err != nil {
		ctx.Send(w.requester, &messages.WaitTasksReply{Err: w.err})
	} else {
		ctx.Send(w.requester, &messages.WaitTasksReply{Snapshots: w.snaps})
	}
	ctx.Stop(ctx.Self())
}

// checkWaitSet validates a WaitTasks request and applies the owner fence to every id
// before anything waits. It returns the deduplicated request.
func (r *registry) checkWaitSet(m *messages.WaitTasks) (*messages.WaitTasks, error) {
	if m.Timeout <= 0 {
		return nil, invalidWaitTimeout(m.Timeout)
	}
	if m.Mode != messages.WaitAny && m.Mode != messages.WaitAll {
		return nil, fmt.Errorf("%w: wait mode %q: want %q or %q", messages.ErrInvalidArgument, m.Mode, messages.WaitAny, messages.WaitAll)
	}
	var ids []messages.TaskID
	for _, id := range m.IDs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || len(ids) > messages.MaxWaitSet {
		return nil, fmt.Errorf("%w: a wait names 1 to %d task ids, not %d", messages.ErrInvalidArgument, messages.MaxWaitSet, len(ids))
	}
	for _, id := range ids {
		if e, ok := r.tasks[id]; !ok || !r.visible(e.snap.Owner, m.Caller) {
			return nil, notFound(id)
		}
	}
	return &messages.WaitTasks{IDs: ids, Caller: m.Caller, Mode: m.Mode, Timeout: m.Timeout}, nil
}

// waitSet is the typed client's wait on a set of tasks.
func (t *Tasks) waitSet(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, mode messages.WaitMode, timeout time.Duration) ([]messages.Snapshot, error) {
	rt := t.rt
	if timeout <= 0 {
		return nil, invalidWaitTimeout(timeout)
	}
	m, abandoned, err := rt.abandonable(ctx, &messages.WaitTasks{IDs: ids, Caller: caller, Mode: mode, Timeout: timeout},
		func(w *actor.PID) registryMsg { return &abandonSet{requester: w} })
	if err != nil {
		return nil, err
	}
	snaps, err := waitSetResult(m)
	if abandoned && err == nil && !setDone(snaps, mode) {
		return snaps, ctx.Err()
	}
	return snaps, err
}

func waitSetResult(m any) ([]messages.Snapshot, error) {
	r, ok := m.(*messages.WaitTasksReply)
	if !ok {
		return nil, fmt.Errorf("taskrt: unexpected wait reply %T", m)
	}
	return r.Snapshots, r.Err
}

// setDone reports whether a set wait's condition holds for snaps.
func setDone(snaps []messages.Snapshot, mode messages.WaitMode) bool {
	n := 0
	for _, s := range snaps {
		if s.Status.Terminal() {
			n++
		}
	}
	return (mode == messages.WaitAny && n > 0) || (mode == messages.WaitAll && n == len(snaps))
}

// WaitAny waits until one of the tasks ids names has settled, or timeout passes. It
// returns the snapshots in the order of the ids (duplicates removed): at least one
// terminal, unless the timeout passed first (then every one is running, and the
// error is nil). Up to messages.MaxWaitSet ids; every id is checked against the owner
// fence before anything waits, and an unknown or foreign one fails the call, naming
// it. Every terminal snapshot returned marks its task reported, as Wait does;
// cancelling ctx ends only the wait (its error is returned with the current
// snapshots). It is built from the tasks' own waits, so it costs no polling.
func (t *Tasks) WaitAny(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, timeout time.Duration) ([]messages.Snapshot, error) {
	return t.waitSet(ctx, ids, caller, messages.WaitAny, timeout)
}

// WaitAll is WaitAny that waits until every task has settled.
func (t *Tasks) WaitAll(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, timeout time.Duration) ([]messages.Snapshot, error) {
	return t.waitSet(ctx, ids, caller, messages.WaitAll, timeout)
}

// waitTasks starts a set waiter for a WaitAny or WaitAll whose ids all pass the
// owner fence; it answers the caller itself.
func (r *registry) waitTasks(ctx actor.Context, m *messages.WaitTasks) {
	req, err := r.checkWaitSet(m)
	if err != nil {
		ctx.Respond(&messages.WaitTasksReply{Err: err})
		return
	}
	pid := ctx.Spawn(newSetWaiterProps(r.rt, req, ctx.Sender()))
	r.setWaiters[pid.Id] = [2]*actor.PID{pid, ctx.Sender()}
}

// abandonSet passes a caller's giving up on a set wait to its set waiter.
func (r *registry) abandonSet(ctx actor.Context, m *abandonSet) {
	for _, w := range r.setWaiters {
		if w[1].Equal(m.requester) {
			tellSetWaiter(ctx, w[0], m)
		}
	}
}
