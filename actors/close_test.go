package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

func TestCloseSettlesEverythingThenRefusesEverything(t *testing.T) {
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	register(t, rt, "a1", "a2")
	cleanupRan := make(chan struct{})
	_, err = rt.Agents().OnCleanup(bg, "a1", func(context.Context) error { close(cleanupRan); return nil })
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []messages.Snapshot
	rt.Tasks().OnDone(func(s messages.Snapshot) { mu.Lock(); seen = append(seen, s); mu.Unlock() })
	fakes := map[messages.TaskID]*fake{}
	for _, owner := range []messages.AgentID{"a1", "a2", "", ""} {
		f := newFake()
		fakes[start(t, rt, f.spec("bash", owner, true))] = f
	}
	require.NoError(t, rt.Close(bg))

	t.Run("every task, owned or not, was cancelled with runtime closed and settled", func(t *testing.T) {
		for id, f := range fakes {
			assert.Equal(t, "runtime closed", <-f.cancels, id)
			<-f.released
		}
		mu.Lock()
		defer mu.Unlock()
		assert.Len(t, seen, len(fakes), "listeners saw the settlements Close caused")
		for _, s := range seen {
			assert.Equal(t, messages.Killed, s.Status)
			assert.True(t, s.Reported)
		}
	})
	t.Run("agents' cleanups ran", func(t *testing.T) { <-cleanupRan })
	t.Run("nothing is left", func(t *testing.T) {
		assert.Equal(t, actors.Stats{}, rt.Stats())
	})
	t.Run("every call returns ErrClosed", func(t *testing.T) {
		calls := map[string]error{}
		_, calls["start"] = rt.Tasks().Start(bg, newFake().spec("bash", "", false))
		_, calls["get"] = rt.Tasks().Get(bg, "bash-1", "")
		_, calls["list"] = rt.Tasks().List(bg, "")
		_, calls["read"] = rt.Tasks().Read(bg, "bash-1", "")
		_, calls["kill"] = rt.Tasks().Kill(bg, "bash-1", "", "")
		_, calls["wait"] = rt.Tasks().Wait(bg, "bash-1", "", time.Second)
		calls["register"] = rt.Agents().Register(bg, "a3")
		_, calls["cleanup"] = rt.Agents().OnCleanup(bg, "a1", func(context.Context) error { return nil })
		calls["dispose"] = rt.Agents().Dispose(bg, "a1")
		for name, err := range calls {
			assert.ErrorIs(t, err, messages.ErrClosed, name)
		}
	})
	t.Run("a second Close is harmless", func(t *testing.T) { assert.NoError(t, rt.Close(bg)) })
	t.Run("no listener fires after Close", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		assert.Len(t, seen, len(fakes))
	})
}

func TestCloseWithStartInFlightTearsItDown(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithOwnerLimit(0))
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	inRun, release := make(chan struct{}), make(chan struct{})
	f := newFake()
	started := make(chan error, 1)
	go func() {
		_, err := rt.Tasks().Start(bg, messages.Spec{Kind: "bash", Label: "slow", Run: func() (messages.Hooks, error) {
			close(inRun)
			<-release
			return f.hooks(false), nil
		}})
		started <- err
	}()
	<-inRun
	closed := make(chan error, 1)
	go func() { closed <- rt.Close(bg) }()
	for {
		_, err := rt.Tasks().Start(bg, newFake().spec("bash", "", false))
		if err != nil {
			require.ErrorIs(t, err, messages.ErrClosed)
			break
		}
	}
	close(release)
	require.NoError(t, <-started, "the start in flight commits")
	require.NoError(t, <-closed)
	assert.Equal(t, "runtime closed", <-f.cancels)
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

func TestCloseGivesUpAtContextAndCanBeRetried(t *testing.T) {
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	register(t, rt, "a1")
	release := make(chan struct{})
	_, err = rt.Agents().OnCleanup(bg, "a1", func(ctx context.Context) error {
		<-release
		return nil
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	assert.ErrorIs(t, rt.Close(ctx), context.Canceled)
	close(release)
	require.NoError(t, rt.Close(bg))
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

func TestRuntimeInCallerSuppliedActorSystem(t *testing.T) {
	rt1, err := actors.NewRuntime()
	require.NoError(t, err)
	_, err = rt1.Tasks().List(bg, "") // a round trip: rt1's registry has started
	require.NoError(t, err)
	rt2, err := actors.NewRuntime(actors.WithActorSystem(rt1.ActorSystem()))
	require.NoError(t, err)
	rt2.Tasks().AttachSurface("test")
	f := newFake()
	id := start(t, rt2, f.spec("bash", "", false))
	f.finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt2, id, "")
	require.NoError(t, rt2.Close(bg))
	assert.Equal(t, actors.Stats{}, rt2.Stats())
	assert.Equal(t, actors.Stats{Actors: 1}, rt1.Stats(), "the other runtime in the same system is untouched")
	require.NoError(t, rt1.Close(bg))
}

func TestNewRuntimeRejectsBadOptions(t *testing.T) {
	_, err := actors.NewRuntime(actors.WithSettleTimeout(0))
	assert.ErrorIs(t, err, messages.ErrInvalidArgument)
}

// The registry speaks the request types of package messages, for embedders that
// prefer actor-native access to the typed client.
func TestActorNativeAccessThroughRegistryPID(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	f.emit("hello")
	root := rt.ActorSystem().Root

	res, err := root.RequestFuture(rt.Registry(), &messages.GetTask{ID: id}, 10*time.Second).Result()
	require.NoError(t, err)
	snap := res.(*messages.SnapshotReply)
	require.NoError(t, snap.Err)
	assert.Equal(t, messages.Running, snap.Snapshot.Status)

	res, err = root.RequestFuture(rt.Registry(), &messages.ReadTask{ID: id}, 10*time.Second).Result()
	require.NoError(t, err)
	assert.Equal(t, "hello", res.(*messages.ReadReply).Result.Output, "routed to the task actor, answered directly")

	res, err = root.RequestFuture(rt.Registry(), &messages.GetTask{ID: id, Caller: "stranger-owned"}, 10*time.Second).Result()
	require.NoError(t, err)
	assert.NoError(t, res.(*messages.SnapshotReply).Err, "an unowned task is open to every caller")

	f.finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt, id, "")
}
