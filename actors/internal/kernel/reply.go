package kernel

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// reply is how a caller outside the actors waits for an actor's answer (Kernel.Call
// and its kin): a one-shot actor.Process. Requests name it as their sender, so actors
// answer with an ordinary ctx.Respond, and the caller selects on its channel together
// with its context and its stop channel. Rejected: protoactor's RequestFuture, which
// allocates a process with a lock, a timer and identifiers per request, and whose
// timeout is fixed where a caller's context ends when it ends.
//
// Every request gets exactly one answer, so a reply whose answer was received is clean
// and goes back to the kernel's free list (recycle); one whose caller gave up may
// still receive a late answer and leaves the process registry instead (drop).
type reply struct {
	k   *Kernel
	pid *actor.PID
	ch  chan any
}

// ErrStopped is what a call returns when its stop channel closed before the answer
// came.
var ErrStopped = errors.New("kernel: stopped before the answer")

// newReply takes a reply process from the free list, or registers a new one.
func (k *Kernel) newReply() *reply {
	select {
	case r := <-k.replies:
		return r
	default:
	}
	reg := k.cfg.System.ProcessRegistry
	r := &reply{k: k, ch: make(chan any, 1)}
	r.pid, _ = reg.Add(r, "taskrt-reply"+reg.NextId())
	return r
}

// recycle returns a reply whose one answer was received to the free list.
func (r *reply) recycle() {
	select {
	case r.k.replies <- r:
	default:
		r.drop()
	}
}

// drop takes the reply out of the process registry: a late answer goes nowhere.
func (r *reply) drop() { r.k.cfg.System.ProcessRegistry.Remove(r.pid) }

// SendUserMessage receives the answer.
func (r *reply) SendUserMessage(_ *actor.PID, msg any) {
	_, m, _ := actor.UnwrapEnvelope(msg)
	select {
	case r.ch <- m:
	default: // one-shot: anything after the first answer is dropped
	}
}

// SendSystemMessage ignores system messages.
func (r *reply) SendSystemMessage(*actor.PID, any) {}

// Stop does nothing: a reply leaves the registry through drop.
func (r *reply) Stop(*actor.PID) {}

// answered reports whether the answer is there.
func (r *reply) answered() bool { return len(r.ch) > 0 }

// Call sends msg to the actor to, naming a reply process as its sender, and waits for
// the one answer, the end of ctx (ctx.Err()) or the close of stop (ErrStopped, or the
// answer if it came by then). The answer is returned as the actor sent it, an error
// value included.
func (k *Kernel) Call(ctx context.Context, to *actor.PID, msg any, stop <-chan struct{}) (any, error) {
	r := k.newReply()
	k.cfg.System.Root.RequestWithCustomSender(to, msg, r.pid)
	if ctx.Done() == nil { // a context that never ends (a start's calls): one case less
		return r.await(stop)
	}
	select {
	case m := <-r.ch:
		r.recycle()
		return m, nil
	case <-ctx.Done():
		r.drop()
		return nil, ctx.Err()
	case <-stop:
		return r.stopped()
	}
}

// CallAbandonable is Call for a request whose deadline travels inside it (a wait, a
// read until a pattern, a set wait). If ctx ends first, it calls abandon with the
// reply's PID — which must make whoever holds the request answer at once with what
// it has — and waits for that answer: the request is answered exactly once either
// way, so nothing is left behind and the reply process is recycled. abandoned
// reports that ctx ended before the answer; the caller decides whether the answer
// still counts. Once stop is closed it returns ErrStopped.
func (k *Kernel) CallAbandonable(ctx context.Context, to *actor.PID, msg any, stop <-chan struct{}, abandon func(replyTo *actor.PID)) (answer any, abandoned bool, err error) {
	r := k.newReply()
	k.cfg.System.Root.RequestWithCustomSender(to, msg, r.pid)
	if ctx.Done() == nil { // a context that never ends: nothing to abandon
		select {
		case a := <-r.ch:
			r.recycle()
			return a, false, nil
		case <-stop:
			r.drop()
			return nil, false, ErrStopped
		}
	}
	select {
	case a := <-r.ch:
		r.recycle()
		return a, false, nil
	case <-stop:
		r.drop()
		return nil, false, ErrStopped
	case <-ctx.Done():
	}
	abandon(r.pid)
	select {
	case a := <-r.ch:
		r.recycle()
		return a, true, nil
	case <-stop:
		r.drop()
		return nil, true, ErrStopped
	}
}

// PostAndAwait posts the message msg makes (naming the reply process to answer) to
// box and waits for the answer or the close of stop, as Call does. If box was idle,
// the calling goroutine, about to wait anyway, runs its actor until the answer is
// there, instead of handing it to a dispatcher worker and waiting to be woken; what
// is left then goes to the dispatcher. A caller uses it when box's actor answers
// soon and mostly runs alone (an agent spawning a task on a start).
func (k *Kernel) PostAndAwait(box *Mailbox, msg func(replyTo *actor.PID) any, stop <-chan struct{}) (any, error) {
	r := k.newReply()
	box.postAndRun(msg(r.pid), r.answered)
	return r.await(stop)
}

// await waits for r's answer or the close of stop.
func (r *reply) await(stop <-chan struct{}) (any, error) {
	select {
	case m := <-r.ch:
		r.recycle()
		return m, nil
	case <-stop:
		return r.stopped()
	}
}

// stopped is a call's answer once stop closed: the answer if it came, else
// ErrStopped.
func (r *reply) stopped() (any, error) {
	r.drop()
	select {
	case m := <-r.ch:
		return m, nil
	default:
		return nil, ErrStopped
	}
}
