package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// A kill, in every layer: the typed client, the registry's answer in every state
// it knows a task in, and the task's in every phase — down to the answer a kill in
// flight gets when the task's actor stops.
//
//	Tasks.Kill ─▶ registry.kill ──unknown, fenced──▶ not found
//	                  │ tombstone, settled ──▶ already-terminal (reported), from the index
//	                  ▼
//	              task.kill ──queued──▶ killed "never started" (killedWhileQueued): requested
//	                  │ settled ──▶ already-terminal (reported)
//	                  ▼
//	              Cancel, off the mailbox ──▶ task.killCancelled ──nil──▶ stopping (killAccepted): requested
//	                                                 │ error ──▶ ErrCancelFailed; the task runs on
//
// Every answer carries the task's snapshot as it stands after the kill, so that a
// caller needs no second request to learn the status it shows.

// Kill requests cancellation: KillRequested (the status is now stopping, the reason
// was passed to the producer's Cancel, the task is reported) or KillAlreadyTerminal
// (the task is reported: the caller now knows its end), with the task's snapshot
// after the kill. A Cancel that errors or panics fails the call with an error
// wrapping ErrCancelFailed and the producer's error, and leaves the task untouched.
func (t *Tasks) Kill(ctx context.Context, id messages.TaskID, caller messages.AgentID, reason string) (messages.KillResult, messages.Snapshot, error) {
	m, err := t.rt.ask(ctx, &messages.KillTask{ID: id, Caller: caller, Reason: reason})
	if err != nil {
		return "", messages.Snapshot{}, taskErr(id, err)
	}
	r := m.(*messages.KillReply)
	return r.Result, r.Snapshot, r.Err
}

// kill is the registry's part of a kill: the owner fence, then the answer for every
// state the index knows — a tombstone and a settled task are answered here, already
// terminal and now reported; a queued, running or stopping task is the task actor's
// to answer.
func (r *registry) kill(ctx actor.Context, m *messages.KillTask) {
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.KillReply{Err: notFound(m.ID)})
	case e.tombstone():
		e.report()
		ctx.Respond(&messages.KillReply{Result: messages.KillAlreadyTerminal, Snapshot: e.snap})
	case e.snap.Status.Terminal():
		r.reportSettled(ctx, e)
		ctx.Respond(&messages.KillReply{Result: messages.KillAlreadyTerminal, Snapshot: e.snap})
	default:
		ctx.Forward(e.pid)
	}
}

// kill is the task's part of a kill, in every phase: a queued task settles killed
// without running anything (a queued task whose Run is running takes the kill once
// Run returns: queuedRan); a settled one answers already-terminal; a running or
// stopping one calls the producer's Cancel off the mailbox and answers when it
// returns (killCancelled).
func (t *task) kill(ctx actor.Context, m *messages.KillTask) {
	switch {
	case t.phase == phaseQueued && t.queue.starting:
		t.queue.kills = append(t.queue.kills, pendingKill{sender: ctx.Sender(), reason: m.Reason})
	case t.phase == phaseQueued:
		t.markReported() // carried by the settlement
		t.transition(ctx, killedWhileQueued, messages.Outcome{Status: messages.Killed, Detail: "never started: killed while queued"})
		ctx.Respond(&messages.KillReply{Result: messages.KillRequested, Snapshot: t.snap})
	case t.phase == phaseSettled:
		// The reply carries the terminal status to the model: it has seen the end.
		t.report(ctx)
		ctx.Respond(&messages.KillReply{Result: messages.KillAlreadyTerminal, Snapshot: t.snap})
	default:
		t.cancelForKill(ctx.Sender(), m.Reason)
	}
}

// cancelForKill calls the producer's Cancel for the kill sender asked for.
func (t *task) cancelForKill(sender *actor.PID, reason string) {
	pr := t.pendingOf()
	pr.kills = append(pr.kills, sender)
	t.cancelAsync(reason, sender)
}

// killCancelled answers a kill once its Cancel returned: accepted (the task is
// stopping, and reported: the model killed it), failed (the task runs on), or —
// when the work settled while Cancel ran — requested all the same, since the kill
// is what ended it.
func (t *task) killCancelled(ctx actor.Context, r *cancelResult) {
	t.dropKill(r.sender)
	switch {
	case t.phase == phaseSettled:
		// The settlement was marked reported because this kill was in flight.
		res := messages.KillRequested
		if r.err != nil {
			res = messages.KillAlreadyTerminal
		}
		ctx.Send(r.sender, &messages.KillReply{Result: res, Snapshot: t.snap})
	case r.err != nil:
		if pr := t.pending; pr != nil && t.phase == phaseRunning && len(pr.kills) == 0 {
			pr.stopAt = time.Time{} // no stop began: the task runs on
		}
		ctx.Send(r.sender, &messages.KillReply{Err: fmt.Errorf("%w for task %s: %w", messages.ErrCancelFailed, t.snap.ID, r.err)})
	default:
		// The kill shows the model the task's end: reported, in the transition's
		// message (or alone, when a teardown moved it to stopping first).
		if t.markReported() && !t.transition(ctx, killAccepted, messages.Outcome{}) {
			t.toRegistry(ctx, &taskChanged{snap: t.snap})
		}
		ctx.Send(r.sender, &messages.KillReply{Result: messages.KillRequested, Snapshot: t.snap})
	}
}

func (t *task) dropKill(pid *actor.PID) {
	pr := t.pending
	if pr == nil {
		return
	}
	for i, k := range pr.kills {
		if k == pid {
			pr.kills = append(pr.kills[:i], pr.kills[i+1:]...)
			return
		}
	}
}

// killsInFlight is how many kills wait for their Cancel call.
func (t *task) killsInFlight() int {
	if t.pending == nil {
		return 0
	}
	return len(t.pending.kills)
}

// queuedKills answers the kills that came while a queued task's Run ran, once it
// returned: already-terminal when the start failed, or — the task now running —
// each goes on as a kill of a running task.
func (t *task) queuedKills(ctx actor.Context, started bool) {
	for _, k := range t.queue.kills {
		if started {
			t.cancelForKill(k.sender, k.reason)
			continue
		}
		ctx.Send(k.sender, &messages.KillReply{Result: messages.KillAlreadyTerminal, Snapshot: t.snap})
	}
	t.queue.kills = nil
}

// killsAtStop answers the kills whose Cancel still runs when the actor stops
// (retention evicted the settled task, or the runtime failed): the answer would
// come as a message to an actor that is gone. A kill in flight was requested.
func (t *task) killsAtStop() {
	if t.pending == nil {
		return
	}
	for _, k := range t.pending.kills {
		t.rt.send(k, &messages.KillReply{Result: messages.KillRequested, Snapshot: t.snap})
	}
	t.pending.kills = nil
}
