package tools_test

import (
	"testing"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// A parent's task_list shows its sub-agents' tasks under their owner; a sub-agent
// never sees its parent's.
func TestListShowsSubAgentTasksUnderTheirOwner(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 4)
	if err := e.rt.Agents().Register(bg, "a1/sub-1", actors.WithParent("a1")); err != nil {
		t.Fatal(err)
	}
	own, sub := newFake(true), newFake(true)
	e.start(t, own, "bash", "go test ./...", "a1")
	e.start(t, sub, "bash", "npm run dev", "a1/sub-1")
	defer own.finish(messages.Outcome{Status: messages.Completed})
	defer sub.finish(messages.Outcome{Status: messages.Completed})
	tests := []struct {
		caller messages.AgentID
		want   string
	}{
		{"a1", "bash-1 [bash] running — go test ./...\nbash-2 [bash] running — npm run dev (sub-agent a1/sub-1)"},
		{"a1/sub-1", "bash-2 [bash] running — npm run dev"},
	}
	for _, tc := range tests {
		if got := e.call(tc.caller, "task_list", `{}`); got.Text != tc.want || got.IsError {
			t.Errorf("task_list for %s:\n%s\nwant:\n%s", tc.caller, got.Text, tc.want)
		}
	}
	if got := e.call("a1", "task_kill", `{"task_id":"bash-2","reason":"left running by the sub-agent"}`); got.Text != "requested cancellation of task bash-2" {
		t.Errorf("the parent kills its sub-agent's task: %+v", got)
	}
}
