package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/messages"
)

// This file is retention (see the package doc): the buckets that hold each owner's
// records, the settled records kept in full, the tombstones, and dropping records.

// bucket is one owner's share (or the unowned tasks'): its slot count, its records
// in start order, and the two retention queues.
type bucket struct {
	live   int // running + stopping + reserved (a slot each)
	queued int // queued tasks and queued reservations (a queue place each; queue.go)
	// waiting holds the queued tasks, first queued first (queue.go).
	waiting []messages.TaskID
	pending int // reservations not yet committed and indexed
	// ids holds every record and tombstone in start order. A forgotten tombstone's id
	// stays until the slice is compacted (when more than half of it is forgotten), so
	// forgetting costs O(1) amortized.
	ids       []messages.TaskID
	forgotten int
	retained  ring[*taskEntry]      // settled tasks with full records, oldest settled first
	tombs     ring[messages.TaskID] // tombstones, oldest evicted first
	// keys maps the Spec.Key of each live or retained task, and of each keyed start
	// in flight, to it (keys.go). Nil until the first keyed start.
	keys map[string]keyed
}

// ring is a FIFO in a ring buffer: a bounded one (retention's) allocates only while
// it grows to its bound, where a slice popped from the front would be reallocated
// every so many pushes. A popped slot is cleared.
type ring[T any] struct {
	items []T
	head  int // index of the oldest
	n     int // items held
}

func (q *ring[T]) push(v T) {
	if q.n == len(q.items) {
		items := make([]T, max(8, 2*q.n))
		k := copy(items, q.items[q.head:])
		copy(items[k:], q.items[:q.head])
		q.items, q.head = items, 0
	}
	q.items[(q.head+q.n)%len(q.items)] = v
	q.n++
}

func (q *ring[T]) len() int { return q.n }

func (q *ring[T]) pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head = (q.head + 1) % len(q.items)
	q.n--
	return v
}

// stopping counts a bucket's stopping tasks (for the cap error only).
func (r *registry) stopping(b *bucket) int {
	n := 0
	for _, id := range b.ids {
		if e, ok := r.tasks[id]; ok && e.snap.Status == messages.Stopping {
			n++
		}
	}
	return n
}

// bucketOf is the bucket of an owner ("" = the unowned tasks), nil once it is gone.
func (r *registry) bucketOf(owner messages.AgentID) *bucket {
	if owner == "" {
		return &r.unowned
	}
	if a, ok := r.agents[owner]; ok {
		return &a.bucket
	}
	return nil
}

// evict turns the oldest retained record of a bucket into a tombstone (retention
// rule): the route goes first, then the task actor is stopped as a PoisonPill stops
// it (kernel.Stop, which batches the stops of many evictions) — every request routed
// to it before is answered; its Stopped handler runs the producer's Release. Past the
// tombstone bound, the oldest tombstone is forgotten.
//
// e is from the bucket's retained queue: its record is in r.tasks (records are
// dropped only with their whole bucket, whose queues go with it).
func (r *registry) evict(ctx actor.Context, b *bucket, e *taskEntry) {
	if e.pid == nil {
		return
	}
	id := e.snap.ID
	if e.box != nil {
		var parent *kernel.Mailbox // the agent actor's, told Terminated by the stop
		if a, ok := r.agents[e.snap.Owner]; ok {
			parent = a.box
		}
		r.rt.kernel.Stop(e.box, parent)
	} else {
		ctx.Poison(e.pid)
	}
	e.pid, e.box = nil, nil
	e.snap.Evicted = true
	r.keyEvicted(b, e)
	r.publish(messages.Event{Kind: messages.EventTaskEvicted, Agent: e.snap.Owner, Task: e.snap})
	r.rt.metrics.evicted.Add(bg, 1)
	r.rt.nRecords.Add(-1)
	r.rt.nRetained.Add(-1)
	r.rt.nTombstones.Add(1)
	b.tombs.push(id)
	for b.tombs.len() > r.rt.cfg.tombstones {
		r.forget(b, b.tombs.pop())
	}
}

// forget drops a tombstone: from now on its id reads as not found.
func (r *registry) forget(b *bucket, id messages.TaskID) {
	if _, ok := r.tasks[id]; !ok {
		return
	}
	delete(r.tasks, id)
	r.rt.nTombstones.Add(-1)
	b.forgotten++
	if b.forgotten*2 > len(b.ids) {
		kept := make([]messages.TaskID, 0, len(b.ids)-b.forgotten)
		for _, id := range b.ids {
			if _, ok := r.tasks[id]; ok {
				kept = append(kept, id)
			}
		}
		b.ids, b.forgotten = kept, 0
	}
}

// dropRecord removes a record or tombstone for good (owner disposed, runtime closed)
// and poisons its actor if it has one.
func (r *registry) dropRecord(ctx actor.Context, id messages.TaskID, e *taskEntry) {
	delete(r.tasks, id)
	r.releaseClaims(ctx, e)
	switch {
	case e.pid == nil:
		r.rt.nTombstones.Add(-1)
		return
	case e.snap.Status.Terminal():
		r.rt.nRetained.Add(-1)
	default:
		r.rt.nRunning.Add(-1) // only after a fault; keep the count honest
		if e.snap.Status == messages.Queued {
			r.rt.metrics.queueLeft(e.snap.Kind)
		}
	}
	r.rt.nRecords.Add(-1)
	ctx.Poison(e.pid)
}
