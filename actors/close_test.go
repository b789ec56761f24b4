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

	"github.com/asynkron/protoactor-go/actor"

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

	t.Run("every task, owned or not, was cancelled with runtime closed, settled and released", func(t *testing.T) {
		for id, f := range fakes {
			assert.Equal(t, "runtime closed", <-f.Cancels, id)
			select {
			case <-f.Released:
			default:
				t.Errorf("%s was not released by the time Close returned", id)
			}
		}
	})
	t.Run("listeners saw none of the settlements Close caused", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, seen)
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
		_, _, calls["kill"] = rt.Tasks().Kill(bg, "bash-1", "", "")
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
		assert.Empty(t, seen)
	})
}

// Listeners are silent from the moment Close begins: not for a settlement Close's
// teardown causes, nor for one that happens during or after Close — here a producer
// whose Cancel failed, so that teardown force-failed the task, and whose Done arrives
// only after Close returned.
func TestListenersAreSilentFromTheMomentCloseBegins(t *testing.T) {
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	register(t, rt, "a1")
	calls := make(chan messages.Snapshot, 16)
	rt.Tasks().OnDone(func(s messages.Snapshot) { calls <- s })

	before := newFake()
	beforeID := start(t, rt, before.spec("bash", "a1", false))
	before.Finish(messages.Outcome{Status: messages.Completed})
	require.Equal(t, beforeID, (<-calls).ID, "a settlement before Close reaches the listener")

	stubborn := newFake() // its Cancel fails: teardown force-fails it, Done comes later
	stubborn.FailCancel(errBoom)
	start(t, rt, stubborn.spec("bash", "a1", false))
	cooperative := newFake()
	start(t, rt, cooperative.spec("bash", "", false))

	require.NoError(t, rt.Close(bg))
	stubborn.Finish(messages.Outcome{Status: messages.Killed}) // the late Done
	assert.Equal(t, "runtime closed", <-cooperative.Cancels)
	assert.Equal(t, "runtime closed", <-stubborn.Cancels)
	assert.Empty(t, calls, "no listener call for a settlement during or after Close")
}

func TestCloseWithStartInFlightTearsItDown(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithoutOwnerLimit())
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
	assert.Equal(t, "runtime closed", <-f.Cancels)
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
	f.Finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt2, id, "")
	require.NoError(t, rt2.Close(bg))
	assert.Equal(t, actors.Stats{}, rt2.Stats())
	assert.Equal(t, actors.Stats{Actors: 1}, rt1.Stats(), "the other runtime in the same system is untouched")
	require.NoError(t, rt1.Close(bg))
}

// One rule for every option: a zero or negative value keeps the default.
func TestZeroOrNegativeOptionsKeepTheDefault(t *testing.T) {
	for _, opt := range []actors.Option{
		actors.WithSettleTimeout(0), actors.WithSettleTimeout(-time.Second),
		actors.WithOwnerLimit(0), actors.WithOwnerLimit(-3),
		actors.WithLogger(nil), actors.WithActorSystem(nil),
	} {
		rt := newRT(t, opt)
		var err error
		for i := 0; i <= actors.DefaultOwnerLimit && err == nil; i++ {
			_, err = rt.Tasks().Start(bg, newFake().spec("bash", "", false))
		}
		var le *messages.LimitError
		require.ErrorAs(t, err, &le, "the default cap holds")
		assert.Equal(t, actors.DefaultOwnerLimit, le.Limit)
	}
}

// The registry speaks the request types of package messages, for embedders that
// prefer actor-native access to the typed client.
func TestActorNativeAccessThroughRegistryPID(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	f.Emit("hello")
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

	f.Finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt, id, "")
}

// An agent counts in Stats as soon as Register returns (it is counted from its
// spawn, not from its Started, which runs later on its own mailbox), and a disposed
// one no longer does once Dispose returns.
func TestAnAgentCountsInStatsAsSoonAsRegisterReturns(t *testing.T) {
	rt := newRT(t)
	const n = 200
	for i := range n {
		register(t, rt, messages.AgentID(fmt.Sprintf("a%d", i)))
		if got, want := rt.Stats().Actors, 1+i+1; got != want { // the registry and i+1 agents
			t.Fatalf("Stats().Actors right after registering a%d = %d, want %d", i, got, want)
		}
	}
	for i := range n {
		require.NoError(t, rt.Agents().Dispose(bg, messages.AgentID(fmt.Sprintf("a%d", i))))
	}
	assert.Equal(t, 1, rt.Stats().Actors, "the registry alone after every Dispose returned")
}

// Nothing of the runtime's own actor system outlives Close: protoactor runs a
// goroutine for one throttle interval after a dead letter, and Close waits it out.
// Under testing/synctest, whose clock stops once the test's goroutine returns, a
// goroutine left waiting on a timer is a deadlock that fails the bubble — what a
// dead letter shortly before Close did to tools' synctest tests in a flake run.
func TestNoGoroutineOfTheActorSystemOutlivesClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, err := actors.NewRuntime()
		require.NoError(t, err)
		sys := rt.ActorSystem()
		sys.Root.Send(actor.NewPID(sys.Address(), "nobody"), "a message for no one") // a dead letter
		require.NoError(t, rt.Close(bg))
	})
}
