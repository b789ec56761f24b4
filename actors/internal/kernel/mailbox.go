package kernel

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Mailbox is the protoactor Mailbox of the runtime's actors (Kernel.Props). Code
// outside the kernel holds one only as a handle: to hand a message to its actor and
// run it (Kernel.PostAndAwait) or to stop its actor (Kernel.Stop).
//
// protoactor's unbounded mailbox costs five allocations to make (a ring queue for
// user messages, a linked queue for system messages), one per system message (a
// queue node), and one per scheduling (the method value it hands the dispatcher):
// about a dozen allocations of a task lifecycle, which is short and touches four
// mailboxes. This one keeps both queues as slices under one mutex (a push after
// warm-up allocates nothing) and binds its run function once.
//
// It keeps protoactor's mailbox contract: system messages before user messages;
// SuspendMailbox stops user messages until ResumeMailbox (system messages go on);
// at most the dispatcher's throughput messages, then the goroutine yields; a panic
// that escapes the invoker is escalated with the message; a message posted while
// the mailbox goes idle is never stranded (the status is re-checked after idling).
// Runtime actors never post MessageBatch values, but a batch is expanded as
// protoactor does (its messages, then the batch itself).
type Mailbox struct {
	mu        sync.Mutex
	system    fifo
	user      fifo
	status    atomic.Int32 // mailboxIdle or mailboxRunning
	suspended atomic.Bool  // written by the run loop only
	// held keeps a scheduled run from the dispatcher until release, which runs it
	// on its caller's goroutine (an agent's task actors: see Spawner).
	held    atomic.Bool
	pending atomic.Bool // a run was due while held: release runs it
	// inline, while set, takes a run that was due instead of the dispatcher: the
	// goroutine that set it runs the mailbox once done (stopQueue.run).
	inline atomic.Pointer[inlineRuns]

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	run        func() // processMessages, bound once
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

// newMailbox makes a mailbox; Kernel.Props hands it to protoactor.
func newMailbox() *Mailbox {
	m := &Mailbox{}
	m.system.items = m.system.inline[:0]
	m.user.items = m.user.inline[:0]
	m.run = m.processMessages
	return m
}

// PostUserMessage queues a user message and schedules a run if none is due.
func (m *Mailbox) PostUserMessage(msg any) {
	if batch, ok := msg.(actor.MessageBatch); ok {
		for _, b := range batch.GetMessages() {
			m.PostUserMessage(b)
		}
	}
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, b := range batch.GetMessages() {
				m.PostUserMessage(b)
			}
		}
	}
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// PostSystemMessage queues a system message (it runs before any user message) and
// schedules a run if none is due.
func (m *Mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers is protoactor's: the actor's invoker and the dispatcher.
func (m *Mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start does nothing: the mailbox is ready once made.
func (m *Mailbox) Start() {}

// UserMessageCount is the number of user messages waiting.
func (m *Mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len()
}

func (m *Mailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		if m.held.Load() {
			m.pending.Store(true)
			return
		}
		if r := m.inline.Load(); r != nil && r.take(m) {
			return
		}
		m.dispatcher.Schedule(m.run)
	}
}

// inlineRuns collects, while open, the runs of the mailboxes whose inline points to
// it. It is closed under its lock, so a run is either taken before the close (the
// closer runs it) or handed to the dispatcher after it: none is lost.
type inlineRuns struct {
	mu    sync.Mutex
	open  bool
	boxes []*Mailbox
}

func (r *inlineRuns) take(m *Mailbox) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open {
		return false
	}
	r.boxes = append(r.boxes, m)
	return true
}

// begin opens r for m; end closes it and runs on the caller what it took.
func (r *inlineRuns) begin(m *Mailbox) {
	r.mu.Lock()
	r.open = true
	r.mu.Unlock()
	m.inline.Store(r)
}

func (r *inlineRuns) end(m *Mailbox) {
	m.inline.Store(nil)
	r.mu.Lock()
	r.open = false
	boxes := r.boxes
	r.boxes = r.boxes[:0]
	r.mu.Unlock()
	for _, b := range boxes {
		b.processMessages()
	}
}

// release ends held. A run that was due meanwhile runs on the calling goroutine
// (inline) or goes to the dispatcher. The run owns the mailbox (its status is
// running), so anything posted meanwhile is taken by it or, once it went idle,
// dispatched as usual.
func (m *Mailbox) release(inline bool) {
	m.held.Store(false)
	if !m.pending.Swap(false) {
		return
	}
	if inline {
		m.processMessages()
		return
	}
	m.dispatcher.Schedule(m.run)
}

// enqueue posts msg as a user message without scheduling a run: whoever enqueues
// must see that one runs (runIfIdle), unless a later post schedules it first.
func (m *Mailbox) enqueue(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
}

// runIfIdle runs the mailbox on the calling goroutine until nothing is left, if it is
// idle; a running mailbox takes what it holds before it goes idle.
func (m *Mailbox) runIfIdle() { m.runIfIdleUntil(nil) }

// runIfIdleUntil is runIfIdle stopping early as runUntil does with done.
func (m *Mailbox) runIfIdleUntil(done func() bool) {
	if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		return
	}
	if m.held.Load() { // never for an agent's or a spawned task's mailbox; kept for the contract
		m.pending.Store(true)
		return
	}
	m.runUntil(done)
}

// processMessages runs batches until the mailbox is empty (or suspended with only
// user messages left) and idle.
func (m *Mailbox) processMessages() { m.runUntil(nil) }

// postAndRun posts msg as a user message and, if that found the mailbox idle, runs
// the mailbox on the calling goroutine until done reports true or nothing is left;
// what is left then goes to the dispatcher. A caller about to block on the answer to
// msg thus runs the actor itself instead of handing it to a worker and waiting to be
// woken (a start's spawn by its agent: Kernel.PostAndAwait). It runs at most one
// throughput's worth of messages before it hands over.
func (m *Mailbox) postAndRun(msg any, done func() bool) {
	m.enqueue(msg)
	m.runIfIdleUntil(done)
}

// runUntil runs batches as processMessages does; with done, it stops early — once
// done reports true or a throughput's worth of messages ran — and hands what is left
// to the dispatcher (the mailbox stays running for it).
func (m *Mailbox) runUntil(done func() bool) {
	for {
		if m.batch(done) {
			m.mu.Lock()
			more := m.system.len() > 0 || (!m.suspended.Load() && m.user.len() > 0)
			m.mu.Unlock()
			if more {
				m.dispatcher.Schedule(m.run)
				return
			}
		}
		m.status.Store(mailboxIdle)
		m.mu.Lock()
		more := m.system.len() > 0 || (!m.suspended.Load() && m.user.len() > 0)
		m.mu.Unlock()
		// A message posted after the batch ended and before the status went idle
		// found it running and did not schedule: take it here.
		if !more || !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return
		}
		if done != nil && done() {
			m.dispatcher.Schedule(m.run)
			return
		}
	}
}

// batch runs messages until none is left (or only user messages while suspended).
// With done, it returns true, messages possibly left, as soon as done reports true
// after a message or a throughput's worth ran.
func (m *Mailbox) batch(done func() bool) (early bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if done != nil && (i >= t || done()) {
			return true
		}
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		m.mu.Lock()
		if sys, ok := m.system.pop(); ok {
			m.mu.Unlock()
			msg = sys
			switch sys.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(sys)
			}
			continue
		}
		if m.suspended.Load() {
			m.mu.Unlock()
			return
		}
		user, ok := m.user.pop()
		m.mu.Unlock()
		if !ok {
			return
		}
		msg = user
		m.invoker.InvokeUserMessage(user)
	}
}

// fifo is a queue on a slice: popped slots are cleared, the slice is reused once
// drained and compacted when most of it is popped, and a large one is dropped once
// drained, so that a burst does not pin its memory. Its first slots are inline (a
// task actor's mailbox rarely holds more than two messages at once), so that a new
// mailbox allocates nothing for its first messages.
type fifo struct {
	items  []any
	head   int
	inline [2]any
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) push(m any) {
	if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, m)
}

func (q *fifo) pop() (any, bool) {
	if q.head == len(q.items) {
		return nil, false
	}
	m := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		if cap(q.items) > 1024 {
			q.items = q.inline[:0]
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	return m, true
}
