package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// goErrors are the strings a tool result must never carry: Go's, not the tools'.
var goErrors = []string{"context canceled", "context deadline exceeded"}

// noGoErrors fails the test if r carries a Go context error string.
func noGoErrors(t *testing.T, r tools.Result) {
	t.Helper()
	for _, s := range goErrors {
		if strings.Contains(r.Text, s) {
			t.Errorf("result %q carries %q", r.Text, s)
		}
	}
}

// A call cut short by its caller's interrupt (a cancelled context, or one past its
// deadline) answers in the tools' own words: a wait says it was interrupted and
// gives the task's current status (or its terminal status line if it ended), other
// calls name the interruption; nothing is consumed, and the task's notice still
// comes. The waits run on testing/synctest's virtual clock: a deadline "passes"
// only once every goroutine is blocked, that is, once the wait is under way.
func TestInterruptedCallsAnswerInTheToolsWords(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	tests := []struct {
		name string
		// ctx is the call's context: a deadline of 1 s (virtual) when nil.
		ctx       context.Context
		tool      string
		args      string
		afterWait bool // cancel the call's context once its wait returned, before the read
		finish    bool // the task ends before the call
		want      tools.Result
	}{
		{name: "a wait the caller's deadline cuts short says so and gives the status",
			tool: "task_output", args: `{"task_id":"bash-1","wait":true,"timeout_ms":3600000}`,
			want: tools.Result{Text: lines("(timeout_ms clamped to 600000)", "(wait interrupted before the task finished)", "[status: running]")}},
		{name: "a wait on a context cancelled before the call says the same",
			ctx: cancelled, tool: "task_output", args: `{"task_id":"bash-1","wait":true}`,
			want: tools.Result{Text: lines("(wait interrupted before the task finished)", "[status: running]")}},
		{name: "an until wait says the same",
			tool: "task_output", args: `{"task_id":"bash-1","until":"never printed","timeout_ms":60000}`,
			want: tools.Result{Text: lines("(wait interrupted before the task finished)", "[status: running]")}},
		{name: "a task_wait says so and lists the tasks still running",
			tool: "task_wait", args: `{"task_ids":["bash-1"],"timeout_ms":60000}`,
			want: tools.Result{Text: lines("(wait interrupted before the tasks finished)", "still running: bash-1")}},
		{name: "a task_wait on a cancelled context says the same",
			ctx: cancelled, tool: "task_wait", args: `{"task_ids":["bash-1"]}`,
			want: tools.Result{Text: lines("(wait interrupted before the tasks finished)", "still running: bash-1")}},
		{name: "a wait that returned the task's end, whose read was cut short, gives the terminal status line",
			ctx: nil, tool: "task_output", args: `{"task_id":"bash-1","wait":true}`, afterWait: true, finish: true,
			want: tools.Result{Text: "[status: completed, exit code: 0]"}},
		{name: "a plain read on a cancelled context is a tool error naming the interruption",
			ctx: cancelled, tool: "task_output", args: `{"task_id":"bash-1"}`,
			want: tools.Result{Text: "the call was interrupted", IsError: true}},
		{name: "task_list on a cancelled context names the interruption",
			ctx: cancelled, tool: "task_list", args: `{}`,
			want: tools.Result{Text: "the call was interrupted", IsError: true}},
		{name: "task_kill on a cancelled context names the interruption",
			ctx: cancelled, tool: "task_kill", args: `{"task_id":"bash-1"}`,
			want: tools.Result{Text: "the call was interrupted", IsError: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				notices := e.agent(t, "a1", 4)
				f := newFake(true)
				f.Buffered() // an output stream, for until
				id := e.start(t, f, "bash", "make", "a1")
				f.emit("kept for the next read\n")
				if tc.finish {
					f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
					e.settled(t, id, "a1")
				}
				ctx := tc.ctx
				if ctx == nil {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(bg, time.Second)
					defer cancel()
					if tc.afterWait {
						ctx, cancel = context.WithCancel(bg)
						defer cancel()
						tools.SetAfterWaitHook(e.tt, func(messages.TaskID) { cancel() })
					}
				}
				got := e.set.Call(ctx, "a1", tc.tool, json.RawMessage(tc.args))
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				noGoErrors(t, got)
				if tc.finish {
					return
				}
				// Nothing was consumed, and the task is not reported: the notice comes.
				if r := e.call("a1", "task_output", `{"task_id":"bash-1"}`); r.Text != lines("kept for the next read", "[status: running]") {
					t.Errorf("the next read = %+v, want the output the interrupted call left", r)
				}
				f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
				if n, want := next(t, notices), "background task bash-1 (bash: make) finished [status: completed, exit code: 0]. Read its output with task_output."; n != want {
					t.Errorf("notice = %q, want %q", n, want)
				}
			})
		})
	}
}

// A foreground command whose call is interrupted is killed, with its process group,
// and the answer says so in the tools' words.
func TestInterruptedForegroundCommand(t *testing.T) {
	t.Run("cancelled while it runs: it is killed and the answer names the interruption", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		b := newBashTool(t, e.rt, p)
		path, _ := gate(t)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		got := make(chan tools.Result, 1)
		go func() {
			got <- b.Call(ctx, "", json.RawMessage(fmt.Sprintf(`{"command":"echo ready > %s; exec sleep 1000"}`, path)))
		}()
		// The command is running once it wrote the gate.
		data, err := os.ReadFile(path)
		if err != nil || string(data) != "ready\n" {
			t.Fatalf("gate = %q, %v", data, err)
		}
		cancel()
		r := <-got
		want := tools.Result{Text: lines("(the call was interrupted; the command and its process group were killed)", "[status: killed, signal: SIGTERM]"), IsError: true}
		if r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
		noGoErrors(t, r)
		if n := p.Live(); n != 0 {
			t.Errorf("%d processes of the command alive after the interrupt", n)
		}
	})
	t.Run("on a context past its deadline before the call: nothing runs, the answer names it", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		b := newBashTool(t, e.rt, p)
		ctx, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
		defer cancel()
		r := b.Call(ctx, "", json.RawMessage(`{"command":"true","run_in_background":true}`))
		if want := (tools.Result{Text: "start aborted: the call's deadline passed", IsError: true}); r != want {
			t.Errorf("background start = %+v, want %+v", r, want)
		}
		r = b.Call(ctx, "", json.RawMessage(`{"command":"true"}`))
		if want := (tools.Result{Text: "the call's deadline passed", IsError: true}); r != want {
			t.Errorf("foreground = %+v, want %+v", r, want)
		}
	})
}

// An interrupted task_input never reports a write the task may already have read as
// perhaps not sent (the model would send it again): the interrupt ends the write
// only after a grace, within which a write that was made answers, and the call then
// says "input sent" before the interruption. A write still blocked after the grace
// (a full pipe) is abandoned, and the call names the interruption. On
// testing/synctest's virtual clock: "blocked" is every goroutine blocked.
func TestInterruptedInput(t *testing.T) {
	tests := []struct {
		name     string
		unblock  bool // the blocked write goes through after the interrupt, within the grace
		want     tools.Result
		received bool // the task got the text
	}{
		{"a write made after the interrupt, within the grace, is reported sent", true,
			tools.Result{Text: lines("(input sent; the wait for the task's reply was interrupted)", "[status: running]")}, true},
		{"a write still blocked after the grace is abandoned and the call names the interruption", false,
			tools.Result{Text: "the call was interrupted", IsError: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.agent(t, "a1", 4)
				f := fakepkg.New(true)
				f.Buffered()
				f.Interactive()
				id, err := e.rt.Tasks().Start(bg, f.Spec("bash", "python3 -i", "a1"))
				if err != nil {
					t.Fatal(err)
				}
				f.BlockInput() // the write waits, as on a full pipe
				ctx, cancel := context.WithCancel(bg)
				defer cancel()
				got := make(chan tools.Result, 1)
				go func() {
					got <- e.set.Call(ctx, "a1", "task_input", json.RawMessage(`{"task_id":"bash-1","text":"go\n"}`))
				}()
				synctest.Wait() // the write is blocked in the task
				cancel()
				synctest.Wait() // the call took the interrupt and waits out its grace
				if tc.unblock {
					f.UnblockInput()
				}
				r := <-got
				if r != tc.want {
					t.Errorf("got %+v, want %+v", r, tc.want)
				}
				noGoErrors(t, r)
				select {
				case in := <-f.Inputs:
					if !tc.received || in.Data != "go\n" {
						t.Errorf("the task got %+v, want received=%v", in, tc.received)
					}
				default:
					if tc.received {
						t.Error("the task got no input")
					}
				}
				f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
				e.settled(t, id, "a1")
			})
		})
	}
}
