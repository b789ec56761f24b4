//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// movingRunner is a bash runner whose commands are fake work that prints "early"
// and runs until the test finishes it; it records how many tasks the runtime held
// when the work started (none: the id comes only with the move).
type movingRunner struct {
	work         *fakepkg.Task
	tasksAtStart func() int
	seenTasks    int
}

func (m *movingRunner) Spec(owner messages.AgentID, c bash.Command) messages.Spec {
	s := m.work.Spec(bash.Kind, c.Command, owner)
	run := s.Run
	s.Run = func() (messages.Hooks, error) {
		m.seenTasks = m.tasksAtStart()
		h, err := run()
		m.work.Emit("early\n")
		return h, err
	}
	return s
}

func (m *movingRunner) Run(context.Context, bash.Command, time.Duration) (bash.Result, error) {
	return bash.Result{}, fmt.Errorf("the foreground path must not be taken with background_after_ms")
}

func newMovingRunner(e *env) *movingRunner {
	w := fakepkg.New(true)
	w.Buffered()
	return &movingRunner{work: w, tasksAtStart: func() int { return e.rt.Stats().Tasks }}
}

func TestBashBackgroundAfter(t *testing.T) {
	t.Run("a command still running is moved: the start's handle, the output so far, the id allocated only then", func(t *testing.T) {
		e := newEnv(t)
		notices := e.agent(t, "a1", 4)
		r := newMovingRunner(e)
		b := fakeBash(t, e.rt, r)
		got := b.Call(bg, "a1", json.RawMessage(`{"command":"make build","background_after_ms":20}`))
		want := tools.Result{
			Text: lines("early",
				"(still running after 20 ms: moved to the background as task bash-1 (bash: make build). You will be notified when it finishes; task_output returns its whole output, from the first line.)",
				"[status: running]"),
			Data: tools.Handle{Kind: "background", TaskID: "bash-1"},
		}
		if got != want {
			t.Fatalf("got %+v,\nwant %+v", got, want)
		}
		if r.seenTasks != 0 {
			t.Errorf("%d tasks existed when the command started: the id must come with the move", r.seenTasks)
		}
		r.work.Emit("late\n")
		r.work.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		if n, want := next(t, notices), "background task bash-1 (bash: make build) finished [status: completed, exit code: 0]. Read its output with task_output."; n != want {
			t.Errorf("notice %q, want %q", n, want)
		}
		if out := e.call("a1", "task_output", `{"task_id":"bash-1"}`); out.Text != lines("early", "late", "[status: completed, exit code: 0]") {
			t.Errorf("task_output = %q: the early output must still be there", out.Text)
		}
	})
	t.Run("at the owner's cap the command stays in the foreground under its timeout, saying so", func(t *testing.T) {
		e := newEnv(t)
		e.agent(t, "a1", 4)
		var held []*fake
		for range 10 { // the default cap
			f := newFake(true)
			e.start(t, f, "job", "busy", "a1")
			held = append(held, f)
		}
		r := newMovingRunner(e)
		b := fakeBash(t, e.rt, r)
		got := b.Call(bg, "a1", json.RawMessage(`{"command":"make build","background_after_ms":10,"timeout_ms":1500}`))
		want := tools.Result{Text: lines("early",
			"(not moved to the background after 10 ms: background task limit reached for this owner (limit: 10); use task_kill to stop an unneeded task, wait for it to finish, then retry; it stayed in the foreground under its timeout of 1500 ms)",
			"(timed out after 1500 ms; the command and its process group were killed)",
			"[status: killed, signal: SIGTERM]")}
		if got != want {
			t.Errorf("got %+v,\nwant %+v", got, want)
		}
		if s := e.rt.Stats(); s.Tasks != 10 {
			t.Errorf("%d tasks, want the 10 that held the cap", s.Tasks)
		}
		for _, f := range held {
			f.finish(messages.Outcome{Status: messages.Completed})
		}
	})
	t.Run("arguments", func(t *testing.T) {
		e := newEnv(t)
		b := fakeBash(t, e.rt, newMovingRunner(e))
		for _, tc := range []struct{ args, want string }{
			{`{"command":"x","background_after_ms":10,"run_in_background":true}`, "invalid arguments: background_after_ms is for foreground calls (with run_in_background the command is in the background from the start)"},
			{`{"command":"x","background_after_ms":0}`, "invalid arguments: background_after_ms must be a positive number of milliseconds"},
		} {
			if got := b.Call(bg, "a1", json.RawMessage(tc.args)); !got.IsError || got.Text != tc.want {
				t.Errorf("%s: got %+v, want the error %q", tc.args, got, tc.want)
			}
		}
		fg := fakeBash(t, e.rt, newMovingRunner(e), tools.WithRunInBackground(false))
		if got := fg.Call(bg, "", json.RawMessage(`{"command":"x","background_after_ms":10}`)); got.Text != `invalid arguments: unknown field "background_after_ms"` {
			t.Errorf("without run_in_background: got %+v", got)
		}
	})
}

// With a real command: one that finishes before background_after_ms answers exactly
// as a foreground call does, and no task is made.
func TestBashBackgroundAfterFinishesFirst(t *testing.T) {
	p := newProducer(t)
	e := newEnv(t)
	b := newBashTool(t, e.rt, p)
	plain := b.Call(bg, "a1", json.RawMessage(`{"command":"echo hi; echo oops >&2; exit 3"}`))
	got := b.Call(bg, "a1", json.RawMessage(`{"command":"echo hi; echo oops >&2; exit 3","background_after_ms":60000}`))
	if got != plain || got.Text != lines("hi", "oops", "[status: completed, exit code: 3]") {
		t.Errorf("got %+v, want the foreground answer %+v", got, plain)
	}
	if s := e.rt.Stats(); s.Tasks != 0 {
		t.Errorf("%d tasks: a command that finished in time is no task", s.Tasks)
	}
}
