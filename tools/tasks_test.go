package tools_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

func TestTaskOutput(t *testing.T) {
	t.Run("stream kind returns the delta since the previous read, then the status line", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(true)
		id := e.start(t, f, "bash", "make test", "")
		f.emit("line 1\n")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
		want := tools.Result{Text: lines("line 1", "[status: running]")}
		if got != want {
			t.Errorf("first read = %+v, want %+v", got, want)
		}
		f.emit("line 2")
		got = e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
		want = tools.Result{Text: lines("line 2", "[status: running]")}
		if got != want {
			t.Errorf("second read = %+v, want %+v", got, want)
		}
	})
	t.Run("a read with no new output is only the status line", func(t *testing.T) {
		e := newEnv(t)
		id := e.start(t, newFake(true), "bash", "sleep", "")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
		if want := (tools.Result{Text: "[status: running]"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("final kind returns only the status line while running", func(t *testing.T) {
		e := newEnv(t)
		id := e.start(t, newFake(false), "subagent", "review the diff", "")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
		if want := (tools.Result{Text: "[status: running]"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("final kind returns the final output once terminal, idempotently", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(false)
		id := e.start(t, f, "subagent", "review the diff", "")
		f.finish(messages.Outcome{Status: messages.Failed, Detail: "max-tokens", Output: "half a review"})
		e.settled(t, id, "")
		want := tools.Result{Text: lines("half a review", "[status: failed, max-tokens]")}
		for i := range 2 {
			if got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id)); got != want {
				t.Errorf("read %d = %+v, want %+v", i+1, got, want)
			}
		}
	})
	t.Run("wait blocks until the task settles and returns its output", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(true)
		id := e.start(t, f, "bash", "make", "")
		res := make(chan tools.Result, 1)
		go func() { res <- e.call("", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id)) }()
		f.emit("built\n")
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		got := <-res
		if want := (tools.Result{Text: lines("built", "[status: completed, exit code: 0]")}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("a timed-out wait is a success that reports running", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(true)
		id := e.start(t, f, "bash", "sleep 100", "")
		f.emit("partial\n")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":1}`, id))
		if want := (tools.Result{Text: lines("partial", "[status: running]")}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("wait without timeout_ms uses the configured default", func(t *testing.T) {
		e := newEnv(t, tools.WithWaitTimeout(time.Millisecond))
		id := e.start(t, newFake(true), "bash", "sleep 100", "")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id))
		if want := (tools.Result{Text: "[status: running]"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("timeout_ms above the cap is clamped and the response says so", func(t *testing.T) {
		tests := []struct {
			name string
			opts []tools.TaskOption
			ms   int64
			want string
		}{
			{"default cap", nil, 600_001, "(timeout_ms clamped to 600000)"},
			{"configured cap", []tools.TaskOption{tools.WithMaxWait(5 * time.Millisecond)}, 6, "(timeout_ms clamped to 5)"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, tc.opts...)
				f := newFake(true)
				id := e.start(t, f, "bash", "true", "")
				f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
				// Settled before the call: a 5 ms wait must not be what the settlement races.
				e.settled(t, id, "")
				got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":%d}`, id, tc.ms))
				if want := (tools.Result{Text: lines(tc.want, "[status: completed, exit code: 0]")}); got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	})
	t.Run("the clamped wait still ends at the cap", func(t *testing.T) {
		e := newEnv(t, tools.WithMaxWait(time.Millisecond))
		id := e.start(t, newFake(true), "bash", "sleep 100", "")
		got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":600000}`, id))
		if want := (tools.Result{Text: lines("(timeout_ms clamped to 1)", "[status: running]")}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("the status line renders every status", func(t *testing.T) {
		tests := []struct {
			name    string
			outcome *messages.Outcome // nil: leave running; zero Status: kill
			kill    bool
			want    string
		}{
			{"running", nil, false, "[status: running]"},
			{"stopping", nil, true, "[status: stopping]"},
			{"completed with exit code", &messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}, false, "[status: completed, exit code: 0]"},
			{"killed with signal", &messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}, false, "[status: killed, signal: SIGTERM]"},
			{"failed with detail", &messages.Outcome{Status: messages.Failed, Detail: "max-tokens"}, false, "[status: failed, max-tokens]"},
			{"completed without detail", &messages.Outcome{Status: messages.Completed}, false, "[status: completed]"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t)
				f := newFake(false)
				id := e.start(t, f, "subagent", "job", "")
				if tc.kill {
					f.holdCancel() // accepted, but the task does not settle: it stays stopping
					if r := e.call("", "task_kill", fmt.Sprintf(`{"task_id":%q}`, id)); r.IsError {
						t.Fatal(r.Text)
					}
					defer f.finish(messages.Outcome{Status: messages.Killed})
				}
				if tc.outcome != nil {
					f.finish(*tc.outcome)
					e.settled(t, id, "")
				}
				got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
				if want := (tools.Result{Text: tc.want}); got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	})
}

func TestTaskList(t *testing.T) {
	t.Run("no visible task is (no background tasks)", func(t *testing.T) {
		e := newEnv(t)
		got := e.call("", "task_list", `{}`)
		if want := (tools.Result{Text: "(no background tasks)"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("one line per visible task in start order", func(t *testing.T) {
		e := newEnv(t)
		e.agent(t, "a1", 8)
		e.agent(t, "a2", 8)
		done := newFake(true)
		e.start(t, newFake(true), "bash", "npm run dev", "a1")
		e.start(t, newFake(false), "subagent", "review the diff", "a1")
		e.start(t, newFake(true), "bash", "other agent's secret", "a2")
		id := e.start(t, done, "bash", "make\ntest", "")
		done.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		e.settled(t, id, "")
		got := e.call("a1", "task_list", ``)
		want := tools.Result{Text: lines(
			"bash-1 [bash] running — npm run dev",
			"subagent-1 [subagent] running — review the diff",
			"bash-3 [bash] completed — make test",
		)}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("the no-agent caller sees only unowned tasks", func(t *testing.T) {
		e := newEnv(t)
		e.agent(t, "a1", 8)
		e.start(t, newFake(true), "bash", "owned", "a1")
		e.start(t, newFake(true), "bash", "open", "")
		got := e.call("", "task_list", `{}`)
		if want := (tools.Result{Text: "bash-2 [bash] running — open"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

func TestTaskKill(t *testing.T) {
	t.Run("a running task gets requested cancellation", func(t *testing.T) {
		e := newEnv(t)
		id := e.start(t, newFake(true), "bash", "sleep 100", "")
		got := e.call("", "task_kill", fmt.Sprintf(`{"task_id":%q,"reason":"not needed"}`, id))
		if want := (tools.Result{Text: "requested cancellation of task bash-1"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		e.settled(t, id, "")
		got = e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
		if want := (tools.Result{Text: "[status: killed, signal: SIGTERM]"}); got != want {
			t.Errorf("after the kill: got %+v, want %+v", got, want)
		}
	})
	t.Run("a terminal task gets its terminal status line", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(true)
		id := e.start(t, f, "bash", "false", "")
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 1"})
		e.settled(t, id, "")
		got := e.call("", "task_kill", fmt.Sprintf(`{"task_id":%q}`, id))
		if want := (tools.Result{Text: "[status: completed, exit code: 1]"}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("a failing producer cancel is a tool error and leaves the task running", func(t *testing.T) {
		e := newEnv(t)
		f := newFake(true)
		id := e.start(t, f, "bash", "stubborn", "")
		f.failCancel(errors.New("kill: operation not permitted\nsecond line"))
		got := e.call("", "task_kill", fmt.Sprintf(`{"task_id":%q}`, id))
		want := tools.Result{Text: "cancel failed for task bash-1: kill: operation not permitted second line", IsError: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if got := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id)); got.Text != "[status: running]" {
			t.Errorf("after the failed kill: got %+v, want [status: running]", got)
		}
		f.failCancel(nil)
	})
}

// TestUnknownID pins the owner fence as the model sees it: an unknown id and a task
// of another agent produce the same single line in every tool.
func TestUnknownID(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 8)
	e.agent(t, "a2", 8)
	foreign := e.start(t, newFake(true), "bash", "a2's task", "a2") // bash-1
	calls := []struct{ name, tool, args string }{
		{"task_output", "task_output", `{"task_id":%q}`},
		{"task_output with wait", "task_output", `{"task_id":%q,"wait":true,"timeout_ms":5}`},
		{"task_kill", "task_kill", `{"task_id":%q}`},
	}
	for _, c := range calls {
		for _, target := range []struct {
			name   string
			id     messages.TaskID
			caller messages.AgentID
		}{
			{"unknown id", "bash-9", "a1"},
			{"another agent's task", foreign, "a1"},
			{"an owned task asked by the no-agent caller", foreign, ""},
		} {
			t.Run(c.name+"/"+target.name, func(t *testing.T) {
				got := e.call(target.caller, c.tool, fmt.Sprintf(c.args, target.id))
				want := tools.Result{Text: "task not found: " + string(target.id), IsError: true}
				if got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	}
	if got := e.call("a1", "task_list", `{}`); got.Text != "(no background tasks)" {
		t.Errorf("task_list for a1 = %q, want no tasks", got.Text)
	}
}

func TestSurfaceFence(t *testing.T) {
	const want = "background tasks unavailable: no control surface is attached"
	t.Run("no task tools: Start fails with ErrNoSurface", func(t *testing.T) {
		rt := newRuntime(t)
		f := newFake(true)
		_, err := rt.Tasks().Start(bg, f.spec("bash", "x", ""))
		if err == nil || err.Error() != want || !errors.Is(err, messages.ErrNoSurface) {
			t.Errorf("Start error = %v, want %q", err, want)
		}
		if f.runs() != 0 {
			t.Errorf("Run was called %d times, want 0", f.runs())
		}
	})
	t.Run("task tools attached: Start works; closed: it fails again", func(t *testing.T) {
		rt := newRuntime(t)
		tt := tools.NewTaskTools(rt)
		f := newFake(true)
		if _, err := rt.Tasks().Start(bg, f.spec("bash", "x", "")); err != nil {
			t.Fatalf("Start with the task tools attached: %v", err)
		}
		tt.Close()
		tt.Close() // idempotent
		if _, err := rt.Tasks().Start(bg, newFake(true).spec("bash", "y", "")); err == nil || err.Error() != want {
			t.Errorf("Start after Close error = %v, want %q", err, want)
		}
	})
}

func TestSet(t *testing.T) {
	t.Run("an unknown tool name is a tool error", func(t *testing.T) {
		e := newEnv(t)
		got := e.call("", "bash_output", `{}`)
		if want := (tools.Result{Text: "unknown tool: bash_output", IsError: true}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("two tools with one name are refused", func(t *testing.T) {
		e := newEnv(t)
		ts := e.tt.Tools()
		if _, err := tools.NewSet(append(ts, ts[0])...); err == nil || !strings.Contains(err.Error(), `"task_output"`) {
			t.Errorf("NewSet error = %v, want a duplicate-name error", err)
		}
	})
	t.Run("names are sorted", func(t *testing.T) {
		e := newEnv(t)
		if got, want := strings.Join(e.set.Names(), ","), "task_input,task_kill,task_list,task_output,task_wait,task_watch"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// TestTaskOutputWhenTheRecordIsDroppedAfterTheWait: a task_output wait that returned
// the task's end answers with that end, even when the record is dropped before the
// read that follows (the owner disposed, the runtime closed — both end a task under
// a pending wait): the status line is byte-identical to the one a read gives.
func TestTaskOutputWhenTheRecordIsDroppedAfterTheWait(t *testing.T) {
	tests := []struct {
		name    string
		owner   messages.AgentID           // the task's owner and the caller
		outcome messages.Outcome           // how the task ends before the wait; zero = it keeps running
		timeout string                     // the wait's timeout_ms
		drop    func(e *env, t *testing.T) // what drops the record between the wait and the read
		want    tools.Result
	}{
		{
			name:    "owner disposed: the terminal status line, not task not found",
			owner:   "a1",
			outcome: messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"},
			timeout: "60000",
			drop: func(e *env, t *testing.T) {
				if err := e.rt.Agents().Dispose(bg, "a1"); err != nil {
					t.Error(err)
				}
			},
			want: tools.Result{Text: "[status: killed, signal: SIGTERM]"},
		},
		{
			// Unowned: the notice injector, which waits for the task_output calls under
			// way on an owned task, would wait for this very call, and Close for it.
			name:    "runtime closed: the terminal status line, not an error",
			owner:   "",
			outcome: messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"},
			timeout: "60000",
			drop: func(e *env, t *testing.T) {
				if err := e.rt.Close(bg); err != nil {
					t.Error(err)
				}
			},
			want: tools.Result{Text: "[status: completed, exit code: 0]"},
		},
		{
			name:    "a clamped wait keeps its note",
			owner:   "a1",
			outcome: messages.Outcome{Status: messages.Failed, Detail: "exit code: 2"},
			timeout: "9999999",
			drop: func(e *env, t *testing.T) {
				if err := e.rt.Agents().Dispose(bg, "a1"); err != nil {
					t.Error(err)
				}
			},
			want: tools.Result{Text: lines("(timeout_ms clamped to 600000)", "[status: failed, exit code: 2]")},
		},
		{
			name:    "a wait that timed out does not invent a status: task not found",
			owner:   "a1",
			timeout: "1",
			drop: func(e *env, t *testing.T) {
				if err := e.rt.Agents().Dispose(bg, "a1"); err != nil {
					t.Error(err)
				}
			},
			want: tools.Result{Text: "task not found: bash-1", IsError: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// What a read of the same end gives, for the byte-identical comparison.
			var readLine string
			if tc.outcome.Status != "" {
				e := newEnv(t)
				f := newFake(true)
				id := e.start(t, f, "bash", "make", "")
				f.emit("output\n")
				f.finish(tc.outcome)
				e.settled(t, id, "")
				r := e.call("", "task_output", fmt.Sprintf(`{"task_id":%q}`, id))
				readLine = r.Text[strings.LastIndexByte(r.Text, '\n')+1:]
			}

			e := newEnv(t)
			e.agent(t, "a1", 8)
			f := newFake(true)
			id := e.start(t, f, "bash", "make", tc.owner)
			f.emit("output\n")
			if tc.outcome.Status != "" {
				f.finish(tc.outcome)
				e.settled(t, id, tc.owner)
			}
			tools.SetAfterWaitHook(e.tt, func(messages.TaskID) { tc.drop(e, t) })
			got := e.call(tc.owner, "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":%s}`, id, tc.timeout))
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if readLine != "" && !strings.HasSuffix(got.Text, "\n"+readLine) && got.Text != readLine {
				t.Errorf("status line %q differs from a read's %q", got.Text, readLine)
			}
		})
	}
}
