package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// TestBadArguments pins the rule that every tool rejects bad input with a one-line
// reason and starts nothing.
func TestBadArguments(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"invalid JSON", "task_output", `{"task_id":`, "invalid arguments: malformed JSON: unexpected end of JSON input"},
		{"trailing data", "task_output", `{"task_id":"bash-1"} x`, "invalid arguments: malformed JSON: invalid character 'x' after top-level value"},
		{"not an object", "task_list", `[]`, "invalid arguments: arguments must be a JSON object"},
		{"null", "task_kill", `null`, "invalid arguments: arguments must be a JSON object"},
		{"a string", "bash", `"ls"`, "invalid arguments: arguments must be a JSON object"},
		{"unknown field", "task_output", `{"task_id":"bash-1","block":true}`, `invalid arguments: unknown field "block"`},
		{"unknown field on an argument-less tool", "task_list", `{"all":true}`, `invalid arguments: unknown field "all"`},
		{"field names are case-sensitive", "task_kill", `{"Task_ID":"bash-1"}`, `invalid arguments: unknown field "Task_ID"`},
		{"unknown fields are named in sorted order", "bash", `{"command":"ls","zz":1,"aa":2}`, `invalid arguments: unknown field "aa"`},
		{"run_in_background when disabled", "bash-fg", `{"command":"ls","run_in_background":true}`, `invalid arguments: unknown field "run_in_background"`},
		{"missing task_id", "task_output", `{"wait":true}`, "invalid arguments: missing required field task_id"},
		{"missing task_id on kill", "task_kill", `{}`, "invalid arguments: missing required field task_id"},
		{"missing command", "bash", `{"run_in_background":true}`, "invalid arguments: missing required field command"},
		{"empty arguments for a tool with a required field", "bash", ``, "invalid arguments: missing required field command"},
		{"task_id of the wrong type", "task_output", `{"task_id":7}`, "invalid arguments: task_id must be a string"},
		{"wait of the wrong type", "task_output", `{"task_id":"bash-1","wait":"yes"}`, "invalid arguments: wait must be a boolean"},
		{"timeout_ms of the wrong type", "task_output", `{"task_id":"bash-1","timeout_ms":"5s"}`, "invalid arguments: timeout_ms must be an integer"},
		{"fractional timeout_ms", "bash", `{"command":"ls","timeout_ms":1.5}`, "invalid arguments: timeout_ms must be an integer"},
		{"timeout_ms out of range", "bash", `{"command":"ls","timeout_ms":1e40}`, "invalid arguments: timeout_ms must be an integer"},
		{"run_in_background of the wrong type", "bash", `{"command":"ls","run_in_background":1}`, "invalid arguments: run_in_background must be a boolean"},
		{"reason of the wrong type", "task_kill", `{"task_id":"bash-1","reason":false}`, "invalid arguments: reason must be a string"},
		{"null value", "task_output", `{"task_id":null}`, "invalid arguments: task_id must be a string, not null"},
		{"null optional value", "bash", `{"command":"ls","timeout_ms":null}`, "invalid arguments: timeout_ms must be an integer, not null"},
		{"empty task_id", "task_output", `{"task_id":""}`, "invalid arguments: task_id must not be empty"},
		{"blank task_id", "task_kill", `{"task_id":"  "}`, "invalid arguments: task_id must not be empty"},
		{"empty command", "bash", `{"command":""}`, "invalid arguments: command must not be empty"},
		{"blank command", "bash", `{"command":" \n\t","run_in_background":true}`, "invalid arguments: command must not be empty"},
		{"negative timeout_ms", "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":-1}`, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
		{"zero timeout_ms", "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":0}`, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
		{"negative bash timeout_ms", "bash", `{"command":"ls","timeout_ms":-5}`, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
		{"negative timeout_ms in the background", "bash", `{"command":"ls","timeout_ms":-5,"run_in_background":true}`, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.agent(t, "a1", 8)
			r := &fakeRunner{}
			set, err := tools.NewSet(append(e.tt.Tools(),
				fakeBash(t, e.rt, r),
				&renamed{Tool: fakeBash(t, e.rt, r, tools.WithRunInBackground(false)), name: "bash-fg"})...)
			if err != nil {
				t.Fatal(err)
			}
			got := set.Call(bg, "a1", tc.tool, json.RawMessage(tc.args))
			if want := (tools.Result{Text: tc.want, IsError: true}); got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if strings.Contains(got.Text, "\n") {
				t.Errorf("the reason is not one line: %q", got.Text)
			}
			if r.runs != 0 || r.starts != 0 || e.rt.Stats().Tasks != 0 {
				t.Errorf("a rejected call started something: %d runs, %d starts, stats %+v", r.runs, r.starts, e.rt.Stats())
			}
		})
	}
}

// TestGoodArguments is the other half: the decoder accepts what the schemas allow.
func TestGoodArguments(t *testing.T) {
	tests := []struct{ name, tool, args string }{
		{"empty arguments for task_list", "task_list", ``},
		{"whitespace around the object", "task_list", " \n{}\n "},
		{"all task_output fields", "task_output", `{"task_id":"bash-1","wait":false,"timeout_ms":5}`},
		{"timeout_ms without wait is accepted and unused", "task_output", `{"task_id":"bash-1","timeout_ms":600000}`},
		{"a kill reason", "task_kill", `{"task_id":"bash-1","reason":"superseded"}`},
		{"a foreground command", "bash", `{"command":"ls","timeout_ms":1000}`},
		{"a background command", "bash", `{"command":"ls","run_in_background":true}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := &fakeRunner{}
			f := newFake(true)
			e.start(t, f, "bash", "sleep", "") // bash-1
			f.finish(messages.Outcome{Status: messages.Completed})
			set, err := tools.NewSet(append(e.tt.Tools(), fakeBash(t, e.rt, r))...)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Call(bg, "", tc.tool, json.RawMessage(tc.args)); got.IsError {
				t.Errorf("got error %q", got.Text)
			}
			if tc.tool == "bash" && r.runs+r.starts != 1 {
				t.Errorf("bash ran %d times and started %d tasks, want one of them once", r.runs, r.starts)
			}
		})
	}
}
