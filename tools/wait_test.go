package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// Every task_wait answer, pinned by a golden file.
func TestTaskWaitStrings(t *testing.T) {
	e := newEnv(t, tools.WithMaxWait(time.Minute))
	e.agent(t, "a1", 16)
	e.agent(t, "a2", 16)
	var b strings.Builder
	add := func(what string, r tools.Result) {
		fmt.Fprintf(&b, "== %s (is_error: %v)\n%s\n\n", what, r.IsError, r.Text)
	}
	var fakes []*fake
	for i, label := range []string{"go test ./a", "go test ./b", "go test ./c"} {
		f := newFake(true)
		if id := e.start(t, f, "bash", label, "a1"); id != messages.TaskID(fmt.Sprintf("bash-%d", i+1)) {
			t.Fatalf("started %s", id)
		}
		fakes = append(fakes, f)
	}
	foreign := newFake(true)
	e.start(t, foreign, "bash", "secret", "a2")
	defer foreign.finish(messages.Outcome{Status: messages.Completed})

	add("any, timed out", e.call("a1", "task_wait", `{"task_ids":["bash-1","bash-2","bash-3"],"timeout_ms":1}`))
	fakes[1].finish(messages.Outcome{Status: messages.Failed, Detail: "exit code: 1"})
	add("any, one finished", e.call("a1", "task_wait", `{"task_ids":["bash-1","bash-2","bash-3"],"timeout_ms":60000}`))
	fakes[0].finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	fakes[2].finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	add("all, clamped", e.call("a1", "task_wait", `{"task_ids":["bash-3","bash-1","bash-3"],"mode":"all","timeout_ms":61000}`))
	add("a foreign id", e.call("a1", "task_wait", `{"task_ids":["bash-1","bash-4"]}`))
	add("an unknown id", e.call("a1", "task_wait", `{"task_ids":["bash-99"]}`))
	add("bad mode", e.call("a1", "task_wait", `{"task_ids":["bash-1"],"mode":"first"}`))
	add("no ids", e.call("a1", "task_wait", `{"task_ids":[]}`))
	add("an empty id", e.call("a1", "task_wait", `{"task_ids":[""]}`))
	add("ids not a list", e.call("a1", "task_wait", `{"task_ids":"bash-1"}`))
	add("negative timeout", e.call("a1", "task_wait", `{"task_ids":["bash-1"],"timeout_ms":-5}`))
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("bash-%d", i+1))
	}
	add("33 ids", e.call("a1", "task_wait", `{"task_ids":[`+strings.Join(many, ",")+`]}`))
	golden(t, "task_wait", b.String())
}

// A task returned finished by task_wait is reported (the model has seen its end); one
// still running when the wait returned is not.
func TestTaskWaitReportsWhatItReturns(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 4)
	done, later := newFake(true), newFake(true)
	first := e.start(t, done, "bash", "fast", "a1")
	second := e.start(t, later, "bash", "slow", "a1")
	defer later.finish(messages.Outcome{Status: messages.Completed})
	done.finish(messages.Outcome{Status: messages.Completed})
	if r := e.call("a1", "task_wait", `{"task_ids":["bash-1","bash-2"]}`); !strings.HasPrefix(r.Text, "bash-1 (bash: fast) finished") {
		t.Fatalf("task_wait: %+v", r)
	}
	for id, want := range map[messages.TaskID]bool{first: true, second: false} {
		s, err := e.rt.Tasks().Get(bg, id, "a1")
		if err != nil || s.Reported != want {
			t.Errorf("%s reported = %v (%v), want %v", id, s.Reported, err, want)
		}
	}
}
