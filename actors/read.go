package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// Read returns a stream task's output since the previous read (one consuming cursor
// per task), or a final-output task's output once it is terminal ("" before), with
// the snapshot. A read that returns a terminal snapshot marks the task reported.
func (t *Tasks) Read(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.ReadResult, error) {
	m, err := t.rt.ask(ctx, &messages.ReadTask{ID: id, Caller: caller})
	if err != nil {
		return messages.ReadResult{}, taskErr(id, err)
	}
	r := m.(*messages.ReadReply)
	return r.Result, r.Err
}

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
	t.checkFull(ctx) // the read may have made room
	ctx.Respond(&messages.ReadReply{Result: messages.ReadResult{Output: out, Snapshot: t.snap}})
}

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
	return contain.Value("read output", func() (string, error) {
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

// read is the registry's part of a read: the owner fence, then a tombstone's
// answer (no output: it was dropped with the record; the read shows the model the
// task's end, so it is reported), or the task's to answer.
func (r *registry) read(ctx actor.Context, m *messages.ReadTask) {
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.ReadReply{Err: notFound(m.ID)})
	case e.tombstone():
		e.report()
		ctx.Respond(&messages.ReadReply{Result: messages.ReadResult{Snapshot: e.snap}})
	default:
		ctx.Forward(e.pid)
	}
}
