package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/messages"
)

// Wait blocks until the task settles and returns its terminal snapshot (marking it
// reported), or returns the still-running snapshot and a nil error when timeout
// passes. Cancelling ctx ends only this wait (the task is untouched, and not marked
// reported) and returns ctx's error with the current snapshot — unless the task had
// settled by then, in which case the terminal snapshot is returned with a nil error.
// Any number of waits may be pending on one task.
func (t *Tasks) Wait(ctx context.Context, id messages.TaskID, caller messages.AgentID, timeout time.Duration) (messages.Snapshot, error) {
	rt := t.rt
	if timeout <= 0 {
		return messages.Snapshot{}, invalidWaitTimeout(timeout)
	}
	// The deadline travels in the request: the task actor ends the wait itself. An
	// abandoned wait is answered with the terminal snapshot if the task settled first,
	// or with the current one.
	m, abandoned, err := rt.abandonable(ctx, &messages.WaitTask{ID: id, Caller: caller, Timeout: timeout},
		func(w *actor.PID) registryMsg { return &abandonWait{id: id, caller: caller, waiter: w} })
	if err != nil {
		return messages.Snapshot{}, err
	}
	s, err := waitResult(id, m)
	if abandoned && err == nil && !s.Status.Terminal() {
		return s, ctx.Err()
	}
	return s, err
}

func waitResult(id messages.TaskID, m any) (messages.Snapshot, error) {
	switch r := m.(type) {
	case *messages.WaitReply:
		return r.Snapshot, r.Err
	default: // a dead letter: the record went away
		return messages.Snapshot{}, notFound(id)
	}
}

// waiter is one pending WaitTask.
type waiter struct {
	n     uint64
	pid   *actor.PID
	timer *time.Timer
}

func (t *task) wait(ctx actor.Context, m *messages.WaitTask) {
	if m.Timeout <= 0 {
		ctx.Respond(&messages.WaitReply{ID: m.ID, Err: invalidWaitTimeout(m.Timeout)})
		return
	}
	if t.phase == phaseSettled {
		t.report(ctx)
		ctx.Respond(&messages.WaitReply{ID: t.snap.ID, Snapshot: t.snap})
		return
	}
	if t.snap.OutputFull { // nothing happens before a read: do not wait through it
		ctx.Respond(&messages.WaitReply{ID: t.snap.ID, Snapshot: t.snap})
		return
	}
	t.nextWaiter++
	n, self, rt := t.nextWaiter, t.self, t.rt
	t.waiters = append(t.waiters, &waiter{n: n, pid: ctx.Sender(),
		timer: time.AfterFunc(m.Timeout, func() { tellTask(rt.system.Root, self, &waitTimeout{n: n}) })})
}

// endWait answers and removes the first pending waiter that matches, with the current
// (non-terminal) snapshot: its deadline passed, or its requester gave up.
func (t *task) endWait(ctx actor.Context, match func(*waiter) bool) {
	for i, w := range t.waiters {
		if match(w) {
			w.timer.Stop()
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			ctx.Send(w.pid, &messages.WaitReply{ID: t.snap.ID, Snapshot: t.snap})
			return
		}
	}
}

// liveWaiters counts the waiters whose requester is still there to receive the
// answer: a protoactor future that timed out has left the process registry, and its
// wait must not mark the task reported, or the notice would be lost.
func (t *task) liveWaiters() int {
	n := 0
	for _, w := range t.waiters {
		if t.rt.alive(w.pid) {
			n++
		}
	}
	return n
}

// wait is the registry's part of a wait: the timeout and the owner fence checked,
// a tombstone's and a settled task's answered from the index (the terminal
// snapshot, now reported), a live task's left to it.
func (r *registry) wait(ctx actor.Context, m *messages.WaitTask) {
	if m.Timeout <= 0 {
		ctx.Respond(&messages.WaitReply{ID: m.ID, Err: invalidWaitTimeout(m.Timeout)})
		return
	}
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.WaitReply{ID: m.ID, Err: notFound(m.ID)})
	case e.tombstone():
		e.report()
		ctx.Respond(&messages.WaitReply{ID: e.snap.ID, Snapshot: e.snap})
	case e.snap.Status.Terminal():
		r.reportSettled(ctx, e)
		ctx.Respond(&messages.WaitReply{ID: e.snap.ID, Snapshot: e.snap})
	default:
		ctx.Forward(e.pid)
	}
}

// abandonWait passes a caller's giving up on a wait (or a ReadUntil) to the task.
// Nothing is to be done when the task is gone or evicted: its actor answered every
// waiter when it settled or stopped.
func (r *registry) abandonWait(ctx actor.Context, m *abandonWait) {
	if e := r.reach(m.id, m.caller); e != nil && !e.tombstone() {
		ctx.Forward(e.pid)
	}
}

// abandonWait is the task's part of a caller giving up: its pending wait or
// ReadUntil is answered now with the current snapshot, and nothing is consumed or
// marked reported.
func (t *task) abandonWait(ctx actor.Context, m *abandonWait) {
	t.endWait(ctx, func(w *waiter) bool { return w.pid.Equal(m.waiter) })
	t.endUntil(ctx, func(w *untilWaiter) bool { return w.pid.Equal(m.waiter) }, false)
}

// waitersAtSettle answers every wait pending at settlement with the terminal
// snapshot; a requester that gave up gets nothing.
func (t *task) waitersAtSettle(ctx actor.Context) {
	for _, w := range t.waiters {
		w.timer.Stop()
		if t.rt.alive(w.pid) {
			ctx.Send(w.pid, &messages.WaitReply{ID: t.snap.ID, Snapshot: t.snap})
		}
	}
	t.waiters = nil
}

// waitersAtStop answers the waits still pending when the actor stops (none should
// be: records are dropped after settlement).
func (t *task) waitersAtStop() {
	for _, w := range t.waiters {
		w.timer.Stop()
		t.rt.send(w.pid, &messages.WaitReply{ID: t.snap.ID, Snapshot: t.snap})
	}
	t.waiters = nil
}
