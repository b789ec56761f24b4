package tools_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// The notice rules. Absence is proven without sleeping: the injector handles
// settlements one at a time, in settlement order, so once a sentinel task started
// after the task under test settled has its notice delivered, the earlier settlement
// was already decided; the next notice must be the sentinel's.

// sentinel starts and settles an owned task and returns the notice it must produce.
func (e *env) sentinel(t *testing.T, owner messages.AgentID) string {
	t.Helper()
	f := newFake(true)
	id := e.start(t, f, "sentinel", "sentinel", owner)
	f.finish(messages.Outcome{Status: messages.Completed})
	return fmt.Sprintf("background task %s (sentinel: sentinel) finished [status: completed]. Read its output with task_output.", id)
}

// expectOnlySentinel asserts that the next notice on ch is the sentinel's.
func (e *env) expectOnlySentinel(t *testing.T, ch <-chan string, owner messages.AgentID) {
	t.Helper()
	want := e.sentinel(t, owner)
	if got := next(t, ch); got != want {
		t.Errorf("next notice = %q, want only the sentinel's %q", got, want)
	}
}

// gatedAgent registers id with an injector that passes each notice to the returned
// channel and then holds the injector until release is called: the test can keep the
// notice injector busy while it arranges what the next settlement will find.
func (e *env) gatedAgent(t *testing.T, id messages.AgentID) (notices <-chan string, release func()) {
	t.Helper()
	ch, gate := make(chan string, 8), make(chan struct{})
	inj := func(ctx context.Context, text string) error {
		ch <- text
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := e.rt.Agents().Register(bg, id, actors.WithInjector(inj)); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return ch, release
}

func TestNotices(t *testing.T) {
	t.Run("an owned unreported task gets exactly one notice", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		f := newFake(true)
		id := e.start(t, f, "bash", "make test", "a1")
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		want := "background task bash-1 (bash: make test) finished [status: completed, exit code: 0]. Read its output with task_output."
		if got := next(t, ch); got != want {
			t.Errorf("notice = %q, want %q", got, want)
		}
		e.expectOnlySentinel(t, ch, "a1")
		e.tt.Close() // waits for the notice in flight, so the counters are final
		if got, want := e.tt.Notices(), (tools.NoticeStats{Delivered: 2}); got != want {
			t.Errorf("Notices() = %+v, want %+v", got, want)
		}
		if r := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q}`, id)); r.Text != "[status: completed, exit code: 0]" {
			t.Errorf("read after the notice = %+v", r)
		}
	})
	t.Run("no notice after task_kill", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		id := e.start(t, newFake(true), "bash", "sleep 100", "a1")
		if r := e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q}`, id)); r.IsError {
			t.Fatal(r.Text)
		}
		e.settled(t, id, "a1")
		e.expectOnlySentinel(t, ch, "a1")
		e.tt.Close() // waits for the notice in flight, so the counters are final
		if got, want := e.tt.Notices(), (tools.NoticeStats{Delivered: 1, Suppressed: 1}); got != want {
			t.Errorf("Notices() = %+v, want %+v", got, want)
		}
	})
	t.Run("no notice after a read returned the terminal state", func(t *testing.T) {
		e := newEnv(t)
		notices, release := e.gatedAgent(t, "a1")
		// The blocker's notice holds the injector, so the task below settles, and is
		// read, before the injector gets to it.
		blocker := newFake(true)
		e.start(t, blocker, "blocker", "blocker", "a1")
		blocker.finish(messages.Outcome{Status: messages.Completed})
		if got, want := next(t, notices), "background task blocker-1 (blocker: blocker) finished [status: completed]. Read its output with task_output."; got != want {
			t.Fatalf("first notice = %q, want the blocker's %q", got, want)
		}
		f := newFake(true)
		id := e.start(t, f, "bash", "make", "a1")
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		e.settled(t, id, "a1")
		if r := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q}`, id)); r.Text != "[status: completed, exit code: 0]" {
			t.Fatalf("read = %+v", r)
		}
		release()
		e.expectOnlySentinel(t, notices, "a1")
	})
	t.Run("no notice after a wait that was pending at settlement", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		began := make(chan messages.TaskID, 1)
		tools.SetOutputCallHook(e.tt, func(id messages.TaskID) { began <- id })
		f := newFake(true)
		id := e.start(t, f, "bash", "make", "a1")
		res := make(chan tools.Result, 1)
		go func() {
			res <- e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":60000}`, id))
		}()
		<-began // the model's wait is under way; the task settles during it
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		if r := <-res; r.Text != "[status: completed, exit code: 0]" {
			t.Fatalf("wait = %+v", r)
		}
		e.expectOnlySentinel(t, ch, "a1")
	})
	t.Run("one notice after an abandoned wait", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		f := newFake(true)
		id := e.start(t, f, "bash", "make", "a1")
		if r := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":1}`, id)); r.Text != "[status: running]" {
			t.Fatalf("timed-out wait = %+v", r)
		}
		f.finish(messages.Outcome{Status: messages.Failed, Detail: "exit code: 2"})
		want := "background task bash-1 (bash: make) finished [status: failed, exit code: 2]. Read its output with task_output."
		if got := next(t, ch); got != want {
			t.Errorf("notice = %q, want %q", got, want)
		}
		e.expectOnlySentinel(t, ch, "a1")
	})
	t.Run("no notice for an unowned task", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		f := newFake(true)
		id := e.start(t, f, "bash", "open", "")
		f.finish(messages.Outcome{Status: messages.Completed})
		e.settled(t, id, "")
		e.expectOnlySentinel(t, ch, "a1")
		e.tt.Close() // waits for the notice in flight, so the counters are final
		if got, want := e.tt.Notices(), (tools.NoticeStats{Delivered: 1, Suppressed: 1}); got != want {
			t.Errorf("Notices() = %+v, want %+v", got, want)
		}
	})
	t.Run("no notice into a disposed agent", func(t *testing.T) {
		e := newEnv(t)
		ch1 := e.agent(t, "a1", 8)
		ch2 := e.agent(t, "a2", 8)
		e.start(t, newFake(true), "bash", "server", "a2")
		if err := e.rt.Agents().Dispose(bg, "a2"); err != nil {
			t.Fatal(err)
		}
		e.expectOnlySentinel(t, ch1, "a1")
		select {
		case n := <-ch2:
			t.Errorf("disposed agent got notice %q", n)
		default:
		}
	})
	t.Run("no notice for a task that settled while its owner was being disposed", func(t *testing.T) {
		e := newEnv(t)
		ch1 := e.agent(t, "a1", 8)
		notices, release := e.gatedAgent(t, "a2")
		blocker := newFake(true)
		e.start(t, blocker, "blocker", "blocker", "a2")
		blocker.finish(messages.Outcome{Status: messages.Completed})
		next(t, notices) // the injector now holds the blocker's notice
		f := newFake(true)
		id := e.start(t, f, "bash", "make", "a2")
		f.finish(messages.Outcome{Status: messages.Completed}) // unreported at settlement
		e.settled(t, id, "a2")
		if err := e.rt.Agents().Dispose(bg, "a2"); err != nil {
			t.Fatal(err)
		}
		release()
		e.expectOnlySentinel(t, ch1, "a1")
		select {
		case n := <-notices:
			t.Errorf("disposed agent got notice %q", n)
		default:
		}
	})
	t.Run("closing the task tools stops notices", func(t *testing.T) {
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		f := newFake(true)
		e.start(t, f, "bash", "make", "a1")
		e.tt.Close()
		f.finish(messages.Outcome{Status: messages.Completed})
		if _, err := e.rt.Tasks().Wait(bg, "bash-1", "a1", time.Minute); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-ch:
			t.Errorf("notice after Close: %q", n)
		default:
		}
	})
}

func TestWaitHandled(t *testing.T) {
	t.Run("returns once the injector handled that many settlements", func(t *testing.T) {
		e := newEnv(t)
		e.agent(t, "a1", 8)
		for _, owner := range []messages.AgentID{"a1", ""} { // one delivered, one suppressed
			f := newFake(true)
			e.start(t, f, "bash", "make", owner)
			f.finish(messages.Outcome{Status: messages.Completed})
		}
		if err := e.tt.WaitHandled(bg, 2); err != nil {
			t.Fatal(err)
		}
		if got, want := e.tt.Notices(), (tools.NoticeStats{Delivered: 1, Suppressed: 1}); got != want {
			t.Errorf("Notices() = %+v, want %+v", got, want)
		}
	})
	t.Run("gives up with the context's error", func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if err := e.tt.WaitHandled(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitHandled = %v, want context.Canceled", err)
		}
	})
}
