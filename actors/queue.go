package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file is the queue at the cap (WithQueue) and the budget across owners
// (WithGlobalLimit).
//
// A start that finds its owner at its cap, or the runtime at its global limit, is
// refused — or, with a queue and room in it, queued: it gets its id at once, with
// status queued, and its Spec.Run is not called yet. A queued task is a task like any
// other — listed, gettable, waitable, killable (a kill settles it killed without
// running anything), torn down with its owner — whose actor waits in phaseQueued. When
// a slot frees (a task settles, a start aborts), the registry hands it to the next
// queued task, taking owners in turn (round robin, in the order they first queued;
// within an owner, first queued first): one busy owner cannot starve the others.
// The task actor then calls Run off its mailbox and runs as if just started.
//
//	Start at the cap ──queue room──▶ queued ──slot (round robin)──▶ running … (as any task)
//	                                   │ kill, teardown                │ Run failed
//	                                   ▼                               ▼
//	                      killed "never started: …"        failed "start failed: …"
//
// The registry's counts: a bucket's live counts running, stopping and reserved
// starts (its share of the owner cap and of the global limit, r.globalLive); queued
// counts its queued tasks and queued reservations (its share of the queue); waiting
// holds its queued tasks in order.

// WithQueue lets up to n starts per owner (and for the unowned tasks) wait beyond the
// owner's cap or the global limit, with status queued, instead of failing: each gets
// its id at once and starts when a slot frees, owners taking turns. Past n, Start
// fails with a *messages.LimitError naming the queue. Default: no queue; n <= 0
// keeps it.
func WithQueue(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.queue = n
		}
	})
}

// WithGlobalLimit caps the running (and stopping) tasks across every owner, unowned
// tasks included, at n; slots are handed out fairly between owners (round robin) to
// queued starts (WithQueue), and without a queue a start over the limit fails with a
// *messages.LimitError with Global set. Each owner's own cap (WithOwnerLimit) still
// holds. Default: no global limit; n <= 0 keeps it.
func WithGlobalLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.globalLimit = n
		}
	})
}

// QueuePosition reports where a queued task stands in its owner's queue: position
// pos (1 = next of this owner's to start) of total queued. For a task that is not
// queued (any more) it returns 0, 0. The owner fence applies as to every call.
func (t *Tasks) QueuePosition(ctx context.Context, id messages.TaskID, caller messages.AgentID) (pos, total int, err error) {
	m, err := t.rt.call(ctx, &queuePosition{id: id, caller: caller})
	if err != nil {
		return 0, 0, t.rt.noActorErr(err)
	}
	r := m.(*queuePositionReply)
	return r.pos, r.total, r.err
}

// ---- registry ----

// fairness is the registry's round robin over owners with queued tasks.
type fairness struct {
	ring    []messages.AgentID // owners in the order they first queued ("" = unowned)
	inRing  map[messages.AgentID]bool
	last    messages.AgentID // the owner served last (a direct start counts)
	hasLast bool
}

// overCap says whether a start for b must wait (or fail): the owner's cap or the
// global limit is reached. err is the error to fail with when it cannot queue.
func (r *registry) overCap(b *bucket) (over bool, err *messages.LimitError) {
	if limit := r.rt.cfg.ownerLimit; limit > 0 && b.live >= limit {
		return true, &messages.LimitError{Limit: limit, Stopping: r.stopping(b)}
	}
	if g := r.rt.cfg.globalLimit; g > 0 && r.globalLive >= g {
		return true, &messages.LimitError{Limit: g, Global: true}
	}
	return false, nil
}

// admit takes a slot or a queue place for a start of owner in b, or returns the
// error to fail with.
func (r *registry) admit(owner messages.AgentID, b *bucket, noQueue bool) (queued bool, err error) {
	over, lerr := r.overCap(b)
	switch {
	case !over:
		b.live++
		r.globalLive++
		r.served(owner)
		return false, nil
	case r.rt.cfg.queue == 0 || noQueue:
		return false, lerr
	case b.queued >= r.rt.cfg.queue:
		lerr.Queue = r.rt.cfg.queue
		return false, lerr
	}
	b.queued++
	return true, nil
}

// unreserve gives back what a reservation held (its start aborted or was
// abandoned), and hands a freed slot on.
func (r *registry) unreserve(ctx actor.Context, res *reservation) {
	if res.queued {
		res.b.queued--
		return
	}
	res.b.live--
	r.globalLive--
	r.dispatch(ctx)
}

// queuedIndexed puts a queued task, now indexed, in its owner's line, and the owner
// in the round robin.
func (r *registry) queuedIndexed(ctx actor.Context, owner messages.AgentID, b *bucket, id messages.TaskID) {
	b.waiting = append(b.waiting, id)
	if r.fair.inRing == nil {
		r.fair.inRing = map[messages.AgentID]bool{}
	}
	if !r.fair.inRing[owner] {
		r.fair.inRing[owner] = true
		r.fair.ring = append(r.fair.ring, owner)
	}
	r.dispatch(ctx)
}

// slotFreed accounts for a settled task: a queued one gives back its queue place, a
// running one its slot, which goes to the next queued task.
func (r *registry) slotFreed(ctx actor.Context, b *bucket, m *taskSettled) {
	if m.queued {
		b.queued--
		for i, id := range b.waiting {
			if id == m.id {
				b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
				break
			}
		}
		return
	}
	b.live--
	r.globalLive--
	r.dispatch(ctx)
}

// served records that owner got a slot (a direct start counts), for the round robin.
func (r *registry) served(owner messages.AgentID) {
	r.fair.last, r.fair.hasLast = owner, true
}

// dispatch hands free slots to queued tasks, owners in turn.
func (r *registry) dispatch(ctx actor.Context) {
	for r.phase == runtimeOpen && len(r.fair.ring) > 0 {
		if g := r.rt.cfg.globalLimit; g > 0 && r.globalLive >= g {
			return
		}
		owner, b := r.nextQueued()
		if b == nil {
			return
		}
		id := b.waiting[0]
		b.waiting = b.waiting[1:]
		b.queued--
		b.live++
		r.globalLive++
		if e, ok := r.tasks[id]; ok && e.pid != nil {
			tellTask(ctx, e.pid, &runQueued{})
		}
		r.served(owner)
	}
}

// nextQueued is the owner after the last one served, in ring order, that has a
// queued task and room under its own cap (and is not being disposed).
func (r *registry) nextQueued() (messages.AgentID, *bucket) {
	n := len(r.fair.ring)
	from := -1 // the owner served last, if it is in the ring: the turn goes on after it
	for i, o := range r.fair.ring {
		if r.fair.hasLast && o == r.fair.last {
			from = i
		}
	}
	for step := 1; step <= n; step++ {
		owner := r.fair.ring[(from+step)%n]
		b := r.bucketOf(owner)
		if b == nil || len(b.waiting) == 0 {
			continue
		}
		if a, ok := r.agents[owner]; owner != "" && (!ok || a.phase != agentOpen) {
			continue
		}
		if limit := r.rt.cfg.ownerLimit; limit > 0 && b.live >= limit {
			continue
		}
		return owner, b
	}
	return "", nil
}

// forgetOwner drops a disposed owner from the round robin.
func (r *registry) forgetOwner(owner messages.AgentID) {
	for i, o := range r.fair.ring {
		if o == owner {
			r.fair.ring = append(r.fair.ring[:i], r.fair.ring[i+1:]...)
			delete(r.fair.inRing, owner)
			return
		}
	}
}

func (r *registry) queuePosition(ctx actor.Context, m *queuePosition) {
	e, ok := r.tasks[m.id]
	if !ok || !r.visible(e.snap.Owner, m.caller) {
		ctx.Respond(&queuePositionReply{err: notFound(m.id)})
		return
	}
	rep := &queuePositionReply{}
	if b := r.bucketOf(e.snap.Owner); b != nil {
		for i, id := range b.waiting {
			if id == m.id {
				rep.pos, rep.total = i+1, len(b.waiting)
			}
		}
	}
	ctx.Respond(rep)
}

// ---- task actor ----

// queuedStart is a queued task's start, on its actor: Run, called once the registry
// hands it a slot, and what arrived while Run ran.
type queuedStart struct {
	run        func() (messages.Hooks, error)
	dispatched bool // the registry handed it a slot: it holds one from now on
	starting   bool // Run is running
	kills      []pendingKill
	teardown   string // a teardown's reason that arrived while Run ran
}

type pendingKill struct {
	sender *actor.PID
	reason string
}

// runQueued: the registry handed the queued task a slot. Its Run is called off
// the mailbox; what it returns comes home as queuedRan.
func (t *task) runQueued() {
	q := t.queue
	q.dispatched, q.starting = true, true
	run, self, rt := q.run, t.self, t.rt
	rt.goSafe("queued start", func() {
		h, err := contain.Value("run", run)
		if err == nil && (h.Done == nil || h.Cancel == nil) {
			if h.Cancel != nil {
				_ = contain.Call("cancel", func() error { return h.Cancel("invalid hooks") })
			}
			err = fmt.Errorf("%w: Run returned hooks without Done or Cancel", messages.ErrInvalidSpec)
		}
		tellTask(rt.system.Root, self, &queuedRan{hooks: h, err: err})
	})
}

// queuedRan: the queued task's Run returned. It fails the task, or makes it a running
// task — and then handles the kills and the teardown that came meanwhile.
func (t *task) queuedRan(ctx actor.Context, m *queuedRan) {
	q := t.queue
	q.starting = false
	if m.err != nil {
		t.rt.log.Warn("taskrt: a queued task's start failed", "task", t.snap.ID, "err", m.err)
		if q.teardown != "" || len(q.kills) > 0 {
			t.markReported() // carried by the settlement
		}
		t.transition(ctx, queuedStartFailed, messages.Outcome{Status: messages.Failed, Detail: "start failed: " + oneLineErr(m.err)})
		t.queuedKills(ctx, false)
		return
	}
	t.hooks = m.hooks
	t.snap.Ref = m.hooks.Ref
	t.transition(ctx, queuedStarted, messages.Outcome{})
	t.followOutput()
	t.selectDone(ctx)
	t.queuedKills(ctx, true)
	if q.teardown != "" {
		t.beginTeardown(ctx, q.teardown)
	}
}

func oneLineErr(err error) string {
	s := err.Error()
	for i, c := range s {
		if c == '\n' || c == '\r' {
			return s[:i]
		}
	}
	return s
}
