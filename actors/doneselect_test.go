package actors_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The Done channels of live tasks are watched by a few goroutines, not one each
// (a parked goroutine costs more than the rest of a task's record): with 200 live
// tasks the runtime holds about 200/32 watcher goroutines. And however the tasks end — each its own outcome, in any order, some killed,
// some with Done closed empty — each settles exactly once with what its producer
// delivered, and every watcher goroutine is gone after Close (goleak).
func TestLiveTasksShareTheirDoneWatchers(t *testing.T) {
	const n = 200
	rt := newRT(t, actors.WithoutOwnerLimit())
	var (
		mu      sync.Mutex
		settled = map[messages.TaskID][]messages.Snapshot{}
		all     = make(chan struct{})
	)
	defer rt.Tasks().OnDone(func(s messages.Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		settled[s.ID] = append(settled[s.ID], s)
		if len(settled) == n {
			close(all)
		}
	})()

	before := runtime.NumGoroutine()
	fakes := make([]*fake, n)
	ids := make([]messages.TaskID, n)
	for i := range fakes {
		fakes[i] = newFake()
		id, err := rt.Tasks().Start(bg, fakes[i].spec("job", "", true))
		require.NoError(t, err)
		ids[i] = id
	}
	// Every task is watched once its actor started: a Get answers after Started.
	for _, id := range ids {
		_, err := rt.Tasks().Get(bg, id, "")
		require.NoError(t, err)
	}
	grown := runtime.NumGoroutine() - before
	// 200/32 groups, and a little room for the runtime's own goroutines coming and
	// going (timers, the dispatcher); one goroutine per task would add 200.
	assert.LessOrEqual(t, grown, n/10, "goroutines added by %d live tasks", n)

	want := map[messages.TaskID]messages.Outcome{}
	for _, i := range rand.Perm(n) {
		switch {
		case i%5 == 0:
			_, _, err := rt.Tasks().Kill(bg, ids[i], "", "test")
			require.NoError(t, err)
			want[ids[i]] = messages.Outcome{Status: messages.Killed}
		case i%7 == 0:
			fakes[i].CloseDone()
			want[ids[i]] = messages.Outcome{Status: messages.Failed, Detail: "producer contract violation: Done closed without an outcome"}
		default:
			o := messages.Outcome{Status: messages.Completed, Detail: fmt.Sprintf("exit code: %d", i)}
			fakes[i].Finish(o)
			want[ids[i]] = o
		}
	}
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("not every task settled")
	}
	mu.Lock()
	defer mu.Unlock()
	for id, o := range want {
		require.Len(t, settled[id], 1, "%s settles once", id)
		got := settled[id][0]
		assert.Equal(t, o.Status, got.Status, id)
		if o.Status != messages.Killed {
			assert.Equal(t, o.Detail, got.Detail, id)
		}
	}
}
