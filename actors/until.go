package actors

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// ReadUntil reads a stream task's output up to a pattern (RE2 syntax). It returns as
// soon as the task's unread output contains a match — consuming through the end of
// the line that matched; what follows stays for the next read — or when the task
// settles or timeout passes, consuming everything new; Reason says which, and Match
// holds the matched text. Matching runs on the task's actor, over the output the
// producer holds in memory (a bounded window), never on the registry. A task without
// an output stream (a final-output kind, or a producer without Hooks.Output) fails
// with ErrNoOutputStream; a pattern that does not compile with ErrInvalidArgument.
// A result that shows the terminal snapshot marks the task reported. Cancelling ctx
// ends only the wait, consuming nothing.
func (t *Tasks) ReadUntil(ctx context.Context, id messages.TaskID, caller messages.AgentID, pattern string, timeout time.Duration) (messages.UntilResult, error) {
	rt := t.rt
	if timeout <= 0 {
		return messages.UntilResult{}, invalidWaitTimeout(timeout)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return messages.UntilResult{}, fmt.Errorf("%w: pattern: %v", messages.ErrInvalidArgument, err)
	}
	m, abandoned, err := rt.abandonable(ctx, &messages.ReadUntil{ID: id, Caller: caller, Pattern: pattern, Timeout: timeout},
		func(w *actor.PID) registryMsg { return &abandonWait{id: id, caller: caller, waiter: w} })
	if err != nil {
		return messages.UntilResult{}, err
	}
	rep, ok := m.(*messages.ReadUntilReply)
	if !ok {
		return messages.UntilResult{}, notFound(id)
	}
	if abandoned && rep.Err == nil && rep.Result.Reason == "" {
		return rep.Result, ctx.Err()
	}
	return rep.Result, rep.Err
}

// untilWaiter is one pending ReadUntil.
type untilWaiter struct {
	n     uint64
	pid   *actor.PID
	re    *regexp.Regexp
	timer *time.Timer
}

func (t *task) readUntil(ctx actor.Context, m *messages.ReadUntil) {
	reply := func(err error) { ctx.Respond(&messages.ReadUntilReply{Err: err}) }
	if t.stream() == nil {
		reply(fmt.Errorf("%w: %s (%s) gives no output to match", messages.ErrNoOutputStream, t.snap.ID, t.snap.Kind))
		return
	}
	if m.Timeout <= 0 {
		reply(invalidWaitTimeout(m.Timeout))
		return
	}
	re, err := regexp.Compile(m.Pattern)
	if err != nil {
		reply(fmt.Errorf("%w: pattern: %v", messages.ErrInvalidArgument, err))
		return
	}
	t.nextWaiter++
	n, self, rt := t.nextWaiter, t.self, t.rt
	t.listening.Store(true) // before the first match: a write after it wakes the task
	pr := t.pendingOf()
	pr.untils = append(pr.untils, &untilWaiter{n: n, pid: ctx.Sender(), re: re,
		timer: time.AfterFunc(m.Timeout, func() { tellTask(rt.system.Root, self, &untilTimeout{n: n}) })})
	t.matchUntils(ctx)
	if t.phase == phaseSettled {
		t.endUntils(ctx, messages.UntilEnded)
	}
	if t.snap.OutputFull {
		t.endUntilsAtFull(ctx)
	}
}

// matchUntils answers the pending ReadUntil requests whose pattern now matches, in
// order; each match consumes the output through its line, so the scan restarts.
func (t *task) matchUntils(ctx actor.Context) {
	pr := t.pending
	if pr == nil {
		return
	}
	matched := false
	for i := 0; i < len(pr.untils); {
		w := pr.untils[i]
		var out, match string
		var ok bool
		err := contain.Call("read output", func() error {
			out, match, ok = t.stream().ReadMatch(w.re)
			return nil
		})
		if err == nil && !ok {
			i++
			continue
		}
		pr.untils = append(pr.untils[:i], pr.untils[i+1:]...)
		w.timer.Stop()
		if err != nil {
			ctx.Send(w.pid, &messages.ReadUntilReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
			continue
		}
		if t.phase == phaseSettled {
			t.report(ctx)
		}
		ctx.Send(w.pid, &messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Output: out, Snapshot: t.snap}, Reason: messages.UntilMatched, Match: match}})
		i = 0 // the match consumed output: look again from the first
		matched = true
	}
	if matched {
		t.checkFull(ctx) // the match may have made room
	}
}

// endUntil answers one pending ReadUntil without a match: at its deadline (consuming
// what is new, so the model sees why nothing matched) or because its requester gave
// up (consuming nothing).
func (t *task) endUntil(ctx actor.Context, match func(*untilWaiter) bool, timedOut bool) {
	pr := t.pending
	if pr == nil {
		return
	}
	for i, w := range pr.untils {
		if !match(w) {
			continue
		}
		w.timer.Stop()
		pr.untils = append(pr.untils[:i], pr.untils[i+1:]...)
		r := messages.UntilResult{ReadResult: messages.ReadResult{Snapshot: t.snap}}
		if timedOut {
			r.Reason = messages.UntilTimedOut
			out, err := t.consume()
			if err != nil {
				ctx.Send(w.pid, &messages.ReadUntilReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
				return
			}
			r.Output = out
		}
		ctx.Send(w.pid, &messages.ReadUntilReply{Result: r})
		if timedOut {
			t.checkFull(ctx) // the read may have made room
		}
		return
	}
}

// endUntils answers every pending ReadUntil at settlement: the first gets the rest
// of the output (after a last look for a match), and each sees the terminal
// snapshot, so the task is reported.
func (t *task) endUntils(ctx actor.Context, reason messages.UntilReason) {
	pr := t.pending
	if pr == nil || len(pr.untils) == 0 {
		return
	}
	t.matchUntils(ctx)
	for _, w := range pr.untils {
		w.timer.Stop()
		out, err := t.consume()
		if err != nil {
			ctx.Send(w.pid, &messages.ReadUntilReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
			continue
		}
		t.report(ctx)
		ctx.Send(w.pid, &messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Output: out, Snapshot: t.snap}, Reason: reason}})
	}
	pr.untils = nil
}

// readUntil is the registry's part of a ReadUntil: the timeout and the owner
// fence checked, a tombstone answered as ended (no output; reported), a live task
// left to match.
func (r *registry) readUntil(ctx actor.Context, m *messages.ReadUntil) {
	if m.Timeout <= 0 {
		ctx.Respond(&messages.ReadUntilReply{Err: invalidWaitTimeout(m.Timeout)})
		return
	}
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.ReadUntilReply{Err: notFound(m.ID)})
	case e.tombstone():
		e.report()
		ctx.Respond(&messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Snapshot: e.snap}, Reason: messages.UntilEnded}})
	default:
		ctx.Forward(e.pid)
	}
}

// untilsAtStop answers the ReadUntils still pending when the actor stops: the
// task ended for them.
func (t *task) untilsAtStop() {
	pr := t.pending
	if pr == nil {
		return
	}
	for _, w := range pr.untils {
		w.timer.Stop()
		t.rt.send(w.pid, &messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Snapshot: t.snap}, Reason: messages.UntilEnded}})
	}
	pr.untils = nil
}
