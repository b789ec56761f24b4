package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// task is the actor of one background task. It owns the task's status, its read
// cursor (the producer's consuming ReadOutput is only ever called here, one call at a
// time), the final outcome and the pending waiters. It is the only writer of its
// snapshot; every change is mirrored to the registry's index (TaskChanged,
// TaskSettled) before the caller that caused it is answered, so a Get that follows a
// reply always sees the change.
//
// State machine (see package messages for the statuses):
//
//	running ──Kill ok / Teardown──▶ stopping
//	running | stopping ──Done outcome──────────────────────▶ terminal
//	running | stopping ──Done closed without outcome───────▶ failed  (contract violation)
//	running | stopping ──Cancel error during Teardown──────▶ failed  (cancel threw …)
//	stopping ──SettleTimeout after Teardown────────────────▶ failed  (abandoned …)
//
// The task actor lives until its record is dropped (owner disposed, runtime closed),
// so reads of a terminal task keep working; the registry then poisons it, and its
// Stopped handler calls the producer's Release.
type task struct {
	rt      *Runtime
	self    *actor.PID
	snap    messages.Snapshot
	hooks   messages.Hooks
	starter *actor.PID // answered with StartReply once the registry indexed the task
	output  string     // final output, final-only kinds

	waiters    []*actor.PID // pending WaitTask senders
	teardownBy *actor.PID   // who asked for Teardown; answered TeardownDone at settlement
	tdAnswered bool         // TeardownDone sent
	inFlight   int          // Cancel calls not yet returned; the record is not released before they do
	killsIn    int          // of those, the ones a KillTask made
	abandon    chan struct{}
	settleT    *time.Timer // armed by an accepted Teardown cancel
}

// Self-messages of the task actor.
type (
	outcomeMsg struct {
		outcome messages.Outcome
		ok      bool // false: Done was closed without a value
	}
	cancelResult struct {
		err      error
		teardown bool
		reason   string
		sender   *actor.PID // the KillTask requester
	}
	settleTimeoutMsg struct{}
)

func newTaskProps(rt *Runtime, snap messages.Snapshot, hooks messages.Hooks, starter *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &task{rt: rt, snap: snap, hooks: hooks, starter: starter, abandon: make(chan struct{})}
	}, actor.WithDispatcher(rt.pool))
}

func (t *task) Receive(ctx actor.Context) {
	defer func() {
		// The runtime's own code should never panic here; if it does, the task is
		// recorded failed rather than restarted (a restart would lose the outcome).
		if p := recover(); p != nil {
			t.rt.log.Error("taskrt: task actor panicked", "task", t.snap.ID, "panic", fmt.Sprint(p))
			t.settle(ctx, messages.Outcome{Status: messages.Failed, Detail: fmt.Sprintf("runtime panic: %v", p)})
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t.rt.nActors.Add(1)
		t.self = ctx.Self()
		ctx.Send(t.rt.registry, &messages.TaskSpawned{Snapshot: t.snap, PID: t.self})
		if t.starter != nil {
			ctx.Send(t.starter, &messages.StartReply{ID: t.snap.ID})
			t.starter = nil
		}
		t.watchDone()
	case *outcomeMsg:
		if !m.ok {
			t.rt.log.Error("taskrt: producer contract violation: Done closed without an outcome", "task", t.snap.ID)
			t.settle(ctx, messages.Outcome{Status: messages.Failed, Detail: "producer contract violation: Done closed without an outcome"})
			return
		}
		if !m.outcome.Status.Terminal() {
			t.rt.log.Error("taskrt: producer contract violation: non-terminal outcome", "task", t.snap.ID, "status", m.outcome.Status)
			t.settle(ctx, messages.Outcome{Status: messages.Failed, Detail: fmt.Sprintf("producer contract violation: outcome status %q is not terminal", m.outcome.Status)})
			return
		}
		t.settle(ctx, m.outcome)
	case *messages.ReadTask:
		t.read(ctx)
	case *messages.KillTask:
		if t.snap.Status.Terminal() {
			ctx.Respond(&messages.KillReply{Result: messages.KillAlreadyTerminal})
			return
		}
		t.cancelAsync(&cancelResult{reason: m.Reason, sender: ctx.Sender()})
	case *messages.WaitTask:
		if t.snap.Status.Terminal() {
			t.markReported(ctx)
			ctx.Respond(&messages.WaitReply{Snapshot: t.snap})
			return
		}
		t.waiters = append(t.waiters, ctx.Sender())
	case *messages.AbandonWait:
		for i, w := range t.waiters {
			if w.Equal(m.Waiter) {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				ctx.Send(w, &messages.WaitReply{Snapshot: t.snap, Abandoned: true})
				return
			}
		}
	case *messages.Teardown:
		t.teardownBy = ctx.Sender()
		if t.snap.Status.Terminal() {
			t.answerTeardown(ctx)
			return
		}
		// Teardown marks the task reported: no notice goes to a dying owner.
		t.markReported(ctx)
		t.cancelAsync(&cancelResult{reason: m.Reason, teardown: true})
	case *cancelResult:
		t.cancelled(ctx, m)
	case *settleTimeoutMsg:
		if !t.snap.Status.Terminal() {
			t.rt.nAbandoned.Add(1)
			t.rt.log.Error("taskrt: task did not settle after cancel; abandoned", "task", t.snap.ID, "after", t.rt.cfg.settleTimeout)
			t.settle(ctx, messages.Outcome{Status: messages.Failed,
				Detail: fmt.Sprintf("abandoned: did not settle within %s after cancel", t.rt.cfg.settleTimeout)})
		}
	case *actor.Stopped:
		t.stopped()
	}
}

// watchDone waits for the producer's Done off the mailbox and sends the outcome home.
func (t *task) watchDone() {
	done, abandon, self, rt := t.hooks.Done, t.abandon, t.self, t.rt
	rt.goSafe("done watcher", func() {
		select {
		case o, ok := <-done:
			rt.send(self, &outcomeMsg{outcome: o, ok: ok})
		case <-abandon:
		}
	})
}

// cancelAsync calls the producer's Cancel off the mailbox; the result comes back as
// a cancelResult.
func (t *task) cancelAsync(r *cancelResult) {
	t.inFlight++
	if !r.teardown {
		t.killsIn++
	}
	cancel, self, rt := t.hooks.Cancel, t.self, t.rt
	rt.goSafe("cancel", func() {
		r.err = cancelContained(cancel, r.reason)
		rt.send(self, r)
	})
}

func (t *task) cancelled(ctx actor.Context, r *cancelResult) {
	t.inFlight--
	if !r.teardown {
		t.killsIn--
	}
	defer t.answerTeardown(ctx)
	if r.teardown {
		if t.snap.Status.Terminal() {
			return // settled meanwhile
		}
		if r.err != nil {
			t.rt.log.Error("taskrt: cancel failed during teardown", "task", t.snap.ID, "err", r.err)
			t.settle(ctx, messages.Outcome{Status: messages.Failed,
				Detail: fmt.Sprintf("cancel threw during teardown; work may be orphaned: %v", r.err)})
			return
		}
		t.toStopping(ctx)
		if t.settleT == nil {
			self, rt := t.self, t.rt
			t.settleT = time.AfterFunc(rt.cfg.settleTimeout, func() { rt.send(self, &settleTimeoutMsg{}) })
		}
		return
	}
	if t.snap.Status.Terminal() {
		// The work settled while Cancel ran (a process that dies at once on SIGTERM):
		// the kill was accepted and is what ended it. The settlement was already
		// marked reported because this kill was in flight.
		res := messages.KillRequested
		if r.err != nil {
			res = messages.KillAlreadyTerminal
		}
		ctx.Send(r.sender, &messages.KillReply{Result: res})
		return
	}
	if r.err != nil {
		ctx.Send(r.sender, &messages.KillReply{Err: fmt.Errorf("%w for task %s: %w", messages.ErrCancelFailed, t.snap.ID, r.err)})
		return
	}
	t.snap.Reported = true
	t.toStopping(ctx)
	ctx.Send(r.sender, &messages.KillReply{Result: messages.KillRequested})
}

func (t *task) toStopping(ctx actor.Context) {
	if t.snap.Status == messages.Running {
		t.snap.Status = messages.Stopping
	}
	ctx.Send(t.rt.registry, &messages.TaskChanged{Snapshot: t.snap})
}

func (t *task) markReported(ctx actor.Context) {
	if !t.snap.Reported {
		t.snap.Reported = true
		ctx.Send(t.rt.registry, &messages.TaskChanged{Snapshot: t.snap})
	}
}

func (t *task) read(ctx actor.Context) {
	var out string
	if t.hooks.ReadOutput != nil {
		var err error
		out, err = readContained(t.hooks.ReadOutput)
		if err != nil {
			t.rt.log.Error("taskrt: ReadOutput panicked", "task", t.snap.ID, "err", err)
			ctx.Respond(&messages.ReadReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
			return
		}
	} else if t.snap.Status.Terminal() {
		out = t.output
	}
	if t.snap.Status.Terminal() {
		t.markReported(ctx)
	}
	ctx.Respond(&messages.ReadReply{Result: messages.ReadResult{Output: out, Snapshot: t.snap}})
}

func readContained(read func() string) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("producer panicked: %v", p)
		}
	}()
	return read(), nil
}

// settle records the first terminal outcome and tells everyone who is owed a word:
// the registry (index, cap slot, listeners), the waiters, and a teardown requester.
func (t *task) settle(ctx actor.Context, o messages.Outcome) {
	if t.snap.Status.Terminal() {
		return // the first settled outcome wins
	}
	t.snap.Status = o.Status
	t.snap.Detail = o.Detail
	t.snap.Finished = time.Now()
	if t.hooks.ReadOutput == nil {
		t.output = o.Output
	}
	if len(t.waiters) > 0 || t.killsIn > 0 {
		// A wait pending at settlement returns the terminal state; a kill in flight
		// answers for it: either way the model learns of the end without a notice.
		t.snap.Reported = true
	}
	t.stopWatching()
	ctx.Send(t.rt.registry, &messages.TaskSettled{Snapshot: t.snap})
	for _, w := range t.waiters {
		ctx.Send(w, &messages.WaitReply{Snapshot: t.snap})
	}
	t.waiters = nil
	t.answerTeardown(ctx)
}

// answerTeardown tells the teardown requester the task is done with, once it is
// terminal and no Cancel call is still running: the record (and the producer's
// Release) must not go while producer code still runs for this task.
func (t *task) answerTeardown(ctx actor.Context) {
	if t.teardownBy != nil && !t.tdAnswered && t.snap.Status.Terminal() && t.inFlight == 0 {
		t.tdAnswered = true
		ctx.Send(t.teardownBy, &messages.TeardownDone{ID: t.snap.ID})
	}
}

func (t *task) stopWatching() {
	select {
	case <-t.abandon:
	default:
		close(t.abandon)
	}
	if t.settleT != nil {
		t.settleT.Stop()
	}
}

// stopped runs when the record is dropped: answer any waiter still pending (none can
// be, since records are dropped only after settlement, but a waiter must never hang),
// stop watching Done, and let the producer release what it kept for reads.
func (t *task) stopped() {
	t.rt.nActors.Add(-1)
	for _, w := range t.waiters {
		t.rt.send(w, &messages.WaitReply{Snapshot: t.snap})
	}
	t.waiters = nil
	t.stopWatching()
	if t.hooks.Release != nil {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.rt.log.Error("taskrt: Release panicked", "task", t.snap.ID, "panic", fmt.Sprint(p))
				}
			}()
			t.hooks.Release()
		}()
	}
}
