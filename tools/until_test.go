package tools_test

import (
	"fmt"
	"strings"
	"testing"

	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// task_output with until, every answer pinned by a golden file.
func TestTaskOutputUntilStrings(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 16)
	var b strings.Builder
	add := func(what string, r tools.Result) {
		fmt.Fprintf(&b, "== %s (is_error: %v)\n%s\n\n", what, r.IsError, r.Text)
	}
	start := func(label string) *fakepkg.Task {
		f := fakepkg.New(true)
		f.Buffered()
		if _, err := e.rt.Tasks().Start(bg, f.Spec("bash", label, "a1")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Completed}) })
		return f
	}
	server := start("npm run dev")
	server.Emit("> vite\n  ready in 312 ms\n  listening on http://localhost:5173/\nhmr update\n")
	add("matched", e.call("a1", "task_output", `{"task_id":"bash-1","until":"listening on \\S+"}`))
	add("the rest stays for the next read", e.call("a1", "task_output", `{"task_id":"bash-1"}`))
	add("no match within the timeout", e.call("a1", "task_output", `{"task_id":"bash-1","until":"never","timeout_ms":1}`))
	build := start("make")
	build.Emit("cc -c a.c\n")
	build.Finish(messages.Outcome{Status: messages.Failed, Detail: "exit code: 2"})
	add("the task ended first", e.call("a1", "task_output", `{"task_id":"bash-2","until":"Linking","wait":true}`))
	add("a pattern that does not compile", e.call("a1", "task_output", `{"task_id":"bash-1","until":"(unclosed"}`))
	add("an empty pattern", e.call("a1", "task_output", `{"task_id":"bash-1","until":""}`))
	add("until with wait: false", e.call("a1", "task_output", `{"task_id":"bash-1","until":"x","wait":false}`))
	final := fakepkg.New(false)
	if _, err := e.rt.Tasks().Start(bg, final.Spec("subagent", "research", "a1")); err != nil {
		t.Fatal(err)
	}
	defer final.Finish(messages.Outcome{Status: messages.Completed})
	add("a final-output kind has nothing to match", e.call("a1", "task_output", `{"task_id":"subagent-1","until":"x"}`))
	add("another agent's task", e.call("a2", "task_output", `{"task_id":"bash-1","until":"x"}`))
	golden(t, "until", b.String())
}
