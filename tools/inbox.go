package tools

import (
	"context"
	"fmt"
	"sync"
)

// Defaults of an Inbox.
const (
	// defaultInboxCapacity is how many notices an Inbox holds before it counts the
	// rest instead (see Inbox.Drain).
	defaultInboxCapacity = 64
	// defaultMaxAutoTurns is how many turns in a row an Inbox wakes an idle loop for
	// without user input.
	defaultMaxAutoTurns = 3
)

// Inbox is one agent session's notice queue for an agent loop of its own (a loop on
// a provider SDK, say): the injector queues the session's completion notices and
// signals that one is waiting, so that a loop that is idle — its last turn ended,
// no user input yet — can wake, put the notices into its next request, and run a
// turn.
//
// Register the agent with actors.WithInjector(inbox.Inject). Then, in the loop:
//
//   - before each request the loop makes anyway (a user turn, the next round of a
//     turn after tool results), Drain the inbox and put the notices in that request;
//   - while idle, wait on Ready together with the user's input; on a signal, Wake
//     returns the notices for an automatic turn (or false: nothing to do);
//   - on user input, call UserInput.
//
// Wake-ups are bounded: at most MaxAutoTurns automatic turns in a row without user
// input (WithMaxAutoTurns, default 3). Past that, Ready stays silent and notices
// wait for the next turn the user starts, so a storm of notices (or a model that
// starts a task on every automatic turn) cannot spin the loop. Each wake-up takes
// every notice queued so far, so a burst costs one turn, not one per notice. The
// queue is bounded too (WithInboxCapacity, default 64): notices past it are counted,
// and Drain says how many, so the model still learns that more tasks finished.
//
// An Inbox starts no goroutine; its methods are safe for concurrent use and never
// block, except Wait.
type Inbox struct {
	capacity, maxAuto int
	ready             chan struct{} // one pending signal at most

	mu      sync.Mutex // protects queue, dropped and auto
	queue   []string
	dropped int // notices past capacity since the last drain
	auto    int // automatic turns since the last user input
}

// InboxOption configures an Inbox; a zero or negative value keeps the default.
type InboxOption interface{ applyInbox(*Inbox) }

type inboxOptionFunc func(*Inbox)

func (f inboxOptionFunc) applyInbox(b *Inbox) { f(b) }

// WithInboxCapacity sets how many notices the Inbox holds (default
// defaultInboxCapacity); values <= 0 keep the default.
func WithInboxCapacity(n int) InboxOption {
	return inboxOptionFunc(func(b *Inbox) {
		if n > 0 {
			b.capacity = n
		}
	})
}

// WithMaxAutoTurns sets how many automatic turns in a row the Inbox allows without
// user input (default 3); values <= 0 keep the default.
func WithMaxAutoTurns(n int) InboxOption {
	return inboxOptionFunc(func(b *Inbox) {
		if n > 0 {
			b.maxAuto = n
		}
	})
}

// NewInbox returns an empty Inbox.
func NewInbox(opts ...InboxOption) *Inbox {
	b := &Inbox{capacity: defaultInboxCapacity, maxAuto: defaultMaxAutoTurns, ready: make(chan struct{}, 1)}
	for _, o := range opts {
		o.applyInbox(b)
	}
	return b
}

// Inject queues a notice and signals Ready; it is the agent's injector
// (actors.WithInjector(inbox.Inject)). It never blocks and never fails: past the
// capacity, the notice is counted instead of queued.
func (b *Inbox) Inject(_ context.Context, text string) error {
	b.mu.Lock()
	if len(b.queue) < b.capacity {
		b.queue = append(b.queue, text)
	} else {
		b.dropped++
	}
	b.signalLocked()
	b.mu.Unlock()
	return nil
}

// Ready receives when notices are waiting and an automatic turn is allowed. A
// signal may be stale (a Drain took the notices since): Wake then returns false.
func (b *Inbox) Ready() <-chan struct{} { return b.ready }

// Wake is for an idle loop that Ready woke: it takes every queued notice for an
// automatic turn and counts the turn. It returns false, taking nothing, when no
// notice is waiting or the loop already ran MaxAutoTurns automatic turns since the
// last user input.
func (b *Inbox) Wake() ([]string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.empty() || b.auto >= b.maxAuto {
		b.clearSignal()
		return nil, false
	}
	b.auto++
	return b.takeLocked(), true
}

// Wait blocks until an automatic turn is due and returns its notices (Ready, then
// Wake), or until ctx ends.
func (b *Inbox) Wait(ctx context.Context) ([]string, error) {
	for {
		select {
		case <-b.ready:
			if notices, ok := b.Wake(); ok {
				return notices, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Drain takes every queued notice, for a request the loop makes anyway (a user
// turn, or the next round of a turn: beside its tool results). It does not count
// as an automatic turn. When notices were dropped past the capacity, the last line
// says how many.
func (b *Inbox) Drain() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked()
}

// UserInput records that the user spoke: automatic turns may resume, and if
// notices are waiting, Ready signals.
func (b *Inbox) UserInput() {
	b.mu.Lock()
	b.auto = 0
	b.signalLocked()
	b.mu.Unlock()
}

// Len is how many notices are waiting (dropped ones included).
func (b *Inbox) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue) + b.dropped
}

// AutoTurns is how many automatic turns ran since the last user input.
func (b *Inbox) AutoTurns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.auto
}

func (b *Inbox) empty() bool { return len(b.queue) == 0 && b.dropped == 0 }

// signalLocked signals Ready if notices wait and an automatic turn is allowed.
func (b *Inbox) signalLocked() {
	if b.empty() || b.auto >= b.maxAuto {
		return
	}
	select {
	case b.ready <- struct{}{}:
	default: // a signal is pending already
	}
}

// clearSignal drops a pending signal that has nothing left to announce.
func (b *Inbox) clearSignal() {
	select {
	case <-b.ready:
	default:
	}
}

// takeLocked empties the queue; a stale signal is cleared with it.
func (b *Inbox) takeLocked() []string {
	out := b.queue
	if b.dropped > 0 {
		out = append(out, droppedNoticesText(b.dropped, b.capacity))
	}
	b.queue, b.dropped = nil, 0
	b.clearSignal()
	return out
}

// droppedNoticesText is the line an Inbox adds for the notices it could not hold.
func droppedNoticesText(n, capacity int) string {
	what := "notices were"
	if n == 1 {
		what = "notice was"
	}
	return fmt.Sprintf("(%d more %s dropped: at most %d are kept between turns; use task_list to see every task's status)", n, what, capacity)
}
