//go:build linux

package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/messages"
)

// A dev server watched for ERROR lines through the tools: the notices arrive in the
// owner's session, capped, and none after the completion notice; the model's reads
// are unchanged.
func TestTaskWatch(t *testing.T) {
	p := newProducer(t)
	e := newEnv(t)
	notices := e.agent(t, "a1", 16)
	b := newBashTool(t, e.rt, p)
	gate1, open1 := gate(t)
	gate2, open2 := gate(t)
	cmd := fmt.Sprintf(`cat %s; echo "INFO up"; echo "ERROR one"; cat %s; echo "ERROR two"; echo "ERROR three"; echo "WARN x"; exit 2`, gate1, gate2)
	if r := b.Call(bg, "a1", json.RawMessage(fmt.Sprintf(`{"command":%q,"run_in_background":true}`, cmd))); r.IsError {
		t.Fatal(r.Text)
	}
	got := e.call("a1", "task_watch", `{"task_id":"bash-1","pattern":"ERROR","max_notices":2}`)
	if want := "watching task bash-1 for lines matching ERROR: up to 2 notices in this session, until the task finishes. Keep working; do not poll."; got.Text != want || got.IsError {
		t.Fatalf("task_watch = %+v, want %q", got, want)
	}
	open1()
	if got, want := next(t, notices), "task bash-1 output matched ERROR: ERROR one"; got != want {
		t.Errorf("first notice %q, want %q", got, want)
	}
	open2()
	second := next(t, notices)
	if !strings.HasPrefix(second, "task bash-1 output matched ERROR: ERROR two") || strings.Contains(second, "WARN") {
		t.Errorf("second notice %q, want ERROR two (and perhaps three) only", second)
	}
	if got, want := next(t, notices), "task bash-1 watch on ERROR stopped: it sent its 2 notices (max_notices)"; got != want {
		t.Errorf("closing notice %q, want %q", got, want)
	}
	if got, want := next(t, notices), "background task bash-1 (bash: "+cmd+") finished [status: completed, exit code: 2]. Read its output with task_output."; got != want {
		t.Errorf("completion notice %q, want %q", got, want)
	}
	out := e.call("a1", "task_output", `{"task_id":"bash-1"}`)
	if want := lines("INFO up", "ERROR one", "ERROR two", "ERROR three", "WARN x", "[status: completed, exit code: 2]"); out.Text != want {
		t.Errorf("task_output = %q, want %q (a watch reads nothing away)", out.Text, want)
	}
	select {
	case n := <-notices:
		t.Errorf("a notice after the completion notice: %q", n)
	default:
	}
}

func TestTaskWatchErrors(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 1)
	f := newFake(true)
	e.start(t, f, "bash", "server", "a1")
	defer f.finish(messages.Outcome{Status: messages.Completed})
	tests := []struct{ name, args, want string }{
		{"an unknown task is not found", `{"task_id":"bash-9","pattern":"x"}`, "task not found: bash-9"},
		{"a bad pattern", `{"task_id":"bash-1","pattern":"("}`, "invalid arguments: pattern is not a valid regular expression: missing closing ): `(`"},
		{"an empty pattern", `{"task_id":"bash-1","pattern":""}`, "invalid arguments: pattern is not a valid regular expression: it is empty"},
		{"max_notices below one", `{"task_id":"bash-1","pattern":"x","max_notices":0}`, "invalid arguments: max_notices must be between 1 and 1000"},
		{"a non-positive timeout", `{"task_id":"bash-1","pattern":"x","timeout_ms":0}`, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
		{"a task without an output stream", `{"task_id":"bash-1","pattern":"x"}`, "task has no output stream: bash-1 (bash) gives no output to watch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.call("a1", "task_watch", tc.args)
			if !got.IsError || got.Text != tc.want {
				t.Errorf("got %+v, want the error %q", got, tc.want)
			}
		})
	}
}
