package actors

import (
	"context"
	"fmt"

	"github.com/taskrt/taskrt/messages"
)

// Adopt makes work that is already running a task: the producer-neutral way to move
// a foreground command to the background when it runs long (package tools' bash
// background_after_ms). h are the running work's hooks, as Spec.Run would have
// returned them; s.Run is not used.
//
// Adopt runs Start's preflight — a control surface is attached, the runtime is
// open, the kind and label are valid, the owner is registered, not disposing and
// under its cap, s.Key is new — then commits, which allocates the id: the id exists
// only once the work is a task. When anything fails before the commit — a
// preflight check, ctx already done, a teardown that gave up on the start — nothing
// is recorded, no id is burned, and the work is untouched: the caller still owns
// it (keep waiting for it in the foreground, or cancel it). A Key that names a task
// already there returns that task's id with ErrDuplicate, the work untouched too.
//
// From the commit on the task is like any other: reads start at the first byte of
// h's output stream (everything the work printed before is readable), Done's outcome
// settles it, and the owner's disposal cancels it. The caller must stop using h
// then, apart from reading its own copy of the output with observer reads.
func (t *Tasks) Adopt(ctx context.Context, s messages.Spec, h messages.Hooks) (messages.TaskID, error) {
	rt := t.rt
	if rt.closed.Load() {
		return "", rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	if h.Done == nil || h.Cancel == nil {
		return "", fmt.Errorf("%w: adopted hooks without Done or Cancel", messages.ErrInvalidSpec)
	}
	if len(s.Key) > messages.MaxKey {
		return "", fmt.Errorf("%w: key of %d bytes is over the bound of %d", messages.ErrInvalidSpec, len(s.Key), messages.MaxKey)
	}
	m, err := rt.callUntilReply(&reserveStart{reservation: reservation{kind: s.Kind, label: s.Label, owner: s.Owner, key: s.Key}, noQueue: true})
	if err != nil {
		return "", rt.noActorErr(err)
	}
	res := m.(*reserveReply)
	switch {
	case res.err != nil:
		return "", res.err
	case res.dup != "":
		return res.dup, fmt.Errorf("%w: key %q is task %s", messages.ErrDuplicate, s.Key, res.dup)
	}
	if err := ctx.Err(); err != nil {
		tellRegistry(rt.system.Root, rt, &abortStart{token: res.token})
		return "", fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	m, err = rt.commit(newCommit(rt, res.token, h, nil))
	if err == nil && m.(*startReply).err == nil {
		return m.(*startReply).id, nil
	}
	if err == nil {
		err = m.(*startReply).err
	}
	return "", rt.noActorErr(err) // unlike Start, the work stays the caller's
}
