package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// notices registers owner with an injector that hands every notice to the channel.
func notices(t *testing.T, rt *actors.Runtime, owner messages.AgentID) <-chan string {
	t.Helper()
	ch := make(chan string, 16)
	require.NoError(t, rt.Agents().Register(bg, owner, actors.WithInjector(func(_ context.Context, s string) error { ch <- s; return nil })))
	return ch
}

func TestRestore(t *testing.T) {
	t.Run("the task keeps its id and start time, and the runtime's numbering never reuses the number", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f, s, h := running("a1")
		began := time.Now().Add(-time.Hour).Truncate(time.Second)
		require.NoError(t, rt.Tasks().Restore(bg, s, actors.Restored{ID: "bash-7", Started: began}, h))
		snap, err := rt.Tasks().Get(bg, "bash-7", "a1")
		require.NoError(t, err)
		assert.Equal(t, messages.Running, snap.Status)
		assert.True(t, snap.Started.Equal(began), "started %v, want %v", snap.Started, began)
		g := newFake()
		assert.Equal(t, messages.TaskID("bash-8"), start(t, rt, g.spec("bash", "a1", true)))
		f.Emit("still running\n")
		r, err := rt.Tasks().Read(bg, "bash-7", "a1")
		require.NoError(t, err)
		assert.Equal(t, "still running\n", r.Output)
		f.Finish(messages.Outcome{Status: messages.Completed})
		g.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, "bash-7", "a1")
	})
	t.Run("work that ended meanwhile settles at once, and its notice is due unless the model had seen its end", func(t *testing.T) {
		for _, reported := range []bool{false, true} {
			rt := newRT(t)
			got := notices(t, rt, "a1")
			settled := record(rt)
			f, s, h := running("a1")
			f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
			require.NoError(t, rt.Tasks().Restore(bg, s, actors.Restored{ID: "bash-3", Reported: reported}, h))
			snap := settled.next(t)
			assert.Equal(t, messages.Completed, snap.Status)
			assert.Equal(t, reported, snap.Reported)
			sent, err := rt.Tasks().Notify(bg, "bash-3", "bash-3 completed")
			require.NoError(t, err)
			assert.Equal(t, !reported, sent, "reported=%v", reported)
			if sent {
				assert.Equal(t, "bash-3 completed", <-got)
			}
			settled.stop()
		}
	})
	t.Run("an id in use, a tombstone's, or not of the kind is refused; nothing is recorded and the work is untouched", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		used := start(t, rt, newFake().spec("bash", "a1", true))
		for _, id := range []messages.TaskID{used, "subagent-2", "bash-0", "bash-x", "bash-"} {
			f, s, h := running("a1")
			err := rt.Tasks().Restore(bg, s, actors.Restored{ID: id}, h)
			require.ErrorIs(t, err, messages.ErrInvalidSpec, "id %q", id)
			assert.Empty(t, f.Cancels, "id %q: the work was cancelled", id)
		}
		list, err := rt.Tasks().List(bg, "a1")
		require.NoError(t, err)
		assert.Len(t, list, 1)
	})
}

func TestWithIDs(t *testing.T) {
	t.Run("starts and adoptions take their numbers from next", func(t *testing.T) {
		var mu sync.Mutex
		n := 40
		rt := newRT(t, actors.WithIDs(func(_ context.Context, kind string) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			n += 2
			return n, nil
		}))
		register(t, rt, "a1")
		assert.Equal(t, messages.TaskID("bash-42"), start(t, rt, newFake().spec("bash", "a1", true)))
		_, s, h := running("a1")
		id, err := rt.Tasks().Adopt(bg, s, h)
		require.NoError(t, err)
		assert.Equal(t, messages.TaskID("bash-44"), id)
	})
	t.Run("an error of next fails the start before Run, with the error", func(t *testing.T) {
		errStore := errors.New("store unreachable")
		rt := newRT(t, actors.WithIDs(func(context.Context, string) (int, error) { return 0, errStore }))
		register(t, rt, "a1")
		f := newFake()
		_, err := rt.Tasks().Start(bg, f.spec("bash", "a1", true))
		require.ErrorIs(t, err, errStore)
		assert.Zero(t, f.runs(), "Run was called")
		list, err := rt.Tasks().List(bg, "a1")
		require.NoError(t, err)
		assert.Empty(t, list)
	})
}

func TestSnapshotCarriesTheProducersRef(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1")
	f := newFake()
	s := f.spec("bash", "a1", true)
	run := s.Run
	s.Run = func() (messages.Hooks, error) { h, err := run(); h.Ref = "box1/k-17"; return h, err }
	id := start(t, rt, s)
	snap, err := rt.Tasks().Get(bg, id, "a1")
	require.NoError(t, err)
	assert.Equal(t, "box1/k-17", snap.Ref)
	f.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, "box1/k-17", settleWait(t, rt, id, "a1").Ref)
}
