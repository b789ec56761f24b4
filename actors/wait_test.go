package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

func TestWaitManyConcurrentWaitersAllGetTheTerminalSnapshot(t *testing.T) {
	rt := newRT(t)
	rec := record(rt)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", false))
	const n = 50
	var wg sync.WaitGroup
	results := make(chan messages.Snapshot, n)
	registered := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			registered <- struct{}{}
			s, err := rt.Tasks().Wait(bg, id, "", time.Minute)
			assert.NoError(t, err)
			results <- s
		}()
	}
	for i := 0; i < n; i++ {
		<-registered
	}
	f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	wg.Wait()
	close(results)
	for s := range results {
		assert.Equal(t, messages.Completed, s.Status)
		assert.Equal(t, "exit code: 0", s.Detail)
	}
	assert.Equal(t, id, rec.next(t).ID)
}

// Timeouts run on testing/synctest's virtual clock: the waits below take no real time.
func TestWaitTimeoutReturnsRunningSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		before := time.Now()
		s, err := rt.Tasks().Wait(bg, id, "", 30*time.Second)
		require.NoError(t, err, "a timed-out wait is a success")
		assert.Equal(t, messages.Running, s.Status)
		assert.Equal(t, 30*time.Second, time.Since(before))
		got, err := rt.Tasks().Get(bg, id, "")
		require.NoError(t, err)
		assert.False(t, got.Reported, "a timed-out wait does not report")
		f.Finish(messages.Outcome{Status: messages.Completed})
	})
}

func TestWaitContextCancelEndsOnlyTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		rec := record(rt)
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		s, err := rt.Tasks().Wait(ctx, id, "", time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, messages.Running, s.Status)
		assert.Empty(t, f.Cancels, "the task is untouched")
		f.Finish(messages.Outcome{Status: messages.Completed})
		assert.False(t, rec.next(t).Reported, "an abandoned wait does not mark the task reported")
	})
}

func TestWaitPendingAtSettlementMarksReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		rec := record(rt)
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		waited := make(chan messages.Snapshot)
		go func() {
			s, err := rt.Tasks().Wait(bg, id, "", time.Minute)
			assert.NoError(t, err)
			waited <- s
		}()
		synctest.Wait() // the wait is registered with the task actor and blocked
		f.Finish(messages.Outcome{Status: messages.Completed})
		s := <-waited
		assert.True(t, s.Reported)
		assert.True(t, rec.next(t).Reported, "no notice for a task a pending wait collected")
	})
}

func TestWaitRejectsNonPositiveTimeout(t *testing.T) {
	rt := newRT(t)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := rt.Tasks().Wait(bg, "bash-1", "", d)
		require.ErrorIs(t, err, messages.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "invalid wait timeout "+d.String())
	}
}

func TestWaitAbortedAfterSettlementStillReturnsTerminal(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", false))
	f.Finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt, id, "")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	// A done context is refused up front...
	_, err := rt.Tasks().Wait(ctx, id, "", time.Second)
	require.ErrorIs(t, err, context.Canceled)
	// ...but a wait whose context ends after the task settled returns the terminal
	// snapshot: the abandon races the answer, and the answer wins.
	s, err := rt.Tasks().Wait(bg, id, "", time.Nanosecond)
	require.NoError(t, err)
	assert.Equal(t, messages.Completed, s.Status)
}

func TestSettleTimeoutAbandonsTaskThatNeverSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t, actors.WithSettleTimeout(5*time.Second))
		register(t, rt, "a1")
		rec := record(rt)
		f := newFake()
		f.HoldCancel()
		id := start(t, rt, f.spec("bash", "a1", false))
		before := time.Now()
		require.NoError(t, rt.Agents().Dispose(bg, "a1"))
		assert.Equal(t, 5*time.Second, time.Since(before), "disposal waited exactly the settle timeout")
		s := rec.next(t)
		assert.Equal(t, id, s.ID)
		assert.Equal(t, messages.Failed, s.Status)
		assert.Equal(t, "abandoned: did not settle within 5s after cancel", s.Detail)
		assert.True(t, s.Reported)
		assert.Equal(t, 1, rt.Stats().Abandoned)
		assert.Equal(t, "owner disposed", <-f.Cancels)
	})
}

// TestWaitAndKillOnASettledTaskAreAnsweredFromTheIndex pins the settled-task rule of
// the registry: a wait or a kill on a task that has settled (its actor still holds its
// record) is answered by the registry from its index — the terminal snapshot, marked
// reported; already-terminal — with no round trip through the task actor (no
// taskChanged comes back), and the task's own later replies show it reported, and no
// completion notice goes out for it.
func TestWaitAndKillOnASettledTaskAreAnsweredFromTheIndex(t *testing.T) {
	for _, op := range []string{"wait", "kill"} {
		t.Run(op, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			rt := newRT(t, actors.WithRegistryHook(func(m any) {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%T", m))
				mu.Unlock()
			}))
			register(t, rt, "a1")
			rec := record(rt)
			f := newFake()
			id := start(t, rt, f.spec("bash", "a1", true))
			f.Finish(messages.Outcome{Status: messages.Completed})
			settled := rec.next(t) // the registry indexed the settlement
			require.False(t, settled.Reported)
			mu.Lock()
			seen = nil
			mu.Unlock()

			switch op {
			case "wait":
				s, err := rt.Tasks().Wait(bg, id, "a1", time.Minute)
				require.NoError(t, err)
				assert.Equal(t, messages.Completed, s.Status)
				assert.True(t, s.Reported, "a wait that returned the end marks the task reported")
			case "kill":
				res, _, err := rt.Tasks().Kill(bg, id, "a1", "late")
				require.NoError(t, err)
				assert.Equal(t, messages.KillAlreadyTerminal, res)
			}
			// The task actor learnt it: its own reply (Read is routed to it, after the
			// registry's word) shows the snapshot reported, and it has nothing to tell
			// the registry back.
			rd, err := rt.Tasks().Read(bg, id, "a1")
			require.NoError(t, err)
			assert.True(t, rd.Snapshot.Reported, "the task actor's snapshot after the registry answered")
			g, err := rt.Tasks().Get(bg, id, "a1") // after anything the task sent back
			require.NoError(t, err)
			assert.True(t, g.Reported)
			delivered, err := rt.Tasks().Notify(bg, id, "notice")
			require.NoError(t, err)
			assert.False(t, delivered, "no notice for a task the model saw end")

			mu.Lock()
			defer mu.Unlock()
			assert.NotContains(t, seen, "*actors.taskChanged", "the answer made no round trip through the task actor")
			assert.Contains(t, seen, "*messages.ReadTask")
		})
	}
}
