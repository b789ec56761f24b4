package actors

import (
	"fmt"
	"testing"

	"github.com/taskrt/taskrt/messages"
)

// TestRetentionQueueIsFIFOAcrossItsRing pins ring, the queue behind the retained
// records and the tombstones: ids come out in the order they went in, through
// growth and wrap-around, and a popped slot keeps no id.
func TestRetentionQueueIsFIFOAcrossItsRing(t *testing.T) {
	var q ring[messages.TaskID]
	var want []messages.TaskID
	next := 0
	push := func(n int) {
		for range n {
			id := messages.TaskID(fmt.Sprintf("t-%d", next))
			next++
			q.push(id)
			want = append(want, id)
		}
	}
	pop := func(n int) {
		for range n {
			if got := q.pop(); got != want[0] {
				t.Fatalf("pop = %q, want %q", got, want[0])
			}
			want = want[1:]
		}
	}
	// Fill, drain part, wrap around, grow while wrapped, drain all.
	for _, step := range []struct{ push, pop int }{{5, 2}, {6, 7}, {20, 3}, {3, 10}, {0, 12}, {9, 0}, {0, 9}} {
		push(step.push)
		pop(step.pop)
		if got, want := q.len(), len(want); got != want {
			t.Fatalf("len = %d, want %d", got, want)
		}
	}
	for i, id := range q.items {
		if id != "" {
			t.Fatalf("emptied ring holds %q at %d", id, i)
		}
	}
}
