package remote

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
)

// This file is the worker's half of scope-owned commands (WithScopes on the owner
// node): orphans, adoption and release.

// ownState is who may act on a scope-owned task on the worker.
type ownState int

const (
	owned    ownState = iota // its owner node's lease is live (as far as this worker knows)
	orphaned                 // its owner node's lease ended: kept running, reporting nothing, until adopted or the grace expires
	awaiting                 // an adoption moved it: the new owner's first grant ends the hold; none within the grace drops it
)

// minOrphanGrace is the least default orphan grace (WithOrphanGrace).
const minOrphanGrace = 2 * time.Second

// graceFor is how long a scope-owned task of owner waits for an adoption (or an
// adopter's confirmation) before it is dropped.
func (w *Worker) graceFor(owner string) time.Duration {
	if w.cfg.orphan > 0 {
		return w.cfg.orphan
	}
	return max(w.watch.duration(ownerKey(owner)), minOrphanGrace)
}

// orphanLocked holds a scope-owned task whose owner node's lease ended: it keeps
// running, sends nothing, and is dropped (killed, forgotten) unless an adoption
// comes within the grace. w.mu must be held.
func (t *wtask) orphanLocked() {
	if t.state == orphaned {
		return
	}
	t.state = orphaned
	t.setTimerLocked(t.w.graceFor(t.owner))
	t.flow.mu.Lock()
	t.flow.hold = true
	t.flow.mu.Unlock()
	t.w.cfg.logger.Info("remote: scope-owned command orphaned", "worker", t.w.name, "task", t.key, "scope", t.scope, "owner", t.owner)
}

// setTimerLocked (re)starts the timer that drops the task after d. w.mu must be held.
func (t *wtask) setTimerLocked(d time.Duration) {
	t.stopTimerLocked()
	gen := t.timerGen
	t.timer = time.AfterFunc(d, func() { t.expire(gen) })
}

// stopTimerLocked stops the orphan timer, if any. w.mu must be held.
func (t *wtask) stopTimerLocked() {
	t.timerGen++
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// expire drops an orphan that nobody adopted (or a moved task its adopter never
// confirmed): the command is killed and nothing is reported.
func (t *wtask) expire(gen uint64) {
	w := t.w
	w.mu.Lock()
	if gen != t.timerGen || t.state == owned || w.closing {
		w.mu.Unlock()
		return
	}
	t.timer = nil
	w.mu.Unlock()
	w.cfg.logger.Info("remote: orphan not adopted within its grace; killing it", "worker", w.name, "task", t.key, "scope", t.scope)
	t.once.Do(func() {
		close(t.gone)
		_ = t.h.Cancel("orphaned: not adopted within the grace")
	})
}

// onAdopt answers P.adopt: move every command of the scope held under an older
// scope epoch to the adopting node (whose lease must be current), and list them.
// A repeat of the same adoption (same node, node epoch and scope epoch) lists
// again the commands it moved and that still await the adopter's first grant.
func (w *Worker) onAdopt(msg *nats.Msg) {
	var r adoptReq
	answer := func(rep adoptReply) { rep.Worker = w.name; _ = msg.Respond(encode(rep)) }
	if err := json.Unmarshal(msg.Data, &r); err != nil || checkName("owner node", r.Owner) != nil || r.Scope == "" {
		answer(adoptReply{Err: "remote: malformed adopt request"})
		return
	}
	if _, err := w.lease.current(); err != nil {
		answer(adoptReply{Err: "remote: worker " + w.name + ": " + err.Error()})
		return
	}
	if err := w.checkOwner(r.Owner, r.Epoch); err != nil {
		answer(adoptReply{Err: err.Error()})
		return
	}
	grace := w.graceFor(r.Owner)
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		answer(adoptReply{Err: "remote: worker " + w.name + " is shutting down"})
		return
	}
	var moved, listed []*wtask
	for _, t := range w.tasks {
		if t.scope != r.Scope || isClosed(t.gone) {
			continue
		}
		switch {
		case r.ScopeEpoch > t.scopeEpoch:
			t.owner, t.epoch, t.scopeEpoch = r.Owner, r.Epoch, r.ScopeEpoch
			t.state = awaiting
			t.setTimerLocked(grace)
			moved = append(moved, t)
			listed = append(listed, t)
		case r.ScopeEpoch == t.scopeEpoch && t.owner == r.Owner && t.epoch == r.Epoch && t.state == awaiting:
			listed = append(listed, t)
		}
	}
	w.mu.Unlock()
	for _, t := range moved {
		t.move(r.Owner, r.Epoch)
	}
	rep := adoptReply{Tasks: make([]adoptedTask, 0, len(listed))}
	for _, t := range listed {
		t.flow.mu.Lock()
		cursor := t.flow.cursor
		t.flow.mu.Unlock()
		a := adoptedTask{Key: t.key, Worker: w.name, WorkerEpoch: t.wepoch, Label: t.label, Written: t.h.Output.Written(),
			Cursor: cursor, Block: t.block, Stdin: t.stdin.String(), ExitCode: -1}
		w.mu.Lock()
		if o := t.outcome; o != nil {
			a.Exited, a.Status, a.Detail, a.ExitCode = true, string(o.Status), o.Detail, exitCode(*o)
		}
		w.mu.Unlock()
		rep.Tasks = append(rep.Tasks, a)
		w.cfg.logger.Info("remote: scope-owned command adopted", "worker", w.name, "task", t.key, "scope", r.Scope, "owner", r.Owner, "cursor", cursor)
	}
	answer(rep)
}

// move points the task's flow at its new owner: nothing is in flight any more,
// the output is sent again from the read cursor once the new owner's first grant
// comes (until then the task is on hold), and a frame read for the old owner is
// not sent.
func (t *wtask) move(owner string, epoch uint64) {
	w := t.w
	f := &t.flow
	f.mu.Lock()
	w.out.give(f.held())
	f.sent, f.acked, f.limit = f.cursor, f.cursor, f.cursor
	f.resend, f.probe, f.hello, f.hold = false, false, false, true
	f.heldAt = -1
	f.gen++
	f.head, f.osubj = frameHead(t.key, w.name, t.wepoch, epoch), w.subj.out(owner)
	f.ackAt, f.grantAt = time.Now(), time.Now()
	f.mu.Unlock()
	w.out.idle(t)
	t.poke()
}

// onRelease answers P.w.<worker>.release: the owner dropped the record of a
// scope-owned task, so the worker drops what it kept of it (at once when it has
// ended; once it ends otherwise).
func (w *Worker) onRelease(msg *nats.Msg) {
	var r releaseReq
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return
	}
	t, epoch := w.task(r.Task, r.Owner, r.Epoch)
	if t == nil || epoch != r.Epoch || t.scope == "" {
		_ = msg.Respond(encode(reply{Unknown: true}))
		return
	}
	t.relOnce.Do(func() { close(t.rel) })
	_ = msg.Respond(encode(reply{}))
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
