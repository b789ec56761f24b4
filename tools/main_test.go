package tools_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/actors"
	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var bg = context.Background()

// golden compares got with testdata/<name>.golden, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run go test -update if the change is intended)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// env is a runtime with the task tools attached, torn down and checked at the end of
// the test: the task tools are closed, the runtime is closed, and nothing is left
// (no task record, running task, agent or actor).
type env struct {
	rt  *actors.Runtime
	tt  *tools.TaskTools
	set tools.Set
}

func newEnv(t testing.TB, opts ...tools.TaskOption) *env {
	t.Helper()
	rt := newRuntime(t)
	tt := tools.NewTaskTools(rt, opts...)
	t.Cleanup(tt.Close) // runs before the runtime's Close (cleanups run last-in first-out)
	set, err := tools.NewSet(tt.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return &env{rt: rt, tt: tt, set: set}
}

// newRuntime starts a runtime and registers its Close and the zero-state check.
func newRuntime(t testing.TB) *actors.Runtime {
	t.Helper()
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got, want := rt.Stats(), (actors.Stats{}); got != want {
			t.Errorf("Stats after Close = %+v, want %+v", got, want)
		}
	})
	return rt
}

// call runs a tool through the set with JSON arguments.
func (e *env) call(caller messages.AgentID, name, args string) tools.Result {
	return e.set.Call(bg, caller, name, json.RawMessage(args))
}

// agent registers id with an injector that sends every notice into the returned
// channel (buffered; pass 0 for an injector that blocks until the test receives).
func (e *env) agent(t testing.TB, id messages.AgentID, buffer int) chan string {
	t.Helper()
	ch := make(chan string, buffer)
	inj := func(ctx context.Context, text string) error {
		select {
		case ch <- text:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := e.rt.Agents().Register(bg, id, actors.WithInjector(inj)); err != nil {
		t.Fatal(err)
	}
	return ch
}

// start starts a fake task and returns its id.
func (e *env) start(t testing.TB, f *fake, kind, label string, owner messages.AgentID) messages.TaskID {
	t.Helper()
	id, err := e.rt.Tasks().Start(bg, f.spec(kind, label, owner))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// settled waits for a task to settle without reading it (a Get per settlement seen
// by a listener of the test's own), so that the task's reported flag is untouched.
func (e *env) settled(t *testing.T, id messages.TaskID, owner messages.AgentID) {
	t.Helper()
	ch := make(chan struct{}, 1)
	unsub := e.rt.Tasks().OnDone(func(s messages.Snapshot) {
		if s.ID == id {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	defer unsub()
	if s, err := e.rt.Tasks().Get(bg, id, owner); err == nil && s.Status.Terminal() {
		return
	}
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("task %s did not settle", id)
	}
}

// next receives the next notice, or fails the test after a generous bound.
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(time.Minute):
		t.Fatal("no notice within a minute")
		return ""
	}
}

// fake is the shared fake producer (internal/fake) under the names these tests
// use: it streams what the test emits, settles with the outcome the test gives (or,
// when cancelled, as killed by SIGTERM), and can be told to fail or hold its Cancel.
type fake struct{ *fakepkg.Task }

func newFake(stream bool) *fake { return &fake{fakepkg.New(stream)} }

func (f *fake) emit(s string)             { f.Emit(s) }
func (f *fake) finish(o messages.Outcome) { f.Finish(o) }
func (f *fake) failCancel(err error)      { f.FailCancel(err) }
func (f *fake) holdCancel()               { f.HoldCancel() } // Cancel succeeds without settling
func (f *fake) runs() int                 { return f.Runs() }
func (f *fake) spec(kind, label string, owner messages.AgentID) messages.Spec {
	return f.Spec(kind, label, owner)
}

// lines joins strings with newlines, for readable wants.
func lines(s ...string) string { return strings.Join(s, "\n") }
