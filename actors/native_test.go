package actors_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The actor-native surface: what an embedder may send to Runtime.Registry() is the
// messages.Request set, and no reply to it can corrupt the runtime's state.

func request(t *testing.T, rt *actors.Runtime, msg any) any {
	t.Helper()
	res, err := rt.ActorSystem().Root.RequestFuture(rt.Registry(), msg, 10*time.Second).Result()
	require.NoError(t, err)
	return res
}

func TestActorNativeRequestSentByValueIsAnsweredWithAnError(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	defer f.Finish(messages.Outcome{Status: messages.Completed})
	tests := []struct {
		name string
		msg  any
		err  func(any) error
	}{
		{"GetTask", messages.GetTask{ID: id}, func(m any) error { return m.(*messages.SnapshotReply).Err }},
		{"ListTasks", messages.ListTasks{}, func(m any) error { return m.(*messages.ListReply).Err }},
		{"ReadTask", messages.ReadTask{ID: id}, func(m any) error { return m.(*messages.ReadReply).Err }},
		{"KillTask", messages.KillTask{ID: id}, func(m any) error { return m.(*messages.KillReply).Err }},
		{"WaitTask", messages.WaitTask{ID: id, Timeout: time.Second}, func(m any) error { return m.(*messages.WaitReply).Err }},
	}
	for _, tc := range tests {
		t.Run(tc.name+" by value gets its reply with ErrInvalidArgument", func(t *testing.T) {
			err := tc.err(request(t, rt, tc.msg))
			assert.ErrorIs(t, err, messages.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "send *messages."+tc.name)
		})
	}
	s, err := rt.Tasks().Get(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status, "nothing was done to the task")
	assert.Empty(t, f.Cancels)
}

func TestActorNativeUnknownMessageIsAnsweredWithAnError(t *testing.T) {
	rt := newRT(t)
	type forged struct{ ID messages.TaskID }
	res := request(t, rt, &forged{ID: "bash-1"})
	err, ok := res.(error)
	require.True(t, ok, "got %T", res)
	assert.ErrorIs(t, err, messages.ErrInvalidArgument)
}

func TestActorNativeWaitNeedsAPositiveTimeout(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", false))
	defer f.Finish(messages.Outcome{Status: messages.Completed})
	r := request(t, rt, &messages.WaitTask{ID: id}).(*messages.WaitReply)
	assert.ErrorIs(t, r.Err, messages.ErrInvalidArgument)
}

// The deadline travels inside the request: the runtime ends the wait itself.
func TestActorNativeWaitDeadlineTravelsInTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f := newFake()
		id := start(t, rt, f.spec("bash", "a1", false))
		before := time.Now()
		res, err := rt.ActorSystem().Root.RequestFuture(rt.Registry(),
			&messages.WaitTask{ID: id, Caller: "a1", Timeout: 5 * time.Second}, time.Hour).Result()
		require.NoError(t, err)
		r := res.(*messages.WaitReply)
		require.NoError(t, r.Err)
		assert.Equal(t, messages.Running, r.Snapshot.Status)
		assert.Equal(t, 5*time.Second, time.Since(before), "answered at the request's own deadline")
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "a1")
	})
}

// A requester that gave up (its future timed out) leaves no waiter that would later
// mark the task reported: the task's notice is not lost.
func TestActorNativeAbandonedFutureDoesNotReportTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		notices := make(chan string, 1)
		require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(func(_ context.Context, s string) error {
			notices <- s
			return nil
		})))
		rec := record(rt)
		f := newFake()
		id := start(t, rt, f.spec("bash", "a1", false))
		_, err := rt.ActorSystem().Root.RequestFuture(rt.Registry(),
			&messages.WaitTask{ID: id, Caller: "a1", Timeout: time.Hour}, time.Second).Result()
		require.ErrorIs(t, err, actor.ErrTimeout, "the requester gives up after a second")
		f.Finish(messages.Outcome{Status: messages.Completed})
		got := rec.next(t)
		assert.False(t, got.Reported, "a wait nobody receives does not report the task")
		ok, err := rt.Tasks().Notify(bg, id, "notice")
		require.NoError(t, err)
		assert.True(t, ok, "the notice is still owed")
		assert.Equal(t, "notice", <-notices)
	})
}

// A panic in the registry's own code does not leave a half-updated runtime serving
// calls: the fault is recorded, every task is torn down, every call fails with
// ErrClosed wrapping the panic, and Close returns it.
func TestRegistryPanicClosesTheRuntime(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithRegistryHook(func(m any) {
		if l, ok := m.(*messages.ListTasks); ok && l.Caller == "trigger" {
			panic("registry bug")
		}
	}))
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	register(t, rt, "a1")
	owned, unowned := newFake(), newFake()
	start(t, rt, owned.spec("bash", "a1", true))
	start(t, rt, unowned.spec("bash", "", true))

	_, err = rt.Tasks().List(bg, "trigger")
	require.Error(t, err, "the request that hit the panic fails")
	assert.Equal(t, "runtime closed", <-owned.Cancels, "owned work is torn down")
	assert.Equal(t, "runtime closed", <-unowned.Cancels, "unowned work is torn down")

	err = rt.Close(bg)
	var pe *messages.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "registry", pe.Where)
	assert.Equal(t, "registry bug", pe.Value)
	assert.Contains(t, string(pe.Stack), "native_test.go", "the stack of the panic is kept")
	_, err = rt.Tasks().List(bg, "a1")
	assert.ErrorIs(t, err, messages.ErrClosed)
	assert.ErrorAs(t, err, &pe, "later calls name the fault")
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

// A Spec.Run that blocks holds a disposal at most the settle timeout; when it finally
// returns, the start fails and the work it started is cancelled, awaited and released.
func TestBlockingRunHoldsDisposeAtMostTheSettleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t, actors.WithSettleTimeout(10*time.Second))
		register(t, rt, "a1")
		inRun, release := make(chan struct{}), make(chan struct{})
		f := newFake()
		started := make(chan error, 1)
		go func() {
			_, err := rt.Tasks().Start(bg, messages.Spec{Kind: "bash", Label: "slow", Owner: "a1", Run: func() (messages.Hooks, error) {
				close(inRun)
				<-release
				return f.hooks(false), nil
			}})
			started <- err
		}()
		<-inRun
		before := time.Now()
		require.NoError(t, rt.Agents().Dispose(bg, "a1"))
		assert.Equal(t, 10*time.Second, time.Since(before), "the disposal waited the settle timeout, then went on")
		close(release)
		err := <-started
		assert.ErrorIs(t, err, messages.ErrOwnerUnknown)
		assert.Equal(t, "start abandoned", <-f.Cancels, "the work Run started is cancelled")
		<-f.Released
		list, err := rt.Tasks().List(bg, "")
		require.NoError(t, err)
		assert.Empty(t, list, "no trace of the abandoned start")
	})
}

// Close bounds a blocking Run the same way.
func TestBlockingRunHoldsCloseAtMostTheSettleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, err := actors.NewRuntime(actors.WithSettleTimeout(10 * time.Second))
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
		require.NoError(t, rt.Close(bg))
		assert.Equal(t, actors.Stats{}, rt.Stats())
		close(release)
		assert.ErrorIs(t, <-started, messages.ErrClosed)
		assert.Equal(t, "start abandoned", <-f.Cancels)
		<-f.Released
	})
}
