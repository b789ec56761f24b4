package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// This file is idempotent starts (messages.Spec.Key), as the registry keeps them.
// Each bucket maps the key of every keyed task it holds in full — running,
// stopping, or settled and retained — and of every keyed start in flight to it:
//
//	reserve ──▶ keys[k] = start in flight ──commit──▶ keys[k] = task id ──evicted──▶ (key free)
//	                │                         (dups answered once the task is indexed)
//	                └──abort──▶ (key free; the parked dups preflight again, in order)
//
// A start whose key names a task answers at once with that id (the client returns
// it with ErrDuplicate, and Run is never called); one whose key names a start in
// flight is parked until that start resolves, so that a retry racing the original
// never starts the work twice. Disposal drops the bucket, keys included.

// keyed is what a bucket's key names: a task (id set) or a start in flight (token).
type keyed struct {
	id    messages.TaskID
	token uint64
}

// keyedDup is a start parked behind a start in flight with the same key.
type keyedDup struct {
	m      *reserveStart
	sender *actor.PID
}

// keyedStart looks m's key up in b: a reply naming the task it matches, or parked
// true when it waits behind a start in flight, or neither (the key is free).
func (r *registry) keyedStart(b *bucket, m *reserveStart, sender *actor.PID) (rep *reserveReply, parked bool) {
	k, ok := b.keys[m.key]
	if !ok {
		return nil, false
	}
	var holder *reservation
	switch e, indexed := r.tasks[k.id]; {
	case k.id == "":
		holder = r.starts[k.token]
	case !indexed:
		holder = r.committing[k.id] // committed, its actor not yet indexed
	case e.pid != nil:
		return &reserveReply{dup: k.id}, false
	}
	if holder == nil { // stale: the key's task was evicted or its start is gone
		delete(b.keys, m.key)
		return nil, false
	}
	holder.dups = append(holder.dups, keyedDup{m: m, sender: sender})
	return nil, true
}

// keyReserved records a keyed start in flight.
func (r *registry) keyReserved(b *bucket, key string, token uint64) {
	if key == "" {
		return
	}
	if b.keys == nil {
		b.keys = map[string]keyed{}
	}
	b.keys[key] = keyed{token: token}
}

// keyCommitted points a keyed start's key at the id it was given; its parked
// duplicates are answered once the task is indexed (keyIndexed), so that the id they
// get can be named at once.
func (r *registry) keyCommitted(res *reservation, id messages.TaskID) {
	if res.key == "" {
		return
	}
	res.b.keys[res.key] = keyed{id: id}
	if r.committing == nil {
		r.committing = map[messages.TaskID]*reservation{}
	}
	r.committing[id] = res
}

// keyIndexed answers the duplicates parked behind a keyed start now indexed.
func (r *registry) keyIndexed(ctx actor.Context, e *taskEntry) {
	res, ok := r.committing[e.snap.ID]
	if !ok {
		return
	}
	delete(r.committing, e.snap.ID)
	e.key = res.key
	for _, d := range res.dups {
		ctx.Send(d.sender, &reserveReply{dup: e.snap.ID})
	}
}

// keyAborted frees the key of a keyed start that failed or was abandoned and runs
// the preflight again for the starts parked behind it, in arrival order: the first
// one that passes holds the key, and the others park behind it.
func (r *registry) keyAborted(ctx actor.Context, res *reservation) {
	if res.key == "" {
		return
	}
	if k := res.b.keys[res.key]; k.id == "" {
		delete(res.b.keys, res.key)
	}
	dups := res.dups
	res.dups = nil
	for _, d := range dups {
		if rep := r.reserve(d.m, d.sender); rep != nil {
			ctx.Send(d.sender, rep)
		}
	}
}

// keyEvicted frees the key of a task retention evicted: a tombstone is not a task
// the work can be found in any more, so a start with its key starts afresh.
func (r *registry) keyEvicted(b *bucket, e *taskEntry) {
	if e.key != "" && b.keys[e.key].id == e.snap.ID {
		delete(b.keys, e.key)
	}
}
