package remote

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/messages"
)

// retransmit is how long a worker waits for an acknowledgement of sent output
// before it sends it again (output lost on a reconnect, or dropped by a slow
// consumer); the owner node drops what it already holds.
const retransmit = 500 * time.Millisecond

// flow is a task's output flow control on the worker: what it sent, what the
// owner node acknowledged, and how far the owner lets it send.
//
// Its bytes in flight (sent − acked) are reserved in the worker's budget: every
// change of sent or acked gives back or takes the difference under mu, so that
// the budget's count is always the sum of its tasks' bytes in flight.
type flow struct {
	mu      sync.Mutex
	sent    int64     // the offset the next frame starts at
	acked   int64     // the owner node holds every byte before it
	limit   int64     // the owner node's grant: no frame reaches past it
	resend  bool      // the owner saw a frame past what it holds: send again from acked
	ackAt   time.Time // when acked last moved
	grantAt time.Time // when a grant last came
	sendAt  time.Time // when a frame was last sent
	exited  bool      // the command exited: its outcome waits for the last acknowledgement
	probe   bool      // ask the owner to acknowledge what is in flight at once
	heldAt  int64     // the limit at which the owner was last told the output waits for a read (-1: never)

	// Ownership, for scope-owned tasks that an adoption moves (scope.go).
	head   []byte // the task's frame header (frameHead): its owner epoch
	osubj  string // where its frames go: P.o.<owner>.out
	gen    uint64 // counts the moves: a frame read under an older one is not sent
	hold   bool   // orphaned, or moved and the new owner's first grant not seen: send nothing
	hello  bool   // the new owner's first grant came: answer it with an empty frame
	cursor int64  // the highest read cursor the owner told (grant.cursor)
}

func (f *flow) start(grant int64) {
	if grant <= 0 {
		grant = defaultOutputWindow
	}
	f.limit, f.heldAt = grant, -1
	f.ackAt, f.grantAt = time.Now(), time.Now()
}

// held is the task's bytes in flight. f.mu must be held.
func (f *flow) held() int64 { return max(0, f.sent-f.acked) }

// blockOutput is a worker's output buffer in block mode (output.Buffer with
// WithBlocking): its writer waits while a read's worth is unread. The owner
// node's acknowledgements are its reads (Advance), so the command waits once
// the owner's grant keeps the worker from sending and that much is unread.
type blockOutput interface {
	Advance(to int64)
}

func (t *wtask) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// onAck takes an owner node's grant (P.w.<worker>.ack): the acknowledgement and
// the credit of one task's output. A grant under another epoch than the task's
// is not its owner's, and is ignored.
func (w *Worker) onAck(msg *nats.Msg) {
	g, ok := parseGrant(msg.Data)
	if lose := w.loseGrant.Load(); !ok || lose != nil && (*lose)(g) {
		return
	}
	w.mu.Lock()
	t := w.tasks[g.task]
	if t == nil || g.oepoch != t.epoch || t.state == orphaned {
		w.mu.Unlock()
		return
	}
	confirm := t.state == awaiting
	if confirm {
		t.state = owned
		t.stopTimerLocked()
	}
	w.mu.Unlock()
	t.granted(g, confirm)
}

// granted takes a grant of the task's owner; confirm: the first of a node that
// adopted the task, which ends the hold of the move.
func (t *wtask) granted(g grant, confirm bool) {
	f := &t.flow
	f.mu.Lock()
	if confirm {
		f.hold, f.hello = false, true
	}
	if t.scope != "" {
		f.cursor = max(f.cursor, min(g.cursor, g.acked)) // nobody read what its owner did not hold
	}
	now := time.Now()
	f.grantAt = now
	moved := g.acked > f.acked
	if moved {
		before := f.held()
		f.acked, f.ackAt = g.acked, now
		t.w.out.give(before - f.held())
	}
	f.limit = max(f.limit, g.limit)
	if g.flags&grantResend != 0 && f.sent > f.acked {
		f.resend = true
	}
	f.mu.Unlock()
	if moved && t.blk != nil {
		t.blk.Advance(g.acked) // the owner holds them: the command may write more
	}
	t.poke()
}

// lift ends block mode's pause on the worker's side when the worker itself ends
// the task (it shuts down): the rest of the output goes out without waiting for
// the owner node to read, within the budget, and the owner, finding more than it
// granted, leaves block mode too (what does not fit its buffer is then dropped
// and counted), so that the outcome is reported without waiting for a read.
func (t *wtask) lift() {
	if t.blk == nil {
		return
	}
	t.flow.mu.Lock()
	t.flow.limit = math.MaxInt64
	t.flow.mu.Unlock()
	t.poke()
}

// allAcked reports whether the owner node holds every byte of output written.
func (t *wtask) allAcked() bool {
	written := t.h.Output.Written()
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	return t.flow.acked >= written
}

// outFrame is one frame on its way: it covers the output [from, end), its bytes
// start at off (from ≤ off ≤ end; before off the worker's buffer dropped them).
type outFrame struct {
	from, off, end int64
	b              []byte  // the whole frame: header and bytes
	buf            *[]byte // b's pooled buffer
	subj           string  // where it goes
	gen            uint64  // the flow's generation it was read under
}

// send sends frames while the grant and the worker's budget allow, then the
// acknowledgement request the flow asked for, if any, and in block mode tells
// the owner node when the command waits for it.
func (t *wtask) send() {
	for {
		fr, ok := t.nextFrame()
		if !ok {
			break
		}
		err := t.w.nc.Publish(fr.subj, fr.b)
		putBuf(fr.buf) // the connection copied the bytes
		if err != nil {
			t.unsend(fr) // not on the wire: the next wake-up or tick sends it again
			return
		}
	}
	f := &t.flow
	f.mu.Lock()
	probe := f.probe && f.sent > f.acked || f.hello
	f.probe, f.hello = false, false
	at := f.sent
	f.mu.Unlock()
	if probe {
		// An empty frame after the ones in flight: the owner answers it with a grant
		// once it has taken them (or with a resend, if one was lost).
		t.mark(at, frameAckNow)
	}
	t.tellHeld()
}

// tellHeld tells the owner node, once per grant, that the task's output waits
// for a read (block mode): the worker has output the grant does not let it send.
// The command goes on until the worker's own buffer is full, then waits too; the
// owner shows the task full from now until a read makes room, as a local task
// is shown while its reader waits to put output into a full buffer.
func (t *wtask) tellHeld() {
	if t.blk == nil {
		return
	}
	written := t.h.Output.Written()
	f := &t.flow
	f.mu.Lock()
	tell := f.sent >= f.limit && written > f.sent && f.heldAt != f.limit && !f.resend
	if tell {
		f.heldAt = f.limit
	}
	at := f.sent
	f.mu.Unlock()
	if tell {
		t.mark(at, frameHeld)
	}
}

// mark sends an empty frame at offset at, unless the task is on hold.
func (t *wtask) mark(at int64, flags byte) {
	t.flow.mu.Lock()
	if t.flow.hold {
		t.flow.mu.Unlock()
		return
	}
	b := append(make([]byte, 0, len(t.flow.head)), t.flow.head...)
	subj := t.flow.osubj
	t.flow.mu.Unlock()
	setHead(b, at, at, flags)
	_ = t.w.nc.Publish(subj, b)
}

// nextFrame reserves and reads the next frame: as much of the output from sent on
// as the grant, the task's share of the budget and the budget's free bytes allow,
// at most the worker's chunk. It reports false when there is nothing to send or no room.
func (t *wtask) nextFrame() (outFrame, bool) {
	written := t.h.Output.Written()
	f := &t.flow
	f.mu.Lock()
	if f.hold {
		f.mu.Unlock()
		return outFrame{}, false
	}
	if f.resend {
		t.w.out.give(f.held())
		f.sent, f.resend = f.acked, false
		t.w.goBacks.Add(1)
	}
	f.sent = max(f.sent, f.acked) // the owner holds more than was sent since a go-back
	want := min(t.w.chunk, f.limit-f.sent, written-f.sent)
	if want <= 0 {
		if f.held() == 0 {
			t.w.out.idle(t)
		}
		f.mu.Unlock()
		return outFrame{}, false
	}
	n := t.w.out.take(t, want, f.held())
	if n == 0 {
		f.mu.Unlock()
		return outFrame{}, false
	}
	from := f.sent
	f.sent += n // reserved: the bytes are read below, without the lock
	head, subj, gen := f.head, f.osubj, f.gen
	f.mu.Unlock()

	h := len(head)
	b, off, buf := t.rd.read(head, from, n)
	fr := outFrame{from: from, off: off, end: off + int64(len(b)-h), b: b, buf: buf, subj: subj, gen: gen}
	if fr.end > from+n { // the buffer dropped bytes: the frame still ends within the reservation
		fr.end = from + n
		fr.off = min(fr.off, fr.end)
		fr.b = fr.b[:h+int(fr.end-fr.off)]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != gen {
		// Moved meanwhile: the move gave back what was in flight, this reservation
		// with it.
		putBuf(fr.buf)
		return outFrame{}, false
	}
	t.w.out.give(max(0, from+n-f.acked) - max(0, fr.end-f.acked))
	f.sent = fr.end
	if fr.end == from {
		putBuf(fr.buf)
		return outFrame{}, false
	}
	f.sendAt = time.Now()
	var flags byte
	if f.probe || f.exited && fr.end >= written || f.limit-fr.end < t.w.chunk || t.w.out.short(f.held()) {
		// The task is about to run out of credit, or its outcome waits for the
		// acknowledgement of its last bytes: the owner answers this frame at once.
		flags |= frameAckNow
		f.probe = false
	}
	setHead(fr.b, fr.from, fr.off, flags)
	return fr, true
}

// unsend takes back a frame that did not reach the connection.
func (t *wtask) unsend(fr outFrame) {
	f := &t.flow
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen == fr.gen && f.sent == fr.end {
		t.w.out.give(max(0, fr.end-f.acked) - max(0, fr.from-f.acked))
		f.sent = fr.from
	}
}

// overdue is the retransmission timer: output sent and not acknowledged within
// retransmit is sent again from what the owner holds; output the owner's grant
// holds back for as long is asked about with an empty frame (its grant may have
// been lost; in block mode, so may the word that the command waits).
func (t *wtask) overdue() {
	written := t.h.Output.Written()
	f := &t.flow
	f.mu.Lock()
	if f.hold {
		f.mu.Unlock()
		return
	}
	now := time.Now()
	quiet := now.Sub(f.sendAt) > retransmit
	switch {
	case f.sent > f.acked && quiet && now.Sub(f.ackAt) > retransmit:
		f.resend = true
	case f.sent >= f.limit && written > f.sent && quiet && now.Sub(f.grantAt) > retransmit:
		f.sendAt = now
		at := f.sent
		f.mu.Unlock()
		flags := byte(frameAckNow)
		if t.blk != nil {
			flags |= frameHeld
		}
		t.mark(at, flags)
		return
	}
	f.mu.Unlock()
}

// release gives the task's bytes in flight back to the budget: it is gone.
func (t *wtask) release() {
	f := &t.flow
	f.mu.Lock()
	t.w.out.give(f.held())
	f.sent = f.acked
	f.mu.Unlock()
	t.w.out.idle(t)
}

// stream is the task's goroutine: it sends output as the grants allow, sends
// again what was not acknowledged in time, takes the outcome, and once every byte
// is acknowledged reports the outcome (retrying until the owner node answers, its
// lease ends, or the worker closes); then it releases the task and its slot. A
// scope-owned task is kept past the report, outcome and output, until its owner
// releases it, an orphan grace expires, or the worker closes; an adoption meanwhile
// streams it again to the new owner from the read cursor and reports again.
func (t *wtask) stream() {
	w := t.w
	defer func() {
		t.release()
		t.rd.close()
		if t.h.Release != nil {
			t.h.Release()
		}
		w.mu.Lock()
		t.stopTimerLocked()
		delete(w.tasks, t.key)
		if len(w.tasks) == 0 {
			close(w.idle)
		}
		w.mu.Unlock()
		close(t.fin)
	}()
	tick := time.NewTicker(retransmit / 2)
	defer tick.Stop()
	var (
		outcome   *messages.Outcome
		done      = t.h.Done
		gone      = t.gone
		ownerGone bool
		closing   = w.ctx.Done()
		shut      = w.shut
		shutting  bool
		rel       = t.rel
		released  bool
		reported  = ^uint64(0) // the flow generation whose outcome the owner took
	)
	scoped := t.scope != ""
	for {
		if !ownerGone {
			t.send()
		}
		if outcome != nil {
			if ownerGone || released {
				break
			}
			gen, hold := t.ownership()
			if !scoped && t.allAcked() {
				break
			}
			if scoped && !hold && gen != reported && t.allAcked() {
				switch t.reportDone(*outcome, gen) {
				case reportTaken:
					reported = gen
				case reportStop:
					return
				}
				continue
			}
			if scoped && shutting && (hold || gen == reported) {
				return // the worker is closing: kept and orphaned tasks are dropped
			}
		}
		select {
		case <-t.wake:
		case o, ok := <-done:
			if !ok {
				o = messages.Outcome{Status: messages.Failed, Detail: "bash producer closed Done without an outcome"}
			}
			if t.fenced.Load() {
				o = lostOutcome(w.name)
			}
			outcome, done = &o, nil
			w.mu.Lock()
			t.outcome = outcome
			w.mu.Unlock()
			close(t.exited)
			w.exits.Done()
			w.freeSlot() // before the outcome is reported: a start that follows it finds the slot
			t.flow.mu.Lock()
			t.flow.exited, t.flow.probe = true, true // the outcome waits for the acknowledgement: ask for it now
			t.flow.mu.Unlock()
		case <-tick.C:
			if outcome != nil && t.abandoned() {
				return // nobody will take the rest: the owner treats this worker as lost
			}
			t.overdue()
		case <-gone:
			ownerGone, gone = true, nil // the kill is under way: wait for Done, report nothing
		case <-rel:
			released, rel = true, nil // the owner dropped its record: nothing more to keep
		case <-shut:
			shutting, shut = true, nil
		case <-closing:
			closing = nil
			if outcome != nil {
				return // the worker is closing: no more waiting for acknowledgements
			}
		}
	}
	if !ownerGone && !released && !scoped {
		t.reportDone(*outcome, 0)
	}
}

// ownership is the flow's generation (how many times the task moved) and whether
// it is on hold (orphaned, or moved and not confirmed by its new owner).
func (t *wtask) ownership() (gen uint64, hold bool) {
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	return t.flow.gen, t.flow.hold
}

// abandoned reports whether the task's owner node can no longer hear from this
// worker about it: the connection is closed for good, or the worker's lease of
// the task's start has ended (its owner treats the task as lost).
func (t *wtask) abandoned() bool {
	if t.w.nc.IsClosed() {
		return true
	}
	cur, err := t.w.lease.current()
	return err != nil || cur != t.wepoch
}

// What reportDone achieved.
type report int

const (
	reportTaken report = iota // the owner answered
	reportMoved               // the task was orphaned or moved meanwhile: report again once it is owned
	reportStop                // nobody will take it (abandoned, dropped, the worker closing)
)

// reportDone sends the outcome until the owner node acknowledges it, its lease
// ends or the worker closes; for a scope-owned task also until it is orphaned or
// moved (gen is the flow generation it reports for).
func (t *wtask) reportDone(o messages.Outcome, gen uint64) report {
	w := t.w
	w.mu.Lock()
	owner := t.owner
	w.mu.Unlock()
	m := encode(doneMsg{Task: t.key, Worker: w.name, Status: string(o.Status), Detail: o.Detail,
		Written: t.h.Output.Written(), ExitCode: exitCode(o)})
	for {
		ctx, cancel := context.WithTimeout(w.ctx, 2*retransmit)
		_, err := w.nc.RequestWithContext(ctx, w.subj.done(owner), m)
		cancel()
		switch {
		case err == nil:
			return reportTaken
		case t.abandoned():
			return reportStop
		}
		if t.scope != "" {
			if g, hold := t.ownership(); g != gen || hold {
				return reportMoved
			}
		}
		timer := time.NewTimer(retransmit)
		select {
		case <-t.gone:
		case <-w.ctx.Done():
		case <-timer.C:
			continue
		}
		timer.Stop()
		return reportStop
	}
}
