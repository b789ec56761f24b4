package kernel

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// Config is what a Kernel needs from its owner. Every field is required.
type Config struct {
	// System is the actor system the kernel's actors and reply processes live in.
	System *actor.ActorSystem
	// Workers is the number of long-lived dispatcher goroutines.
	Workers int
	// Throughput is how many messages a mailbox runs before it yields its worker.
	Throughput int
	// Go runs f on a goroutine its owner waits for before it is gone (the done
	// selector's groups run on it).
	Go func(what string, f func())
	// Deliver sends a watched Done's outcome to the actor self (SelectDone); ok is
	// false when Done was closed without an outcome. It is called off every mailbox
	// and must not block.
	Deliver func(self *actor.PID, o messages.Outcome, ok bool)
}

// Kernel is one runtime's scheduling machinery: its dispatcher, its reply
// processes, its done selector and its stop queue. Make it with New; Close it after
// every actor made with it has stopped.
type Kernel struct {
	cfg      Config
	pool     *pool
	replies  chan *reply // free list of reply processes whose answer was received
	selector doneSelector
	stops    stopQueue
}

// freeReplies bounds the free list of reply processes.
const freeReplies = 256

// New starts a kernel: its dispatcher's workers begin waiting for work.
func New(cfg Config) *Kernel {
	k := &Kernel{cfg: cfg, pool: newPool(cfg.Workers, cfg.Throughput), replies: make(chan *reply, freeReplies)}
	k.selector.k = k
	return k
}

// Props is an actor's Props on the kernel's dispatcher and mailbox, with opts. made,
// if not nil, is called with each mailbox made for the Props, inside the spawn and
// before the actor's Started: a handle for PostAndAwait and Stop.
func (k *Kernel) Props(producer actor.Producer, made func(*Mailbox), opts ...actor.PropsOption) *actor.Props {
	mailboxes := func() actor.Mailbox { return newMailbox() }
	if made != nil {
		mailboxes = func() actor.Mailbox {
			m := newMailbox()
			made(m)
			return m
		}
	}
	opts = append(opts[:len(opts):len(opts)], actor.WithDispatcher(k.pool), actor.WithMailbox(mailboxes)) // never into the caller's array
	return actor.PropsFromProducer(producer, opts...)
}

// SelectDone watches done off every mailbox and hands its one outcome to
// Config.Deliver for self. Stop the slot when the outcome is no longer wanted (the
// actor settled another way, or stops); nothing is delivered after.
func (k *Kernel) SelectDone(done <-chan messages.Outcome, self *actor.PID) *DoneSlot {
	return k.selector.add(done, self)
}

// Stop stops the actor whose mailbox is box, as a PoisonPill does: every message in
// box before the call is taken first, nothing sent after it. parent (nil for none)
// is the mailbox of the actor's parent, which its stop tells Terminated. Stops made
// close together share one dispatcher run, the parents' Terminated included.
func (k *Kernel) Stop(box, parent *Mailbox) { k.stops.push(box, parent) }

// Close stops the dispatcher's workers once they finished what they run, and takes
// the free reply processes out of the process registry.
func (k *Kernel) Close() {
	k.pool.close()
	for {
		select {
		case r := <-k.replies:
			r.drop()
			continue
		default:
		}
		return
	}
}
