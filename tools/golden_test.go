package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// fakeRunner is a bash producer stand-in: Run answers at once and Spec's Run starts a
// task that has already completed. It counts what it started.
type fakeRunner struct {
	runs   int // foreground Runs
	starts int // background Spec.Run calls
}

func (f *fakeRunner) Spec(owner messages.AgentID, c bash.Command) messages.Spec {
	return messages.Spec{Kind: bash.Kind, Label: c.Command, Owner: owner, Run: func() (messages.Hooks, error) {
		f.starts++
		done := make(chan messages.Outcome, 1)
		done <- messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}
		return messages.Hooks{Done: done, Cancel: func(string) error { return nil }, ReadOutput: func() string { return "" }}, nil
	}}
}

func (f *fakeRunner) Run(_ context.Context, c bash.Command, _ time.Duration) (bash.Result, error) {
	f.runs++
	return bash.Result{Output: c.Command + "\n", Outcome: messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}}, nil
}

// fakeBash is the bash tool on a fake runner, for options that must be valid.
func fakeBash(t testing.TB, rt *actors.Runtime, r tools.BashRunner, opts ...tools.BashOption) *tools.BashTool {
	t.Helper()
	b, err := tools.NewBashWithRunner(rt, r, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allTools is every tool of the package in its configurations, with a fake bash.
func allTools(t testing.TB, e *env, r *fakeRunner) []tools.Tool {
	return append(e.tt.Tools(),
		fakeBash(t, e.rt, r),
		&renamed{Tool: fakeBash(t, e.rt, r, tools.WithoutStdin()), name: "bash (stdin disabled)"},
		&renamed{Tool: fakeBash(t, e.rt, r, tools.WithRunInBackground(false)), name: "bash (run_in_background disabled)"})
}

// renamed gives a tool configuration its own name in golden files.
type renamed struct {
	tools.Tool
	name string
}

func (r *renamed) Name() string { return r.name }

func TestSchemas(t *testing.T) {
	e := newEnv(t)
	for _, tool := range allTools(t, e, &fakeRunner{}) {
		t.Run(tool.Name(), func(t *testing.T) {
			s := tool.Schema()
			t.Run("is an object that forbids additional properties", func(t *testing.T) {
				if s["type"] != "object" || s["additionalProperties"] != false {
					t.Errorf("type = %v, additionalProperties = %v; want object, false", s["type"], s["additionalProperties"])
				}
			})
			t.Run("is a fresh copy on every call", func(t *testing.T) {
				s["type"] = "mutated"
				if got := tool.Schema()["type"]; got != "object" {
					t.Errorf("type after mutating an earlier copy = %v", got)
				}
			})
			t.Run("matches the golden file", func(t *testing.T) {
				b, err := json.MarshalIndent(tool.Schema(), "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, "schema_"+strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(tool.Name()), string(b)+"\n")
			})
		})
	}
}

func TestDescriptions(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	for _, tool := range allTools(t, e, &fakeRunner{}) {
		fmt.Fprintf(&b, "== %s\n%s\n\n", tool.Name(), tool.Description())
	}
	golden(t, "descriptions", b.String())
}

func TestPromptSection(t *testing.T) {
	s := tools.PromptSection()
	if s.Order != 106 {
		t.Errorf("Order = %d, want 106", s.Order)
	}
	golden(t, "prompt_section", fmt.Sprintf("order: %d\ntitle: %s\n\n%s\n", s.Order, s.Title, s.Text))
	for _, habit := range []string{"task id", "notified", "busy-poll", "sleep", "duplicate", "final answer", "task_output", "wait: true", "task_kill"} {
		if !strings.Contains(s.Text, habit) {
			t.Errorf("the section does not teach %q", habit)
		}
	}
}

// TestStrings pins every model-facing string the tools build from runtime state, as
// produced by real calls, in one golden file.
func TestStrings(t *testing.T) {
	e := newEnv(t, tools.WithMaxWait(time.Minute))
	ch := e.agent(t, "a1", 8)
	var b strings.Builder
	add := func(what string, r tools.Result) {
		fmt.Fprintf(&b, "== %s (is_error: %v)\n%s\n\n", what, r.IsError, r.Text)
	}
	add("task_list, empty", e.call("a1", "task_list", `{}`))
	bashTool := fakeBash(t, e.rt, &fakeRunner{})
	add("bash, background", bashTool.Call(bg, "a1", json.RawMessage(`{"command":"go test ./...","run_in_background":true}`)))
	add("bash, background, no-agent caller", bashTool.Call(bg, "", json.RawMessage(`{"command":"make","run_in_background":true}`)))
	add("bash, foreground", bashTool.Call(bg, "a1", json.RawMessage(`{"command":"echo hi"}`)))
	add("notice", tools.Result{Text: next(t, ch)})
	// The no-agent caller's task has no notice to wait for: wait for its settlement,
	// which task_list below reports, without reading it.
	e.settled(t, "bash-2", "")

	outcomes := []messages.Outcome{
		{Status: messages.Completed, Detail: "exit code: 0"},
		{Status: messages.Killed, Detail: "signal: SIGTERM"},
		{Status: messages.Failed, Detail: "max-tokens", Output: "final answer so far"},
	}
	running := newFake(true)
	running.emit("new output\n")
	rid := e.start(t, running, "bash", "npm run dev", "a1")
	add("task_output, stream kind, running", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q}`, rid)))
	var terminal messages.TaskID
	for i, o := range outcomes {
		f := newFake(i != 2)
		id := e.start(t, f, map[bool]string{true: "bash", false: "subagent"}[i != 2], "job "+fmt.Sprint(i), "a1")
		if i == 0 {
			terminal = id
		}
		f.finish(o)
		add("task_output, "+string(o.Status), e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":60000}`, id)))
	}
	running.emit("more output\n")
	add("task_output, clamped wait", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":61000}`, terminal)))
	add("task_output, timed-out wait", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true,"timeout_ms":1}`, rid)))
	add("task_list", e.call("a1", "task_list", `{}`))
	add("task_list, no-agent caller (unowned tasks only)", e.call("", "task_list", `{}`))
	add("task_kill, running", e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q}`, rid)))
	add("task_kill, terminal", e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q}`, terminal)))
	add("task_output, unknown id", e.call("a1", "task_output", `{"task_id":"bash-99"}`))
	add("task_kill, unknown id", e.call("a1", "task_kill", `{"task_id":"bash-99"}`))
	add("unknown tool", e.call("a1", "bash_output", `{}`))
	golden(t, "strings", b.String())
}

func TestLabel(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"a one-line label is unchanged", "make test", "make test"},
		{"line breaks become spaces", "make\r\ntest\nall", "make test all"},
		{"a long label is cut with an ellipsis", strings.Repeat("x", 250), strings.Repeat("x", 199) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tools.Label(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
