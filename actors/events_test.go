package actors_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// collect reads events until stop says so (or a minute passes).
func collect(t *testing.T, sub *actors.Subscription, stop func([]messages.Event) bool) []messages.Event {
	t.Helper()
	var got []messages.Event
	deadline := time.After(time.Minute)
	for !stop(got) {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("events so far: %d; the expected ones did not come", len(got))
		}
	}
	return got
}

// Every task's events come in order — started, output…, stopping (when cancelled),
// settled, evicted — under concurrent starts, output, kills and disposals.
func TestEventOrderPerTask(t *testing.T) {
	rt := newRT(t, actors.WithRetention(2), actors.WithoutOwnerLimit())
	sub, err := rt.Subscribe(bg)
	require.NoError(t, err)
	defer sub.Close()
	owners := []messages.AgentID{"a1", "a2", "a3"}
	register(t, rt, owners...)
	var mu sync.Mutex
	var ids []messages.TaskID
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			owner := owners[g%len(owners)]
			for i := range 8 {
				f := newFake()
				f.Buffered()
				id := start(t, rt, f.spec("bash", owner, true))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				f.Emit("line one\n")
				f.Emit("line two\n")
				switch i % 3 {
				case 0:
					_, _, err := rt.Tasks().Kill(bg, id, owner, "stop")
					assert.NoError(t, err)
				case 1:
					f.Finish(messages.Outcome{Status: messages.Completed})
				default: // left running: settled by its owner's disposal below
				}
			}
		})
	}
	wg.Wait()
	for _, o := range owners {
		require.NoError(t, rt.Agents().Dispose(bg, o))
	}
	settled := func(evs []messages.Event) bool {
		k := kinds(evs)
		return count(k, messages.EventTaskSettled) == len(ids) && count(k, messages.EventAgentDisposed) == len(owners)
	}
	evs := collect(t, sub, settled)
	perTask := map[messages.TaskID][]messages.EventKind{}
	for _, e := range evs {
		require.NotEqual(t, messages.EventOverflow, e.Kind, "the buffer is large enough")
		if e.Task.ID != "" {
			perTask[e.Task.ID] = append(perTask[e.Task.ID], e.Kind)
		}
	}
	for _, id := range ids {
		kinds := perTask[id]
		require.NotEmpty(t, kinds, id)
		// started first; output (any number) and at most one stopping while it runs
		// (a stopping process may still print); settled once; then evicted, if at all.
		assert.Equal(t, messages.EventTaskStarted, kinds[0], "%s: %v", id, kinds)
		settledAt := slices.Index(kinds, messages.EventTaskSettled)
		require.Positive(t, settledAt, "%s settled: %v", id, kinds)
		for _, k := range kinds[1:settledAt] {
			assert.Contains(t, []messages.EventKind{messages.EventTaskOutput, messages.EventTaskStopping}, k, "%s before settling: %v", id, kinds)
		}
		assert.LessOrEqual(t, count(kinds, messages.EventTaskStopping), 1, "%s: %v", id, kinds)
		for _, k := range kinds[settledAt+1:] {
			assert.Equal(t, messages.EventTaskEvicted, k, "%s after settling only its eviction: %v", id, kinds)
		}
		assert.LessOrEqual(t, len(kinds[settledAt+1:]), 1, "%s: %v", id, kinds)
	}
	for _, o := range owners {
		assert.True(t, slices.ContainsFunc(evs, func(e messages.Event) bool {
			return e.Kind == messages.EventAgentDisposed && e.Agent == o
		}), "%s disposed", o)
	}
}

// A task whose output was written and whose outcome was delivered before its actor
// started watching (an instant command that printed) still gets its output event,
// and before its settlement: the actor accounts for the output already written
// before it starts watching Done.
func TestOutputWrittenBeforeTheWatchComesBeforeTheSettlement(t *testing.T) {
	const tasks = 500
	rt := newRT(t, actors.WithoutOwnerLimit(), actors.WithRetention(2*tasks))
	sub, err := rt.Subscribe(bg, actors.WithEventBuffer(4096))
	require.NoError(t, err)
	defer sub.Close()
	register(t, rt, "a1")
	ids := map[messages.TaskID]bool{}
	for range tasks {
		f := newFake()
		f.Buffered()
		f.Emit("done\n")
		f.Finish(messages.Outcome{Status: messages.Completed})
		ids[start(t, rt, f.spec("bash", "a1", true))] = true
	}
	evs := collect(t, sub, func(evs []messages.Event) bool {
		return count(kinds(evs), messages.EventTaskSettled) == tasks
	})
	perTask := map[messages.TaskID][]messages.EventKind{}
	for _, e := range evs {
		if ids[e.Task.ID] {
			perTask[e.Task.ID] = append(perTask[e.Task.ID], e.Kind)
		}
	}
	want := []messages.EventKind{messages.EventTaskStarted, messages.EventTaskOutput, messages.EventTaskSettled}
	for id := range ids {
		if got := perTask[id]; !slices.Equal(got, want) {
			t.Errorf("%s: events %v, want %v", id, got, want)
		}
	}
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// A subscriber that does not read misses events, is told how many, and never blocks
// the runtime.
func TestEventOverflowIsSignalledNeverBlocking(t *testing.T) {
	rt := newRT(t, actors.WithoutOwnerLimit())
	sub, err := rt.Subscribe(bg, actors.WithEventBuffer(2))
	require.NoError(t, err)
	defer sub.Close()
	for i := range 10 {
		require.NoError(t, rt.Agents().Register(bg, messages.AgentID(fmt.Sprint("a", i))), "the registry answers while the subscriber sleeps")
	}
	first := collect(t, sub, func(e []messages.Event) bool { return len(e) == 2 })
	assert.Equal(t, messages.EventAgentRegistered, first[0].Kind)
	// The buffer has room again: the next event comes after an overflow notice.
	require.NoError(t, rt.Agents().Register(bg, "late"))
	next := collect(t, sub, func(e []messages.Event) bool { return len(e) == 2 })
	assert.Equal(t, messages.EventOverflow, next[0].Kind)
	assert.Equal(t, 8, next[0].Missed, "registrations 3 to 10 were missed")
	assert.Equal(t, messages.AgentID("late"), next[1].Agent)
}

// An owner-scoped subscription sees its owner and its descendants, and nothing of
// other owners or unowned tasks.
func TestOwnerScopedSubscription(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1", "a2")
	sub, err := rt.Subscribe(bg, actors.ForOwner("a1"))
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, rt.Agents().Register(bg, "a1/sub", actors.WithParent("a1")))
	for _, owner := range []messages.AgentID{"a2", "", "a1/sub", "a1"} {
		f := newFake()
		start(t, rt, f.spec("bash", owner, true))
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
	evs := collect(t, sub, func(e []messages.Event) bool {
		return count(kinds(e), messages.EventTaskSettled) == 2
	})
	for _, e := range evs {
		assert.Contains(t, []messages.AgentID{"a1", "a1/sub"}, e.Agent, "%+v", e)
	}
	assert.Equal(t, messages.EventAgentRegistered, evs[0].Kind)
	assert.Equal(t, messages.AgentID("a1/sub"), evs[0].Agent)
	assert.Equal(t, messages.AgentID("a1"), evs[0].Parent)
}

func kinds(evs []messages.Event) []messages.EventKind {
	out := make([]messages.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestSubscriptionEnds(t *testing.T) {
	t.Run("Close closes the channel", func(t *testing.T) {
		rt := newRT(t)
		sub, err := rt.Subscribe(bg)
		require.NoError(t, err)
		sub.Close()
		sub.Close()
		for range sub.Events() {
		}
	})
	t.Run("the runtime's Close closes the channel; later subscriptions fail", func(t *testing.T) {
		rt, err := actors.NewRuntime()
		require.NoError(t, err)
		sub, err := rt.Subscribe(bg)
		require.NoError(t, err)
		require.NoError(t, rt.Close(bg))
		for range sub.Events() {
		}
		_, err = rt.Subscribe(bg)
		assert.ErrorIs(t, err, messages.ErrClosed)
	})
}

// Output the producer wrote before the task's actor started watching (between Run
// and the actor's start) still raises an output event.
func TestOutputWrittenBeforeTheWatchRaisesAnEvent(t *testing.T) {
	rt := newRT(t)
	sub, err := rt.Subscribe(bg)
	require.NoError(t, err)
	defer sub.Close()
	f := newFake()
	f.Buffered()
	f.Emit("early\n") // before Start: before any OnGrow callback is set
	id := start(t, rt, f.spec("bash", "", true))
	evs := collect(t, sub, func(e []messages.Event) bool { return count(kinds(e), messages.EventTaskOutput) == 1 })
	out := evs[len(evs)-1]
	assert.Equal(t, id, out.Task.ID)
	assert.Equal(t, int64(len("early\n")), out.Bytes)
	f.Emit("late\n")
	f.Finish(messages.Outcome{Status: messages.Completed})
	evs = collect(t, sub, func(e []messages.Event) bool { return count(kinds(e), messages.EventTaskSettled) == 1 })
	assert.Equal(t, int64(len("early\nlate\n")), evs[len(evs)-1].Bytes, "the settled event carries the output's size")
}
