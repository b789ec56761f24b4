package actors_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
)

// fake is fake work (package internal/fake) with the runtime tests' shorthand: the
// kind and owner, and whether it is a stream kind, are given at spec time.
type fake struct {
	*fakepkg.Task
	ranCount int // Runs of hand-written specs around this fake's hooks
}

func newFake() *fake { return &fake{Task: fakepkg.New(true)} }

// runs counts the calls of every Run that handed out this fake's hooks.
func (f *fake) runs() int { return f.Runs() + f.ranCount }

// hooks returns the producer hooks; stream selects a stream kind (ReadOutput set).
func (f *fake) hooks(stream bool) messages.Hooks {
	h := f.Hooks()
	if !stream {
		h.ReadOutput = nil
	}
	return h
}

func (f *fake) spec(kind string, owner messages.AgentID, stream bool) messages.Spec {
	s := f.Spec(kind, kind+" job", owner)
	run := s.Run
	s.Run = func() (messages.Hooks, error) {
		h, err := run()
		if !stream {
			h.ReadOutput = nil
		}
		return h, err
	}
	return s
}

var bg = context.Background()

// newRT starts a runtime with a surface attached and, at the end of the test, closes
// it and asserts that nothing is left: no task record, no running task, no agent, no
// actor.
func newRT(t testing.TB, opts ...actors.Option) *actors.Runtime {
	if os.Getenv("TASKRT_DEBUG") != "" {
		opts = append(opts, actors.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	}
	t.Helper()
	rt, err := actors.NewRuntime(opts...)
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		require.NoError(t, rt.Close(ctx))
		s := rt.Stats()
		require.Equal(t, actors.Stats{Abandoned: s.Abandoned}, s, "live state after Close")
	})
	return rt
}

func register(t testing.TB, rt *actors.Runtime, ids ...messages.AgentID) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, rt.Agents().Register(bg, id))
	}
}

func start(t testing.TB, rt *actors.Runtime, s messages.Spec) messages.TaskID {
	t.Helper()
	id, err := rt.Tasks().Start(bg, s)
	require.NoError(t, err)
	return id
}

// settleWait waits (generously) for a task to settle and returns its snapshot.
func settleWait(t testing.TB, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID) messages.Snapshot {
	t.Helper()
	s, err := rt.Tasks().Wait(bg, id, caller, time.Minute)
	require.NoError(t, err)
	require.True(t, s.Status.Terminal(), "task %s did not settle: %+v", id, s)
	return s
}

// recorder is an OnDone listener that records settlements in order.
type recorder struct {
	mu   sync.Mutex
	got  []messages.Snapshot
	ch   chan messages.Snapshot
	stop func()
}

func record(rt *actors.Runtime) *recorder {
	r := &recorder{ch: make(chan messages.Snapshot, 4096)}
	r.stop = rt.Tasks().OnDone(func(s messages.Snapshot) {
		r.mu.Lock()
		r.got = append(r.got, s)
		r.mu.Unlock()
		r.ch <- s
	})
	return r
}

func (r *recorder) next(t testing.TB) messages.Snapshot {
	t.Helper()
	select {
	case s := <-r.ch:
		return s
	case <-time.After(time.Minute):
		t.Fatal("no settlement within a minute")
		return messages.Snapshot{}
	}
}

func (r *recorder) ids() []messages.TaskID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]messages.TaskID, len(r.got))
	for i, s := range r.got {
		out[i] = s.ID
	}
	return out
}

var errBoom = errors.New("boom")

// runtimeYield lets other goroutines run while a test spins on a condition.
func runtimeYield() { runtime.Gosched() }
