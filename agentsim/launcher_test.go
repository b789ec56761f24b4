package agentsim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

// newRuntime is a runtime closed (and checked empty) when the test ends.
func newRuntime(t *testing.T) *actors.Runtime {
	t.Helper()
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rt
}

// registerOn is a register function on rt whose children run run and dispose through
// the runtime.
func registerOn(rt *actors.Runtime, run func(ctx context.Context, req subagent.Request) subagent.Result) func(context.Context, subagent.Request) (agentsim.Child, error) {
	return func(ctx context.Context, req subagent.Request) (agentsim.Child, error) {
		var opts []actors.AgentOption
		if req.Parent != "" {
			opts = append(opts, actors.WithParent(req.Parent))
		}
		if err := rt.Agents().Register(ctx, req.Child, opts...); err != nil {
			return agentsim.Child{}, err
		}
		return agentsim.Child{
			Run:     func(ctx context.Context) subagent.Result { return run(ctx, req) },
			Dispose: func(ctx context.Context) error { return rt.Agents().Dispose(ctx, req.Child) },
		}, nil
	}
}

// untilCancelled is a child that runs until its run is cancelled.
func untilCancelled(ctx context.Context, _ subagent.Request) subagent.Result {
	<-ctx.Done()
	return subagent.Result{Stop: subagent.StopAborted, Detail: context.Cause(ctx).Error()}
}

func TestLauncher(t *testing.T) {
	ctx := testContext(t)
	t.Run("a run answers Wait, as often as asked", func(t *testing.T) {
		rt := newRuntime(t)
		l := agentsim.NewLauncher(registerOn(rt, func(_ context.Context, req subagent.Request) subagent.Result {
			return subagent.Result{Stop: subagent.StopCompleted, Output: "answer to " + req.Prompt}
		}))
		run, err := l.Launch(ctx, subagent.Request{Child: "sub-1", Brief: subagent.Brief{Prompt: "p"}})
		if err != nil {
			t.Fatal(err)
		}
		want := subagent.Result{Stop: subagent.StopCompleted, Output: "answer to p"}
		for i := range 2 {
			if got := run.Wait(); got != want {
				t.Errorf("Wait %d = %+v, want %+v", i+1, got, want)
			}
		}
		if err := run.Dispose(ctx); err != nil {
			t.Errorf("Dispose = %v", err)
		}
		if err := l.Close(ctx, "done"); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	t.Run("Cancel ends the run with the reason as its cause", func(t *testing.T) {
		rt := newRuntime(t)
		l := agentsim.NewLauncher(registerOn(rt, untilCancelled))
		run, err := l.Launch(ctx, subagent.Request{Child: "sub-1"})
		if err != nil {
			t.Fatal(err)
		}
		run.Cancel("owner disposed")
		run.Cancel("a second cancel changes nothing")
		if got, want := run.Wait(), (subagent.Result{Stop: subagent.StopAborted, Detail: "owner disposed"}); got != want {
			t.Errorf("Wait = %+v, want %+v", got, want)
		}
		if err := run.Dispose(ctx); err != nil {
			t.Errorf("Dispose = %v", err)
		}
		if err := l.Close(ctx, "done"); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	t.Run("a failed registration starts nothing", func(t *testing.T) {
		rt := newRuntime(t)
		ran := false
		l := agentsim.NewLauncher(registerOn(rt, func(context.Context, subagent.Request) subagent.Result {
			ran = true
			return subagent.Result{}
		}))
		_, err := l.Launch(ctx, subagent.Request{Parent: "nobody", Child: "nobody/sub-1"})
		if !errors.Is(err, messages.ErrOwnerUnknown) {
			t.Errorf("Launch under an unknown parent = %v, want ErrOwnerUnknown", err)
		}
		if err := l.Close(ctx, "done"); err != nil {
			t.Errorf("Close = %v", err)
		}
		if ran {
			t.Error("the run of a child that was never registered ran")
		}
	})
	t.Run("a child already gone is disposed without error", func(t *testing.T) {
		rt := newRuntime(t)
		if err := rt.Agents().Register(ctx, "a1"); err != nil {
			t.Fatal(err)
		}
		l := agentsim.NewLauncher(registerOn(rt, untilCancelled))
		run, err := l.Launch(ctx, subagent.Request{Parent: "a1", Child: "a1/sub-1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Agents().Dispose(ctx, "a1"); err != nil { // takes a1/sub-1 with it
			t.Fatal(err)
		}
		run.Cancel("owner disposed")
		run.Wait()
		if err := run.Dispose(ctx); err != nil {
			t.Errorf("Dispose of a child its parent's disposal took = %v, want nil", err)
		}
		if err := rt.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := run.Dispose(ctx); err != nil {
			t.Errorf("Dispose after the runtime closed = %v, want nil", err)
		}
		if err := l.Close(ctx, "done"); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	t.Run("Close cancels the runs still going, waits for them and refuses new ones", func(t *testing.T) {
		rt := newRuntime(t)
		l := agentsim.NewLauncher(registerOn(rt, untilCancelled))
		run, err := l.Launch(ctx, subagent.Request{Child: "sub-1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx, "runtime closed"); err != nil {
			t.Fatal(err)
		}
		if got, want := run.Wait(), (subagent.Result{Stop: subagent.StopAborted, Detail: "runtime closed"}); got != want {
			t.Errorf("Wait after Close = %+v, want %+v", got, want)
		}
		if _, err := l.Launch(ctx, subagent.Request{Child: "sub-2"}); !errors.Is(err, messages.ErrClosed) {
			t.Errorf("Launch after Close = %v, want ErrClosed", err)
		}
		if err := l.Close(ctx, "again"); err != nil {
			t.Errorf("a second Close = %v", err)
		}
		if err := run.Dispose(ctx); err != nil {
			t.Errorf("Dispose = %v", err)
		}
	})
	t.Run("a register function that returns no Run is a failed launch", func(t *testing.T) {
		l := agentsim.NewLauncher(func(context.Context, subagent.Request) (agentsim.Child, error) {
			return agentsim.Child{}, nil
		})
		if _, err := l.Launch(ctx, subagent.Request{Child: "sub-1"}); err == nil {
			t.Error("Launch succeeded without a Run")
		}
		if err := l.Close(ctx, "done"); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
}

// testContext is a context that ends with the test, or after a minute: a test that
// hits that bound has found a hang, not a slow machine.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
