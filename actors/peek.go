package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// Peek is an observer read: up to maxBytes raw bytes of a stream task's output from byte
// offset off on, without moving the consuming cursor the model reads with — a UI can
// tail a task without stealing its output. The result says where the next read
// starts and how many bytes from off on are no longer held (outside the head and
// tail the producer keeps, or dropped). maxBytes <= 0 means 64 KiB; at most 1 MiB is
// returned. Tasks without an output stream fail with ErrNoOutputStream; a tombstone
// returns no bytes and its snapshot. The owner fence applies as to every call.
func (t *Tasks) Peek(ctx context.Context, id messages.TaskID, caller messages.AgentID, off int64, maxBytes int) (messages.PeekResult, error) {
	m, err := t.rt.ask(ctx, &messages.PeekTask{ID: id, Caller: caller, Offset: off, Max: maxBytes})
	if err != nil {
		return messages.PeekResult{}, taskErr(id, err)
	}
	r := m.(*messages.PeekReply)
	return r.Result, r.Err
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
	err := contain.Call("peek output", func() error {
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

// peek is the registry's part of an observer read: the owner fence, then a
// tombstone's answer (no bytes, its snapshot; an observer read reports nothing),
// or the task's.
func (r *registry) peek(ctx actor.Context, m *messages.PeekTask) {
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.PeekReply{Err: notFound(m.ID)})
	case e.tombstone():
		ctx.Respond(&messages.PeekReply{Result: messages.PeekResult{Next: max(m.Offset, 0), Snapshot: e.snap}})
	default:
		ctx.Forward(e.pid)
	}
}
