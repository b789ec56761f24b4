package actors

import (
	"fmt"
	"slices"
	"testing"
)

// TestEvictedActorsStopManyToADispatcherRun pins stopQueue: evicted records' actors
// take their PoisonPill in one dispatcher run, in order behind what they hold, and
// no pushed mailbox is left without its pill.
func TestEvictedActorsStopManyToADispatcherRun(t *testing.T) {
	pill := fmt.Sprint(poisonPill)
	setup := func(n int) ([]*mailbox, []*recordingInvoker, *heldDispatcher) {
		d := &heldDispatcher{throughput: 300}
		boxes, invs := make([]*mailbox, n), make([]*recordingInvoker, n)
		for i := range n {
			boxes[i], invs[i] = newMailbox().(*mailbox), &recordingInvoker{}
			boxes[i].RegisterHandlers(invs[i], d)
		}
		return boxes, invs, d
	}
	t.Run("mailboxes pushed before the run share it", func(t *testing.T) {
		boxes, invs, d := setup(3)
		var q stopQueue
		for _, b := range boxes {
			q.push(b)
		}
		if got, want := len(d.fns), 1; got != want {
			t.Fatalf("scheduled %d runs for 3 evictions, want %d", got, want)
		}
		d.runAll()
		for i, inv := range invs {
			if got, want := inv.take(), []string{pill}; !slices.Equal(got, want) {
				t.Errorf("actor %d got %v, want %v", i, got, want)
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
				q.push(late) // an eviction while the run stops the first actor
				late, scheduled = nil, len(d.fns)
			}
		}), d)
		q.push(boxes[0])
		d.runAll()
		if scheduled != 0 {
			t.Errorf("the push during the run scheduled %d more runs, want 0", scheduled)
		}
		for i, inv := range invs {
			if got, want := inv.take(), []string{pill}; !slices.Equal(got, want) {
				t.Errorf("actor %d got %v, want %v", i, got, want)
			}
		}
		if q.running || len(q.boxes) != 0 {
			t.Fatalf("after the run: running %v with %d queued, want idle and empty", q.running, len(q.boxes))
		}
	})
	t.Run("a push after the run ended schedules a new one", func(t *testing.T) {
		boxes, invs, d := setup(2)
		var q stopQueue
		q.push(boxes[0])
		d.runAll()
		q.push(boxes[1])
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
		q.push(boxes[0])
		d.runAll()
		if got, want := invs[0].take(), []string{"read", pill}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
