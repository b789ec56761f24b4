package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/messages"
)

// beginTeardown cancels the task for its owner's disposal or the runtime's close.
func (t *task) beginTeardown(ctx actor.Context, reason string) {
	// Teardown marks the task reported: no notice goes to a dying owner. The mark
	// rides on the transition's message, or goes alone when the task is stopping
	// already (a kill in flight).
	if t.markReported() && !t.transition(ctx, teardownBegan, messages.Outcome{}) {
		t.toRegistry(ctx, &taskChanged{snap: t.snap})
	}
	if pr := t.pendingOf(); pr.settleT == nil {
		self, rt := t.self, t.rt
		pr.settleT = time.AfterFunc(rt.cfg.settleTimeout, func() { tellTask(rt.system.Root, self, &settleTimeout{}) })
	}
	t.cancelAsync(reason, nil)
}

// answerTeardown tells the teardown requester the task is done with, once it is
// settled and no Cancel call is still running (the record, and the producer's
// Release, must not go while producer code still runs for this task) — or once the
// settle timer fired, so that a Cancel that hangs cannot hold a disposal forever.
func (t *task) answerTeardown(ctx actor.Context) {
	pr := t.pending
	if pr == nil || pr.teardownBy == nil || t.phase != phaseSettled || (t.calls.inFlight > 0 && !t.overdue) {
		return
	}
	tellTeardownDone(ctx, pr.teardownBy, &teardownDone{id: t.snap.ID, pid: t.self})
	pr.teardownBy = nil
	if pr.settleT != nil {
		pr.settleT.Stop()
	}
}

// A teardown is the runtime ending a task for its owner's disposal or its own
// close (agent or registry → task): the task is marked reported (no notice goes to
// a dying owner), moved to stopping before the producer's Cancel is called, and the
// requester is answered teardownDone once it settled and no producer call runs —
// or once the settle timeout (WithSettleTimeout) passed, the task then recorded
// failed as abandoned, so that work that never settles cannot hold a disposal
// forever.

// teardown is the task's part of a teardown, in every phase: a queued task settles
// killed without running anything (one whose Run is running takes the teardown
// once Run returns: queuedRan); a settled one answers at once; a running or
// stopping one is cancelled (beginTeardown).
func (t *task) teardown(ctx actor.Context, m *teardown) {
	t.pendingOf().teardownBy = ctx.Sender()
	switch {
	case t.phase == phaseQueued && t.queue.starting:
		t.queue.teardown = m.reason
	case t.phase == phaseQueued:
		t.markReported() // carried by the settlement
		t.transition(ctx, killedWhileQueued, messages.Outcome{Status: messages.Killed, Detail: "never started: " + m.reason})
	case t.phase == phaseSettled:
		t.answerTeardown(ctx)
	default:
		t.beginTeardown(ctx, m.reason)
	}
}

// settleTimedOut: the settle timer of a teardown fired. A task still not settled
// is recorded failed as abandoned; the requester is answered even if a Cancel
// call still hangs.
func (t *task) settleTimedOut(ctx actor.Context) {
	t.overdue = true
	if settleTimedOut.applies(t.phase) {
		t.rt.nAbandoned.Add(1)
		t.rt.metrics.abandoned.Add(bg, 1)
		t.rt.log.Error("taskrt: task did not settle after cancel; abandoned", "task", t.snap.ID, "after", t.rt.cfg.settleTimeout)
		t.transition(ctx, settleTimedOut, messages.Outcome{Status: messages.Failed,
			Detail: fmt.Sprintf("abandoned: did not settle within %s after cancel", t.rt.cfg.settleTimeout)})
	}
	t.answerTeardown(ctx)
}

// teardownCancelled takes the result of a teardown's Cancel: one that erred
// force-fails the task (the work may be orphaned), and the teardown goes on.
func (t *task) teardownCancelled(ctx actor.Context, r *cancelResult) {
	if r.err != nil && teardownCancelFailed.applies(t.phase) {
		t.rt.log.Error("taskrt: cancel failed during teardown", "task", t.snap.ID, "err", r.err)
		t.transition(ctx, teardownCancelFailed, messages.Outcome{Status: messages.Failed,
			Detail: fmt.Sprintf("cancel threw during teardown; work may be orphaned: %v", r.err)})
	}
}

// teardownAtStop stops the settle timer of a task whose actor stops.
func (t *task) teardownAtStop() {
	if pr := t.pending; pr != nil && pr.settleT != nil {
		pr.settleT.Stop()
	}
}
