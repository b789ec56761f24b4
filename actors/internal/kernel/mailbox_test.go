package kernel

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recordingInvoker records what a mailbox hands it; a user message "panic" panics.
type recordingInvoker struct {
	mu        sync.Mutex
	got       []string
	escalated []string
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.add(fmt.Sprint("sys:", m)) }

func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == "panic" {
		panic("boom")
	}
	r.add(fmt.Sprint(m))
}

func (r *recordingInvoker) EscalateFailure(reason, m any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.escalated = append(r.escalated, fmt.Sprint(reason, " on ", m))
}

func (r *recordingInvoker) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *recordingInvoker) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// heldDispatcher keeps what is scheduled until the test runs it.
type heldDispatcher struct {
	throughput int
	fns        []func()
}

func (d *heldDispatcher) Schedule(fn func()) { d.fns = append(d.fns, fn) }
func (d *heldDispatcher) Throughput() int    { return d.throughput }

func (d *heldDispatcher) runAll() {
	for len(d.fns) > 0 {
		fn := d.fns[0]
		d.fns = d.fns[1:]
		fn()
	}
}

// TestMailboxKeepsProtoactorsContract pins the runtime's mailbox to the contract of
// protoactor's default mailbox, rule by rule.
func TestMailboxKeepsProtoactorsContract(t *testing.T) {
	setup := func() (*Mailbox, *recordingInvoker, *heldDispatcher) {
		m := newMailbox()
		inv, d := &recordingInvoker{}, &heldDispatcher{throughput: 300}
		m.RegisterHandlers(inv, d)
		m.Start()
		return m, inv, d
	}
	t.Run("system messages run before user messages", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage("u1")
		m.PostUserMessage("u2")
		m.PostSystemMessage("s1")
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("schedulings for three posts to an idle mailbox: got %d, want %d", got, want)
		}
		if got, want := m.UserMessageCount(), 2; got != want {
			t.Fatalf("UserMessageCount: got %d, want %d", got, want)
		}
		d.runAll()
		if got, want := inv.take(), []string{"sys:s1", "u1", "u2"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("suspend holds user messages until resume; system messages go on", func(t *testing.T) {
		m, inv, d := setup()
		m.PostSystemMessage(&actor.SuspendMailbox{})
		m.PostUserMessage("u1")
		m.PostSystemMessage("s2")
		d.runAll()
		if got, want := inv.take(), []string{"sys:s2"}; !slices.Equal(got, want) {
			t.Fatalf("while suspended: got %v, want %v", got, want)
		}
		m.PostUserMessage("u2")
		d.runAll()
		if got := inv.take(); len(got) != 0 {
			t.Fatalf("a user message posted while suspended ran: %v", got)
		}
		m.PostSystemMessage(&actor.ResumeMailbox{})
		d.runAll()
		if got, want := inv.take(), []string{"u1", "u2"}; !slices.Equal(got, want) {
			t.Fatalf("after resume: got %v, want %v", got, want)
		}
	})
	t.Run("a panic is escalated with its message and the mailbox goes on", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage("u1")
		m.PostUserMessage("panic")
		m.PostUserMessage("u2")
		d.runAll()
		if got, want := inv.take(), []string{"u1", "u2"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		if got, want := inv.escalated, []string{"boom on panic"}; !slices.Equal(got, want) {
			t.Fatalf("escalated: got %v, want %v", got, want)
		}
	})
	t.Run("a message batch is expanded, then posted itself", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage(testBatch{"b1", "b2"})
		d.runAll()
		if got, want := inv.take(), []string{"b1", "b2", "[b1 b2]"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestHeldMailboxRunsOnRelease pins the held mailbox (an agent's new task actor,
// InlineSpawner): what is posted while it is held is not dispatched; release runs it on
// the caller's goroutine, in the mailbox's order, before it returns (or, not inline,
// hands it to the dispatcher); after release the mailbox dispatches as any other.
func TestHeldMailboxRunsOnRelease(t *testing.T) {
	setup := func() (*Mailbox, *recordingInvoker, *heldDispatcher) {
		m := newMailbox()
		m.held.Store(true)
		inv, d := &recordingInvoker{}, &heldDispatcher{throughput: 300}
		m.RegisterHandlers(inv, d)
		return m, inv, d
	}
	t.Run("posts while held are run by release, not dispatched", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage("u1")
		m.PostSystemMessage("s1")
		if got := len(d.fns); got != 0 {
			t.Fatalf("dispatched while held: %d runs, want 0", got)
		}
		if got := inv.take(); len(got) != 0 {
			t.Fatalf("ran while held: %v", got)
		}
		m.release(true)
		if got, want := inv.take(), []string{"sys:s1", "u1"}; !slices.Equal(got, want) {
			t.Fatalf("release ran %v, want %v", got, want)
		}
		if got := len(d.fns); got != 0 {
			t.Fatalf("release dispatched %d runs, want 0", got)
		}
	})
	t.Run("a release not inline hands what was due to the dispatcher", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage("u1")
		m.release(false)
		if got := inv.take(); len(got) != 0 {
			t.Fatalf("ran on the releasing goroutine: %v", got)
		}
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("dispatched runs: got %d, want %d", got, want)
		}
		d.runAll()
		if got, want := inv.take(), []string{"u1"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("after release the mailbox dispatches", func(t *testing.T) {
		m, inv, d := setup()
		m.release(true) // nothing was due: nothing runs
		if got := inv.take(); len(got) != 0 {
			t.Fatalf("an empty release ran %v", got)
		}
		m.PostUserMessage("u1")
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("dispatched runs: got %d, want %d", got, want)
		}
		d.runAll()
		if got, want := inv.take(), []string{"u1"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestPostAndRun pins a caller running a mailbox itself (Kernel.PostAndAwait): posting to
// an idle mailbox runs it on the caller until done reports true, and hands what is
// left to the dispatcher; posting to a running one only queues the message.
func TestPostAndRun(t *testing.T) {
	setup := func() (*Mailbox, *recordingInvoker, *heldDispatcher) {
		m := newMailbox()
		inv, d := &recordingInvoker{}, &heldDispatcher{throughput: 300}
		m.RegisterHandlers(inv, d)
		return m, inv, d
	}
	t.Run("an idle mailbox runs on the caller until nothing is left", func(t *testing.T) {
		m, inv, d := setup()
		m.postAndRun("u1", func() bool { return false })
		if got, want := inv.take(), []string{"u1"}; !slices.Equal(got, want) {
			t.Fatalf("the caller ran %v, want %v", got, want)
		}
		if got := len(d.fns); got != 0 {
			t.Fatalf("dispatched %d runs, want 0", got)
		}
		if got := m.status.Load(); got != mailboxIdle {
			t.Fatalf("status after the run: %d, want idle", got)
		}
	})
	t.Run("it stops once done and hands the rest to the dispatcher", func(t *testing.T) {
		m, inv, d := setup()
		m.mu.Lock()
		m.user.push("u1")
		m.user.push("u2")
		m.mu.Unlock()
		m.postAndRun("u3", func() bool { inv.mu.Lock(); defer inv.mu.Unlock(); return len(inv.got) >= 1 })
		if got, want := inv.take(), []string{"u1"}; !slices.Equal(got, want) {
			t.Fatalf("the caller ran %v, want %v", got, want)
		}
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("dispatched runs: got %d, want %d", got, want)
		}
		d.runAll()
		if got, want := inv.take(), []string{"u2", "u3"}; !slices.Equal(got, want) {
			t.Fatalf("the dispatcher ran %v, want %v", got, want)
		}
	})
	t.Run("a running mailbox only takes the message", func(t *testing.T) {
		m, inv, d := setup()
		m.PostUserMessage("u1") // scheduled: running
		m.postAndRun("u2", func() bool { return false })
		if got := inv.take(); len(got) != 0 {
			t.Fatalf("the caller ran %v of a running mailbox", got)
		}
		d.runAll()
		if got, want := inv.take(), []string{"u1", "u2"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

type testBatch []any

func (b testBatch) GetMessages() []any { return b }

// TestMailboxNeverStrandsAMessage: posts from many goroutines racing the mailbox going
// idle are all delivered, each sender's in its order, on the runtime's pool.
func TestMailboxNeverStrandsAMessage(t *testing.T) {
	const senders, each = 8, 2000
	p := newPool(2, 5) // a small throughput: many batches, many idle transitions
	defer p.close()
	m := newMailbox()
	var mu sync.Mutex
	next := make([]int, senders)
	var bad []string
	done := make(chan struct{})
	total := 0
	m.RegisterHandlers(invokerFunc(func(msg any) {
		v := msg.([2]int)
		mu.Lock()
		defer mu.Unlock()
		if v[1] != next[v[0]] {
			bad = append(bad, fmt.Sprintf("sender %d: got %d, want %d", v[0], v[1], next[v[0]]))
		}
		next[v[0]] = v[1] + 1
		if total++; total == senders*each {
			close(done)
		}
	}), p)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				m.PostUserMessage([2]int{s, i})
			}
		})
	}
	wg.Wait()
	<-done
	if len(bad) > 0 {
		t.Fatalf("out of order: %v", bad[:min(len(bad), 5)])
	}
}

type invokerFunc func(any)

func (f invokerFunc) InvokeSystemMessage(m any) { f(m) }
func (f invokerFunc) InvokeUserMessage(m any)   { f(m) }
func (f invokerFunc) EscalateFailure(_, _ any)  {}

// TestFifoKeepsOrderThroughCompactionAndReuse drives the queue through its reuse,
// compaction and drop paths and checks it is still first in, first out.
func TestFifoKeepsOrderThroughCompactionAndReuse(t *testing.T) {
	var q fifo
	in, out := 0, 0
	for round, burst := range []int{3, 100, 2000, 70, 5000, 1} {
		for range burst {
			q.push(in)
			in++
			if in%3 == 0 { // interleave pops so that head moves while pushing
				v, ok := q.pop()
				if !ok || v != out {
					t.Fatalf("round %d: pop got %v %v, want %d", round, v, ok, out)
				}
				out++
			}
		}
		for q.len() > 0 {
			v, _ := q.pop()
			if v != out {
				t.Fatalf("round %d: drain got %v, want %d", round, v, out)
			}
			out++
		}
		if _, ok := q.pop(); ok {
			t.Fatalf("round %d: pop from an empty queue succeeded", round)
		}
	}
	if in != out {
		t.Fatalf("pushed %d, popped %d", in, out)
	}
	if cap(q.items) > 1024 {
		t.Fatalf("a drained queue keeps %d slots after a burst", cap(q.items))
	}
}
