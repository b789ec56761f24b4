package actors

import (
	"context"
	"fmt"
	"time"

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
	id, err := rt.nextID(ctx, s.Kind)
	if err != nil {
		tellRegistry(rt.system.Root, rt, &abortStart{token: res.token})
		return "", err
	}
	m, err = rt.commit(newCommit(rt, res.token, h, nil).as(id))
	if err == nil && m.(*startReply).err == nil {
		return m.(*startReply).id, nil
	}
	if err == nil {
		err = m.(*startReply).err
	}
	return "", rt.noActorErr(err) // unlike Start, the work stays the caller's
}

// Restored is what Restore keeps of a task that was a task elsewhere: the frontend
// that homed its owner died, and this runtime takes the owner over.
type Restored struct {
	// ID is the task's id, kept as the model knows it: "<kind>-<n>" of the Spec's
	// kind, not in use in this runtime.
	ID messages.TaskID
	// Started is when the task started (zero: now).
	Started time.Time
	// Reported says the model saw the task's end already (it read, waited on or
	// killed it): the task then gets no completion notice when it settles here.
	Reported bool
}

// Restore makes running or ended work a task again under the id it had: Adopt,
// with the id, start time and Reported flag of r instead of new ones. It is how a
// runtime takes over an owner whose tasks ran under another runtime (WithIDs keeps
// the ids of the runtimes apart). h may deliver its outcome at once (work that
// ended meanwhile): the task then settles right after it is recorded, and its
// completion notice goes out unless r.Reported.
//
// Every check of Adopt applies, and r.ID must be an id of s.Kind that this runtime
// has no task or tombstone of (ErrInvalidSpec otherwise). On any error nothing is
// recorded and the work stays the caller's. The runtime's own numbering never
// gives r.ID's number of the kind afterwards.
func (t *Tasks) Restore(ctx context.Context, s messages.Spec, r Restored, h messages.Hooks) error {
	rt := t.rt
	if rt.closed.Load() {
		return rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	if h.Done == nil || h.Cancel == nil {
		return fmt.Errorf("%w: restored hooks without Done or Cancel", messages.ErrInvalidSpec)
	}
	if _, ok := idNumber(r.ID, s.Kind); !ok {
		return fmt.Errorf("%w: %q is not an id of kind %q", messages.ErrInvalidSpec, r.ID, s.Kind)
	}
	m, err := rt.callUntilReply(&reserveStart{reservation: reservation{kind: s.Kind, label: s.Label, owner: s.Owner}, noQueue: true})
	if err != nil {
		return rt.noActorErr(err)
	}
	res := m.(*reserveReply)
	if res.err != nil {
		return res.err
	}
	c := newCommit(rt, res.token, h, nil).as(r.ID)
	c.started, c.reported = r.Started, r.Reported
	m, err = rt.commit(c)
	if err == nil {
		err = m.(*startReply).err
	}
	return rt.noActorErr(err)
}
