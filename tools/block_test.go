//go:build linux

package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/tools"
)

// output "block" through the tools: nothing is dropped, the model sees the task
// "running, output full" while it waits for task_output, and task_kill ends it.
func TestBashBlockOutput(t *testing.T) {
	const n = 20000 // `seq 1 20000` writes 108,894 bytes: more than three reads' worth
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}

	t.Run("a blocked command shows output full and every line arrives", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		r := b.Call(bg, "a1", json.RawMessage(fmt.Sprintf(`{"command":"seq 1 %d","run_in_background":true,"output":"block"}`, n)))
		if r.IsError {
			t.Fatalf("start: %+v", r)
		}
		id := r.Data.(tools.Handle).TaskID
		if got := e.call("a1", "task_wait", fmt.Sprintf(`{"task_ids":[%q],"timeout_ms":20000}`, id)); !strings.Contains(got.Text, "output full, waiting for task_output: "+string(id)) {
			t.Errorf("task_wait on a full task = %q, want it to return at once saying running, output full", got.Text)
		}
		if got, want := e.call("a1", "task_list", `{}`).Text, fmt.Sprintf("%s [bash] running, output full — seq 1 %d", id, n); got != want {
			t.Errorf("task_list = %q, want %q", got, want)
		}
		var read strings.Builder
		for {
			got := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id))
			out, status, ok := strings.Cut(got.Text, "[status: ")
			if !ok {
				t.Fatalf("task_output = %q: no status line", got.Text)
			}
			read.WriteString(out) // a read in block mode ends at a line's end: the line break before the status is the output's
			if strings.HasPrefix(status, "completed") {
				break
			}
			if !strings.HasPrefix(status, "running") {
				t.Fatalf("task_output status = %q", status)
			}
		}
		if got := read.String(); got != want.String() {
			t.Errorf("read %d bytes (%q…), want the %d bytes seq wrote, in order", len(got), got[:min(len(got), 40)], want.Len())
		}
	})
	t.Run("task_kill ends a blocked command", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p, tools.WithBlockOutput())
		r := b.Call(bg, "a1", json.RawMessage(`{"command":"trap '' TERM; seq 1 100000000","run_in_background":true}`))
		id := r.Data.(tools.Handle).TaskID
		if got := e.call("a1", "task_wait", fmt.Sprintf(`{"task_ids":[%q],"timeout_ms":20000}`, id)); !strings.Contains(got.Text, "output full, waiting for task_output: "+string(id)) {
			t.Errorf("task_wait = %q, want running, output full (block is this tool's default)", got.Text)
		}
		if got := e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q}`, id)); got.Text != "requested cancellation of task "+string(id) {
			t.Errorf("task_kill = %+v", got)
		}
		if got := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id)); !strings.Contains(got.Text, "[status: killed") {
			t.Errorf("task_output after the kill = %q…", got.Text[max(0, len(got.Text)-80):])
		}
	})
	t.Run("output is refused where it means nothing", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		for _, tc := range []struct{ args, want string }{
			{`{"command":"true","output":"block"}`, `output "block" needs run_in_background: true`},
			{`{"command":"true","run_in_background":true,"output":"drop"}`, `output must be "bounded" or "block"`},
		} {
			got := b.Call(bg, "a1", json.RawMessage(tc.args))
			if !got.IsError || !strings.Contains(got.Text, tc.want) {
				t.Errorf("%s: got %+v, want an error containing %q", tc.args, got, tc.want)
			}
		}
	})
}
