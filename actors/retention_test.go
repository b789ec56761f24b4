package actors_test

import (
	"context"
	"errors"
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

// settleInOrder starts one fake task per kind for owner and settles them one after
// another (each settlement observed before the next), returning ids and fakes in
// settlement order.
func settleInOrder(t *testing.T, rt *actors.Runtime, owner messages.AgentID, kinds ...string) ([]messages.TaskID, []*fake) {
	t.Helper()
	var ids []messages.TaskID
	var fakes []*fake
	for _, k := range kinds {
		f := newFake()
		f.Emit("output of " + k)
		ids = append(ids, start(t, rt, f.spec(k, owner, true)))
		fakes = append(fakes, f)
	}
	for i, f := range fakes {
		f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		waitSettled(t, rt, ids[i], owner) // unlike Wait, this reports nothing
	}
	return ids, fakes
}

// waitSettled blocks until id is terminal without marking it reported: a listener
// sees the settlement.
func waitSettled(t *testing.T, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID) {
	t.Helper()
	settled := make(chan struct{})
	var once sync.Once
	stop := rt.Tasks().OnDone(func(s messages.Snapshot) {
		if s.ID == id {
			once.Do(func() { close(settled) })
		}
	})
	defer stop()
	// A settlement published before the listener subscribed shows in the record: it
	// is terminal, or gone already (evicted with no tombstone kept).
	if s, err := rt.Tasks().Get(bg, id, caller); errors.Is(err, messages.ErrTaskNotFound) || (err == nil && s.Status.Terminal()) {
		return
	}
	select {
	case <-settled:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not settle", id)
	}
}

func get(t *testing.T, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID) messages.Snapshot {
	t.Helper()
	s, err := rt.Tasks().Get(bg, id, caller)
	require.NoError(t, err)
	return s
}

// released waits for a fake's Release (the actor stops asynchronously after the
// eviction).
func released(t *testing.T, f *fake) {
	t.Helper()
	select {
	case <-f.Released:
	case <-time.After(time.Minute):
		t.Fatal("Release was not called")
	}
}

func TestEvictionIsOldestSettledFirstAcrossKinds(t *testing.T) {
	rt := newRT(t, actors.WithRetention(2))
	register(t, rt, "a1")
	ids, fakes := settleInOrder(t, rt, "a1", "bash", "subagent", "bash", "subagent")
	// Four settled, two retained: the first two settled are tombstones.
	for i, id := range ids {
		s := get(t, rt, id, "a1")
		assert.Equal(t, i < 2, s.Evicted, "%s evicted", id)
		assert.Equal(t, messages.Completed, s.Status, "a tombstone keeps the final status")
		assert.Equal(t, "exit code: 0", s.Detail)
		assert.False(t, s.Finished.IsZero())
	}
	released(t, fakes[0])
	released(t, fakes[1])
	select {
	case <-fakes[2].Released:
		t.Fatal("a retained record was released")
	default:
	}
	st := rt.Stats()
	assert.Equal(t, 2, st.Retained)
	assert.Equal(t, 2, st.Tombstones)
	assert.Equal(t, 2, st.Tasks, "full records: the retained ones")
}

func TestRunningAndStoppingTasksAreNeverEvicted(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention())
	register(t, rt, "a1")
	running, stopping := newFake(), newFake()
	runID := start(t, rt, running.spec("bash", "a1", true))
	stopping.HoldCancel()
	stopID := start(t, rt, stopping.spec("bash", "a1", true))
	_, _, err := rt.Tasks().Kill(bg, stopID, "a1", "stop")
	require.NoError(t, err)
	settleInOrder(t, rt, "a1", "bash", "bash", "bash")
	assert.False(t, get(t, rt, runID, "a1").Evicted)
	s := get(t, rt, stopID, "a1")
	assert.Equal(t, messages.Stopping, s.Status)
	assert.False(t, s.Evicted)
	stopping.Finish(messages.Outcome{Status: messages.Killed})
	running.Finish(messages.Outcome{Status: messages.Completed})
}

func TestCallsOnATombstone(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention())
	register(t, rt, "a1", "a2")
	ids, _ := settleInOrder(t, rt, "a1", "bash")
	id := ids[0]
	uids, _ := settleInOrder(t, rt, "", "bash")
	uid := uids[0]

	t.Run("the owner gets every answer from the tombstone", func(t *testing.T) {
		s := get(t, rt, id, "a1")
		assert.True(t, s.Evicted)
		assert.False(t, s.Reported, "a Get reports nothing")
		list, err := rt.Tasks().List(bg, "a1")
		require.NoError(t, err)
		require.Len(t, list, 2, "the owner's tombstone and the unowned one")
		assert.True(t, list[0].Evicted)
		r, err := rt.Tasks().Read(bg, id, "a1")
		require.NoError(t, err)
		assert.Equal(t, "", r.Output, "the output is gone")
		assert.True(t, r.Snapshot.Evicted, "the read is flagged evicted")
		assert.True(t, r.Snapshot.Reported, "the read showed the model the end")
		w, err := rt.Tasks().Wait(bg, id, "a1", time.Minute)
		require.NoError(t, err)
		assert.True(t, w.Evicted)
		assert.Equal(t, messages.Completed, w.Status, "a wait returns at once")
		k, _, err := rt.Tasks().Kill(bg, id, "a1", "late")
		require.NoError(t, err)
		assert.Equal(t, messages.KillAlreadyTerminal, k)
	})
	for _, caller := range []messages.AgentID{"a2", "", "stranger"} {
		t.Run(fmt.Sprintf("caller %q gets not-found exactly as for an unknown id", caller), func(t *testing.T) {
			want := "task not found: " + string(id)
			_, err := rt.Tasks().Get(bg, id, caller)
			assert.EqualError(t, err, want)
			_, err = rt.Tasks().Read(bg, id, caller)
			assert.EqualError(t, err, want)
			_, err = rt.Tasks().Wait(bg, id, caller, time.Minute)
			assert.EqualError(t, err, want)
			_, _, err = rt.Tasks().Kill(bg, id, caller, "x")
			assert.EqualError(t, err, want)
			list, err := rt.Tasks().List(bg, caller)
			require.NoError(t, err)
			for _, s := range list {
				assert.NotEqual(t, id, s.ID)
			}
		})
	}
	t.Run("an unowned tombstone is open to every caller", func(t *testing.T) {
		for _, caller := range []messages.AgentID{"a1", "a2", ""} {
			s := get(t, rt, uid, caller)
			assert.True(t, s.Evicted)
		}
	})
}

func TestTombstoneBound(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention(), actors.WithTombstones(2))
	register(t, rt, "a1")
	ids, _ := settleInOrder(t, rt, "a1", "bash", "bash", "bash", "bash", "bash")
	for i, id := range ids {
		_, err := rt.Tasks().Get(bg, id, "a1")
		if i < 3 {
			assert.EqualError(t, err, "task not found: "+string(id), "past the bound, the oldest tombstone is forgotten")
		} else {
			assert.NoError(t, err)
		}
	}
	list, err := rt.Tasks().List(bg, "a1")
	require.NoError(t, err)
	assert.Equal(t, []messages.TaskID{ids[3], ids[4]}, idsOf(list))
	assert.Equal(t, 2, rt.Stats().Tombstones)

	t.Run("without tombstones an evicted id reads as not found at once", func(t *testing.T) {
		rt := newRT(t, actors.WithNoRetention(), actors.WithNoTombstones())
		ids, _ := settleInOrder(t, rt, "", "bash")
		_, err := rt.Tasks().Get(bg, ids[0], "")
		assert.ErrorIs(t, err, messages.ErrTaskNotFound)
		assert.Equal(t, actors.Stats{Actors: rt.Stats().Actors}, rt.Stats())
	})
}

func idsOf(list []messages.Snapshot) []messages.TaskID {
	out := make([]messages.TaskID, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

func TestRetentionOneKeepsTheLastSettled(t *testing.T) {
	rt := newRT(t, actors.WithRetention(1))
	ids, fakes := settleInOrder(t, rt, "", "bash", "bash")
	assert.True(t, get(t, rt, ids[0], "").Evicted)
	r, err := rt.Tasks().Read(bg, ids[1], "")
	require.NoError(t, err)
	assert.Equal(t, "output of bash", r.Output, "the retained record keeps its output")
	released(t, fakes[0])
}

// A task evicted before its notice was delivered still gets exactly one notice.
func TestEvictionDoesNotLoseANotice(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention())
	notices := make(chan string, 4)
	require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(func(_ context.Context, s string) error {
		notices <- s
		return nil
	})))
	// A listener that claims notices, as package tools does.
	stop := rt.Tasks().OnDone(func(s messages.Snapshot) {
		_, _ = rt.Tasks().Notify(bg, s.ID, "notice for "+string(s.ID))
	})
	defer stop()
	f := newFake()
	id := start(t, rt, f.spec("bash", "a1", true))
	f.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, "notice for "+string(id), <-notices)
	assert.True(t, get(t, rt, id, "a1").Evicted, "evicted at settlement, notified after")
	ok, err := rt.Tasks().Notify(bg, id, "again")
	require.NoError(t, err)
	assert.False(t, ok, "exactly one")
}

// A wait pending at settlement gets the terminal snapshot even when the task is
// evicted at once.
func TestEvictionWithAWaitPending(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention())
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	// The wait and the read go from this goroutine through the registry to the task
	// actor in order: once the read is answered, the wait is registered.
	fut := rt.ActorSystem().Root.RequestFuture(rt.Registry(), &messages.WaitTask{ID: id, Timeout: time.Minute}, 2*time.Minute)
	_, err := rt.Tasks().Read(bg, id, "")
	require.NoError(t, err)
	f.Finish(messages.Outcome{Status: messages.Completed})
	res, err := fut.Result()
	require.NoError(t, err)
	w := res.(*messages.WaitReply)
	require.NoError(t, w.Err)
	assert.Equal(t, messages.Completed, w.Snapshot.Status)
	assert.True(t, w.Snapshot.Reported)
	s := get(t, rt, id, "")
	assert.True(t, s.Evicted)
	assert.True(t, s.Reported, "the tombstone keeps the reported mark of the pending wait")
}

// Reads racing an eviction get the output or the tombstone — never an error, never a
// hang.
func TestReadsRacingAnEviction(t *testing.T) {
	for i := 0; i < 20; i++ {
		rt := newRT(t, actors.WithNoRetention())
		f := newFake()
		f.Emit("data")
		id := start(t, rt, f.spec("bash", "", true))
		var wg sync.WaitGroup
		outputs := make(chan messages.ReadResult, 16)
		for range 8 {
			wg.Go(func() {
				r, err := rt.Tasks().Read(bg, id, "")
				assert.NoError(t, err)
				outputs <- r
			})
		}
		f.Finish(messages.Outcome{Status: messages.Completed})
		wg.Wait()
		close(outputs)
		data := 0
		for r := range outputs {
			if r.Output == "data" {
				data++
			} else {
				assert.Equal(t, "", r.Output)
			}
		}
		assert.LessOrEqual(t, data, 1, "the consuming read delivers the data at most once")
	}
}

func TestOwnerDisposalDropsRecordsAndTombstones(t *testing.T) {
	rt := newRT(t, actors.WithRetention(1))
	register(t, rt, "a1")
	ids, _ := settleInOrder(t, rt, "a1", "bash", "bash")
	require.NoError(t, rt.Agents().Dispose(bg, "a1"))
	for _, id := range ids {
		_, err := rt.Tasks().Get(bg, id, "a1")
		assert.ErrorIs(t, err, messages.ErrTaskNotFound)
	}
	assert.Equal(t, actors.Stats{Actors: 1}, rt.Stats())
}

// The tree of live actors is the registry, the agents, the unsettled tasks and at most
// the retained records.
func TestLiveActorsAreBoundedByRetention(t *testing.T) {
	rt := newRT(t, actors.WithRetention(3), actors.WithoutOwnerLimit())
	register(t, rt, "a1")
	var kinds []string
	for range 20 {
		kinds = append(kinds, "bash")
	}
	settleInOrder(t, rt, "a1", kinds...)
	running := newFake()
	start(t, rt, running.spec("bash", "a1", true))
	defer running.Finish(messages.Outcome{Status: messages.Completed})
	// Evicted task actors stop asynchronously; wait for the count to come down.
	deadline := time.Now().Add(time.Minute)
	for rt.Stats().Actors > 1+1+3+1 && time.Now().Before(deadline) {
		runtimeYield()
	}
	st := rt.Stats()
	assert.LessOrEqual(t, st.Actors, 1+1+3+1, "registry + agent + retained + unsettled: %+v", st)
	assert.Equal(t, 3, st.Retained)
	assert.Equal(t, 17, st.Tombstones)
	assert.Equal(t, 1, st.Running)
}

// A disposal tears down every task actor of its owner, and retention may evict (stop)
// one of them at the same moment: the teardown that lands behind the eviction's
// poison pill is never answered, so the disposal must count the actor's stop as its
// answer. Before it did, Dispose hung now and then.
func TestDisposalRacingEvictions(t *testing.T) {
	for i := 0; i < 30; i++ {
		rt := newRT(t, actors.WithNoRetention(), actors.WithoutOwnerLimit())
		register(t, rt, "a1")
		var fakes []*fake
		for range 20 {
			f := newFake()
			start(t, rt, f.spec("bash", "a1", true))
			fakes = append(fakes, f)
		}
		go func() {
			for _, f := range fakes {
				f.Finish(messages.Outcome{Status: messages.Completed})
			}
		}()
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		require.NoError(t, rt.Agents().Dispose(ctx, "a1"), "iteration %d", i)
		cancel()
	}
}

// Close tears down an unowned task whose Done settles while its Cancel is still
// running; retention evicts (stops) the settled task before the Cancel returns, so its
// teardown answer never comes. Close must count the actor's stop as the answer. Before
// it did, Close hung (the model-based test found it).
func TestCloseRacingAnEvictionWithACancelInFlight(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithNoRetention())
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	sub, err := rt.Subscribe(bg)
	require.NoError(t, err)
	done := make(chan messages.Outcome, 1)
	release := make(chan struct{})
	id := start(t, rt, messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) {
		return messages.Hooks{Done: done, Cancel: func(reason string) error {
			done <- messages.Outcome{Status: messages.Killed, Detail: reason}
			<-release // return only once the settled task was evicted
			return nil
		}}, nil
	}})
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		closed <- rt.Close(ctx)
	}()
	collect(t, sub, func(evs []messages.Event) bool {
		return slices.ContainsFunc(evs, func(e messages.Event) bool { return e.Kind == messages.EventTaskEvicted && e.Task.ID == id })
	})
	close(release)
	require.NoError(t, <-closed)
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

// A request whose answer waits on producer code — a kill whose Cancel is still
// running, an input the producer is still writing — is answered even when the task
// settles meanwhile and retention evicts it before that code returns: the actor's
// stop answers it. (The kill hung forever: found by make flake.)
func TestRequestsInFlightAreAnsweredWhenRetentionEvictsTheTask(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(rt *actors.Runtime, id messages.TaskID) error
	}{
		{"a kill whose Cancel is still running", func(rt *actors.Runtime, id messages.TaskID) error {
			res, _, err := rt.Tasks().Kill(bg, id, "a1", "stop")
			if err == nil && res != messages.KillRequested {
				return fmt.Errorf("kill result %q, want %q", res, messages.KillRequested)
			}
			return err
		}},
		{"an input the producer is still writing", func(rt *actors.Runtime, id messages.TaskID) error {
			err := rt.Tasks().Input(bg, id, "a1", []byte("x\n"), false)
			if !errors.Is(err, messages.ErrTaskEnded) {
				return fmt.Errorf("input error %v, want ErrTaskEnded", err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRT(t, actors.WithRetention(1))
			register(t, rt, "a1")
			inProducer, release := make(chan struct{}), make(chan struct{})
			block := func() { close(inProducer); <-release }
			done := make(chan messages.Outcome, 1)
			id := start(t, rt, messages.Spec{Kind: "bash", Label: "x", Owner: "a1", Run: func() (messages.Hooks, error) {
				return messages.Hooks{Done: done,
					Cancel: func(string) error { block(); return nil },
					Input:  func([]byte, bool) error { block(); return nil }}, nil
			}})
			answered := make(chan error, 1)
			go func() { answered <- tc.call(rt, id) }()
			<-inProducer
			done <- messages.Outcome{Status: messages.Completed} // the work ends on its own meanwhile
			settleWait(t, rt, id, "a1")
			for range 2 { // two later settlements: retention 1 evicts the first task
				f := newFake()
				later := start(t, rt, f.spec("bash", "a1", false))
				f.Finish(messages.Outcome{Status: messages.Completed})
				settleWait(t, rt, later, "a1")
			}
			s, err := rt.Tasks().Get(bg, id, "a1")
			require.NoError(t, err)
			require.True(t, s.Evicted, "the task was evicted while its request was in flight")
			close(release)
			select {
			case err := <-answered:
				assert.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("the request was never answered")
			}
		})
	}
}
