package tools_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// panicRunner is a bash runner whose every method panics: a bug in code the tool
// calls.
type panicRunner struct{ value any }

func (p panicRunner) Spec(messages.AgentID, bash.Command) messages.Spec { panic(p.value) }
func (p panicRunner) Run(context.Context, bash.Command, time.Duration) (bash.Result, error) {
	panic(p.value)
}

// TestAPanicInAToolIsAToolError pins the containment rule for tools: a panic inside
// a tool's Call (a bug) becomes one tool error "<tool> failed: internal error: <value>"
// on one line, and the embedder's agent loop carries on.
func TestAPanicInAToolIsAToolError(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a", 4)
	tools.SetOutputCallHook(e.tt, func(messages.TaskID) { panic("output\nhook") })
	ok := &fakeRunner{}
	if res := fakeBash(t, e.rt, ok).Call(bg, "a", []byte(`{"command":"x","run_in_background":true}`)); res.IsError {
		t.Fatalf("start: %s", res.Text)
	}
	for _, tc := range []struct {
		name string
		tool tools.Tool
		args string
		want string
	}{
		{"foreground bash", fakeBash(t, e.rt, panicRunner{"boom"}), `{"command":"x"}`, "bash failed: internal error: boom"},
		{"background bash", fakeBash(t, e.rt, panicRunner{errors.New("bad spec")}), `{"command":"x","run_in_background":true}`, "bash failed: internal error: bad spec"},
		{"a task tool", e.tt.Tools()[0], `{"task_id":"bash-1"}`, "task_output failed: internal error: output hook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tool.Call(bg, "a", []byte(tc.args))
			if !got.IsError || got.Text != tc.want {
				t.Errorf("got %+v, want the tool error %q", got, tc.want)
			}
		})
	}
	// The runtime is untouched: the task started before is still there, and the
	// caller's other tools work.
	if res := e.call("a", tools.TaskListName, `{}`); res.IsError {
		t.Errorf("task_list after the panics: %s", res.Text)
	}
}
