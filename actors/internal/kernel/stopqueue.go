package kernel

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// stopQueue stops actors many to one dispatcher run (Kernel.Stop). Poisoning each
// actor through its PID hands each idle actor to a dispatcher worker of its own to
// take the pill — a worker woken and a mailbox scheduled for one message — and its
// stop then hands its parent (told Terminated) to another. The queue takes the
// mailboxes instead: a push puts the pill in the mailbox at once, without scheduling
// it (so it comes before anything sent to the actor after the push), and the first
// push schedules one run, which runs each mailbox whose actor is idle there
// (runIfIdle) — the same handlers, on a dispatcher worker, in order — with the
// parent's mailbox marked (inlineRuns), so that the run its Terminated makes due is
// taken and run there too, right after; and it takes what is pushed meanwhile before
// it ends. An actor that is not idle takes the pill behind the messages it has and
// runs as usual; a parent that is running elsewhere just gets the message.
//
// It pays only when stops come in numbers and from owners (retention evicting the
// records of busy agents); a single stop costs what a Poison costs.
type stopQueue struct {
	mu      sync.Mutex // protects boxes, running and spare
	boxes   []stopItem
	running bool // a run is scheduled or under way: it takes what is pushed
	spare   []stopItem
	inline  inlineRuns // used by the run only
}

type stopItem struct{ box, parent *Mailbox }

// push queues box's actor to be stopped, parent (nil for none) being the mailbox of
// its parent actor; box's dispatcher runs the queue when nothing does.
func (q *stopQueue) push(box, parent *Mailbox) {
	// The pill goes into the mailbox now, before anything sent to the actor after
	// the push (a producer call's result, say): the actor stops, answering what is
	// still pending, before it would take those.
	box.enqueue(poisonPill)
	q.mu.Lock()
	q.boxes = append(q.boxes, stopItem{box, parent})
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	q.mu.Unlock()
	box.dispatcher.Schedule(q.run)
}

// run stops the queued actors until none is left.
func (q *stopQueue) run() {
	for {
		q.mu.Lock()
		boxes := q.boxes
		if len(boxes) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.boxes, q.spare = q.spare[:0], nil
		q.mu.Unlock()
		for i, it := range boxes {
			if it.parent != nil {
				q.inline.begin(it.parent)
			}
			it.box.runIfIdle()
			if it.parent != nil {
				q.inline.end(it.parent)
			}
			boxes[i] = stopItem{}
		}
		q.mu.Lock()
		q.spare = boxes
		q.mu.Unlock()
	}
}

var poisonPill = &actor.PoisonPill{}
