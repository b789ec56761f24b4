package actors

import (
	"fmt"
	"regexp"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

func (t *task) read(ctx actor.Context) {
	if !t.rt.alive(ctx.Sender()) {
		return // nobody would receive a consuming read's delta: do not consume it
	}
	out, err := t.consume()
	if err != nil {
		t.rt.log.Error("taskrt: reading the output panicked", "task", t.snap.ID, "err", err)
		ctx.Respond(&messages.ReadReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
		return
	}
	if t.phase == phaseSettled {
		t.report(ctx)
	}
	ctx.Respond(&messages.ReadReply{Result: messages.ReadResult{Output: out, Snapshot: t.snap}})
}

// This file is a task's output as the model and observers read it: consuming reads,
// reads up to a pattern (ReadUntil), observer reads (Peek), and the growth
// notifications of the producer's output stream.

// streams reports whether the task is a stream kind (consuming delta reads).
func (t *task) streams() bool { return t.hooks.Output != nil || t.hooks.ReadOutput != nil }

// stream is the output stream that reads up to a pattern, observer reads and output
// events use: a stream kind's Output, or a final-output kind's Progress.
func (t *task) stream() messages.Output {
	if t.hooks.Output != nil {
		return t.hooks.Output
	}
	if !t.streams() {
		return t.hooks.Progress
	}
	return nil
}

// consume is a read of the task's output: a consuming Output.Read or ReadOutput for a
// stream kind, a consuming Progress.Read for a running final-output kind with
// progress, and a settled final-output kind's answer (idempotent).
func (t *task) consume() (string, error) {
	return messages.ContainValue("read output", func() (string, error) {
		switch {
		case t.hooks.Output != nil:
			return t.hooks.Output.Read(), nil
		case t.hooks.ReadOutput != nil:
			return t.hooks.ReadOutput(), nil
		case t.hooks.Progress != nil && t.phase != phaseSettled:
			return t.hooks.Progress.Read(), nil
		case t.phase == phaseSettled:
			return t.output, nil // a final-output kind's answer, idempotently
		}
		return "", nil
	})
}

// untilWaiter is one pending ReadUntil.
type untilWaiter struct {
	n     uint64
	pid   *actor.PID
	re    *regexp.Regexp
	timer *time.Timer
}

// announceOutput tells the registry that the task's output grew, for the event
// stream (only while someone subscribes).
func (t *task) announceOutput(ctx actor.Context) {
	if t.rt.nSubscribers.Load() == 0 {
		return
	}
	if n, err := messages.ContainValue("output", func() (int64, error) { return t.stream().Written(), nil }); err == nil {
		t.toRegistry(ctx, &taskOutput{snap: t.snap, bytes: n})
	}
}

// watchOutput asks the producer's output stream to tell the task when it grows.
func (t *task) watchOutput() {
	out := t.stream()
	if out == nil {
		return
	}
	self, rt, grew, listening := t.self, t.rt, &t.grew, &t.listening
	// Growth matters only to a pending ReadUntil and to event subscribers: without
	// either, a write costs the writer two atomic loads and sends nothing (a flood
	// would otherwise wake the actor once per chunk for nothing).
	err := messages.Contain("output", func() error {
		out.OnGrow(func() {
			if (listening.Load() || rt.nSubscribers.Load() > 0) && grew.CompareAndSwap(false, true) {
				tellTask(rt.system.Root, self, &outputGrew{})
			}
		})
		return nil
	})
	if err != nil {
		t.rt.log.Error("taskrt: Output.OnGrow panicked", "task", t.snap.ID, "err", err)
		return
	}
	// Output written between Run and now raised no callback: account for it.
	if n, err := messages.ContainValue("output", func() (int64, error) { return out.Written(), nil }); err == nil && n > 0 {
		if rt.nSubscribers.Load() > 0 && grew.CompareAndSwap(false, true) {
			tellTask(rt.system.Root, self, &outputGrew{})
		}
	}
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
}

// matchUntils answers the pending ReadUntil requests whose pattern now matches, in
// order; each match consumes the output through its line, so the scan restarts.
func (t *task) matchUntils(ctx actor.Context) {
	pr := t.pending
	if pr == nil {
		return
	}
	for i := 0; i < len(pr.untils); {
		w := pr.untils[i]
		var out, match string
		var ok bool
		err := messages.Contain("read output", func() error {
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

// Bounds of one observer read.
const (
	defaultPeek = 64 << 10
	maxPeek     = 1 << 20
)

func (t *task) peek(ctx actor.Context, m *messages.PeekTask) {
	if t.stream() == nil {
		ctx.Respond(&messages.PeekReply{Err: fmt.Errorf("%w: %s (%s) gives no output to observe", messages.ErrNoOutputStream, t.snap.ID, t.snap.Kind)})
		return
	}
	n := m.Max
	if n <= 0 {
		n = defaultPeek
	}
	r := messages.PeekResult{Snapshot: t.snap}
	err := messages.Contain("peek output", func() error {
		r.Data, r.Next, r.Missed = t.stream().Peek(m.Offset, min(n, maxPeek))
		r.Written = t.stream().Written()
		return nil
	})
	if err != nil {
		ctx.Respond(&messages.PeekReply{Err: fmt.Errorf("peek output of task %s: %w", t.snap.ID, err)})
		return
	}
	ctx.Respond(&messages.PeekReply{Result: r})
}
