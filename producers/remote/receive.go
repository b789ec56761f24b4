package remote

import (
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// onOut takes a frame of output from a worker (P.o.<node>.out): its task appends
// what it did not hold yet and grants more credit. Output of a task this node
// does not know (a start it gave up on, a task that settled) is acknowledged and
// answered with a kill, so that nothing runs unowned. A frame under another owner
// epoch than its task's, or from another life of the worker than the one that
// started it, is refused.
func (p *Producer) onOut(msg *nats.Msg) {
	f, ok := parseFrame(msg.Data)
	if lose := p.lose.Load(); !ok || lose != nil && (*lose)(f) {
		return
	}
	p.mu.Lock()
	t := p.tasks[f.task]
	var wepoch uint64
	if t != nil {
		wepoch = t.wepoch
	}
	p.mu.Unlock()
	if t == nil {
		p.orphan(f.worker, f.task)
		end := f.off + int64(len(f.data))
		p.sendGrant(f.worker, grant{task: f.task, oepoch: f.oepoch, acked: end, limit: end + p.cfg.window})
		return
	}
	if f.oepoch != t.epoch || wepoch != 0 && f.wepoch != wepoch || t.detached.Load() {
		return // another life's, or a detached task's: a stale home takes nothing
	}
	t.receive(f)
}

// receive appends a frame's new bytes (a retransmission overlaps what is held;
// bytes the worker's buffer dropped are marked) and grants: at once when the
// frame asks, repeats what is held, follows a lost frame, or a quarter window
// arrived since the last grant; else ackDelay later, with whatever follows.
func (t *rtask) receive(f frame) {
	data := f.data
	t.wmu.Lock()
	t.wworker = f.worker
	if !t.heard {
		t.heard = true // an adopter's first grant arrived: no more resending it
		if t.confirm != nil {
			t.confirm.Stop()
		}
	}
	end := f.off + int64(len(data))
	now := f.flags&frameAckNow != 0
	var flags byte
	switch {
	case f.from > t.next:
		// A frame before this one was lost on the way (a reconnect, a slow
		// consumer): taking this one would mark bytes as dropped that were only
		// delayed. The worker sends again from what is held, asked once per hole:
		// the frames that were in flight behind the lost one follow it here.
		if t.resentAt == t.next {
			t.wmu.Unlock()
			return
		}
		t.resentAt, flags, now = t.next, grantResend, true
	case end <= t.next:
		now = now || len(data) > 0 // a retransmission: the worker is waiting
		t.p.dups.Add(int64(len(data)))
	case t.outClosed:
		t.next = end
	default:
		var marker string
		if f.off > t.next {
			marker = fmt.Sprintf("\n[remote: %d bytes of output were not kept on the worker]\n", f.off-t.next)
		} else {
			t.p.dups.Add(t.next - f.off)
			data = data[t.next-f.off:]
		}
		if t.block && int64(len(marker)+len(data)) > t.out.Room() {
			// More than the grant allowed (a worker whose command was cancelled
			// there, by its own fence): this callback must never wait for a read.
			t.out.Unblock()
		}
		t.held.Store(false) // the worker went on
		if marker != "" {
			_, _ = t.out.WriteString(marker)
			t.markLocked(f.off)
		}
		_, _ = t.out.Write(data)
		t.next = end
	}
	var pending *messages.Outcome
	if t.pending != nil && t.next >= t.pendingAt {
		pending, t.pending = t.pending, nil // adopted after it ended: its output is all here
	}
	var full func()
	if f.flags&frameHeld != 0 && end == t.next && !t.outClosed {
		t.held.Store(true)
		if t.full() {
			full = t.onGrow
		}
	}
	var g grant
	send := now || t.next-t.ackSent >= t.p.cfg.window/4
	if send {
		g = t.grantLocked(flags)
	} else if t.next > t.ackSent {
		t.armLocked()
	}
	t.wmu.Unlock()
	if send {
		t.p.sendGrant(f.worker, g)
	}
	if full != nil {
		full() // as the bash producer's buffer does when its writer starts waiting
	}
	if pending != nil {
		t.settle(*pending)
	}
}

// limitLocked is how far the task's worker may send its output: the window past
// what this node holds, and in block mode no more than its buffer has room for.
// It is the one place that decides it; a limit never goes back, since the worker
// may have sent up to an earlier one. t.wmu must be held.
func (t *rtask) limitLocked() int64 {
	return max(t.granted, t.next+min(t.p.cfg.window, t.out.Room()))
}

// grantLocked is the grant for what is held now. t.wmu must be held.
func (t *rtask) grantLocked(flags byte) grant {
	t.granted, t.ackSent = t.limitLocked(), t.next
	t.cursorSent = max(t.cursorSent, t.cursorLocked())
	return grant{task: t.key, oepoch: t.epoch, acked: t.next, limit: t.granted, cursor: t.cursorSent, flags: flags}
}

// full is Full: in block mode, the worker said that the command waits for credit
// at what this node holds now, and this node's buffer has no room. A read that
// makes room ends it at once, before the worker hears of the grant.
func (t *rtask) full() bool {
	return t.block && t.held.Load() && t.out.Room() == 0
}

// armLocked sets the timer of a grant held back. t.wmu must be held.
func (t *rtask) armLocked() {
	if t.ackArmed || t.outClosed {
		return
	}
	t.ackArmed = true
	if t.ackTimer == nil {
		t.ackTimer = time.AfterFunc(ackDelay, t.delayedGrant)
		return
	}
	t.ackTimer.Reset(ackDelay)
}

// delayedGrant is the timer's grant, unless one went out since.
func (t *rtask) delayedGrant() {
	t.wmu.Lock()
	t.ackArmed = false
	if t.outClosed || t.next <= t.ackSent || t.detached.Load() {
		t.wmu.Unlock()
		return
	}
	g, worker := t.grantLocked(0), t.wworker
	t.wmu.Unlock()
	t.p.sendGrant(worker, g)
}

// roomMade grants the worker the room a read made in a block-mode buffer (or
// that Unblock made): the command goes on as the owner reads.
func (t *rtask) roomMade() {
	if !t.block {
		return
	}
	t.wmu.Lock()
	if t.outClosed || t.wworker == "" || t.limitLocked() <= t.granted || t.detached.Load() {
		t.wmu.Unlock()
		return
	}
	g, worker := t.grantLocked(0), t.wworker
	t.wmu.Unlock()
	t.p.sendGrant(worker, g)
}

// unblock ends block mode on this node (a kill, a disposal): the buffer drops
// what does not fit again, as the worker's does once its command is cancelled,
// and the worker gets a full window to send what is left, so that the task ends
// within its grace.
func (t *rtask) unblock() {
	if t.block {
		t.out.Unblock()
		t.roomMade()
	}
}

func (p *Producer) sendGrant(worker string, g grant) {
	_ = p.nc.Publish(p.subj.ack(worker), g.encode())
}

// orphan asks a worker to kill a task this node does not know.
func (p *Producer) orphan(worker, task string) {
	epoch, _ := p.lease.current()
	_ = p.nc.Publish(p.subj.kill(worker), encode(killReq{Task: task, Owner: p.node, Epoch: epoch, Reason: "unknown to its owner node"}))
}

// rout is the output stream the runtime sees for a remote task: this node's
// buffer, whose consuming reads in block mode grant the worker the room they
// made, and which is Full while the command waits for a read, as a local block
// mode buffer is.
type rout struct {
	*output.Buffer
	t *rtask
}

func (o rout) Read() string {
	if o.t.scope != "" {
		return o.scopedRead()
	}
	s := o.Buffer.Read()
	o.t.roomMade()
	return s
}

func (o rout) ReadMatch(re *regexp.Regexp) (out, match string, ok bool) {
	if o.t.scope != "" {
		return o.scopedReadMatch(re)
	}
	out, match, ok = o.Buffer.ReadMatch(re)
	if ok {
		o.t.roomMade()
	}
	return out, match, ok
}

// OnGrow sets the callback the buffer calls as it grows, which is also called
// when the task becomes full.
func (o rout) OnGrow(f func()) {
	o.t.wmu.Lock()
	o.t.onGrow = f
	o.t.wmu.Unlock()
	o.Buffer.OnGrow(f)
}

// Full reports whether the command waits for this node to read its output.
func (o rout) Full() bool { return o.t.full() }
