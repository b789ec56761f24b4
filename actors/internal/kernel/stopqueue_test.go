package kernel

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvictedActorsStopManyToADispatcherRun pins stopQueue: evicted records' actors
// take their PoisonPill in one dispatcher run, in order behind what they hold, and
// no pushed mailbox is left without its pill.
func TestEvictedActorsStopManyToADispatcherRun(t *testing.T) {
	pill := fmt.Sprint(poisonPill)
	setup := func(n int) ([]*Mailbox, []*recordingInvoker, *heldDispatcher) {
		d := &heldDispatcher{throughput: 300}
		boxes, invs := make([]*Mailbox, n), make([]*recordingInvoker, n)
		for i := range n {
			boxes[i], invs[i] = newMailbox(), &recordingInvoker{}
			boxes[i].RegisterHandlers(invs[i], d)
		}
		return boxes, invs, d
	}
	t.Run("mailboxes pushed before the run share it", func(t *testing.T) {
		boxes, invs, d := setup(3)
		var q stopQueue
		for _, b := range boxes {
			q.push(b, nil)
		}
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("scheduled %d runs for 3 evictions, want %d", got, want)
		}
		d.runAll()
		for i, inv := range invs {
			if got, want := inv.take(), []string{pill}; !slices.Equal(got, want) {
				t.Errorf("actor %d got %q, want %q", i, got, want)
			}
		}
	})
	t.Run("a mailbox pushed during the run is taken by it", func(t *testing.T) {
		boxes, invs, d := setup(2)
		var q stopQueue
		late, scheduled := boxes[1], -1
		boxes[0].RegisterHandlers(invokerFunc(func(m any) {
			invs[0].add(fmt.Sprint(m))
			if late != nil {
				q.push(late, nil) // an eviction while the run stops the first actor
				late, scheduled = nil, len(d.fns)
			}
		}), d)
		q.push(boxes[0], nil)
		d.runAll()
		if scheduled != 0 {
			t.Errorf("the push during the run scheduled %d more runs, want 0", scheduled)
		}
		for i, inv := range invs {
			if got, want := inv.take(), []string{pill}; !slices.Equal(got, want) {
				t.Errorf("actor %d got %q, want %q", i, got, want)
			}
		}
		if q.running || len(q.boxes) != 0 {
			t.Fatalf("after the run: running %v with %d queued, want idle and empty", q.running, len(q.boxes))
		}
	})
	t.Run("a push after the run ended schedules a new one", func(t *testing.T) {
		boxes, invs, d := setup(2)
		var q stopQueue
		q.push(boxes[0], nil)
		d.runAll()
		q.push(boxes[1], nil)
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("scheduled %d runs after the first ended, want %d", got, want)
		}
		d.runAll()
		if got, want := invs[1].take(), []string{pill}; !slices.Equal(got, want) {
			t.Fatalf("the second actor got %v, want %v", got, want)
		}
	})
	t.Run("a busy actor takes the pill behind its messages", func(t *testing.T) {
		boxes, invs, d := setup(1)
		var q stopQueue
		boxes[0].PostUserMessage("read") // scheduled: the mailbox is running
		q.push(boxes[0], nil)
		d.runAll()
		if got, want := invs[0].take(), []string{"read", pill}; !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("the pill comes before what is sent after the push", func(t *testing.T) {
		boxes, invs, d := setup(1)
		var q stopQueue
		q.push(boxes[0], nil)
		boxes[0].PostUserMessage("after") // a producer call's result, say
		d.runAll()
		if got, want := invs[0].take(), []string{pill, "after"}; !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("the parent's run that the stop makes due runs on the stop's goroutine", func(t *testing.T) {
		boxes, invs, d := setup(2)
		task, parent := boxes[0], boxes[1]
		task.RegisterHandlers(invokerFunc(func(m any) {
			invs[0].add(fmt.Sprint(m))
			parent.PostSystemMessage("terminated") // what protoactor tells a stopped actor's parent
		}), d)
		var q stopQueue
		q.push(task, parent)
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("scheduled %d runs, want %d", got, want)
		}
		d.fns[0]() // the queue's run, nothing else
		d.fns = d.fns[1:]
		if got := len(d.fns); got != 0 {
			t.Fatalf("the parent's run went to the dispatcher (%d runs scheduled), want it run by the queue", got)
		}
		if got, want := invs[1].take(), []string{"sys:terminated"}; !slices.Equal(got, want) {
			t.Fatalf("the parent got %v, want %v", got, want)
		}
		if got := parent.inline.Load(); got != nil {
			t.Fatal("the parent's mailbox is still marked after the stop")
		}
		parent.PostUserMessage("later") // after the stop: dispatched as usual
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("a later post scheduled %d runs, want %d", got, want)
		}
		d.runAll()
		if got, want := invs[1].take(), []string{"later"}; !slices.Equal(got, want) {
			t.Fatalf("the parent got %v, want %v", got, want)
		}
	})
}

// TestStopQueueLosesNoPostToAParent: with a real dispatcher and a poster on another
// goroutine racing the marks the stops put on a parent's mailbox, in rounds that each
// start with the parent idle, every message reaches the parent.
func TestStopQueueLosesNoPostToAParent(t *testing.T) {
	p := newPool(4, 300)
	defer p.close()
	const rounds, stops, posts = 200, 10, 20
	var got atomic.Int64
	seen := make(chan struct{}, 1)
	parent := newMailbox()
	parent.RegisterHandlers(invokerFunc(func(any) {
		got.Add(1)
		select {
		case seen <- struct{}{}:
		default:
		}
	}), p)
	var q stopQueue
	for r := range rounds {
		var wg sync.WaitGroup
		wg.Go(func() {
			for range stops {
				task := newMailbox()
				task.RegisterHandlers(invokerFunc(func(any) { parent.PostSystemMessage("terminated") }), p)
				q.push(task, parent)
			}
		})
		wg.Go(func() {
			for range posts {
				parent.PostUserMessage("x")
			}
		})
		wg.Wait()
		want := int64((r + 1) * (stops + posts))
		deadline := time.After(30 * time.Second)
		for got.Load() < want {
			select {
			case <-seen:
			case <-deadline:
				t.Fatalf("round %d: the parent got %d of %d messages: a run was lost", r, got.Load(), want)
			}
		}
	}
}
