package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// repl starts an interactive fake task that answers every line written to it with
// "got <line>" (a REPL), and ends with exit code 0 when its input is closed.
func repl(t *testing.T, e *env, owner messages.AgentID) *fakepkg.Task {
	t.Helper()
	f := fakepkg.New(true)
	f.Buffered()
	f.Interactive()
	if _, err := e.rt.Tasks().Start(bg, f.Spec("bash", "python3 -i", owner)); err != nil {
		t.Fatal(err)
	}
	f.Emit(">>> ")
	go func() {
		for in := range f.Inputs {
			var reply strings.Builder // one write per input: the collection's quiet period never splits it
			for _, line := range strings.SplitAfter(in.Data, "\n") {
				if line != "" {
					reply.WriteString("got " + line + ">>> ")
				}
			}
			f.Emit(reply.String())
			if in.EOF {
				f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
				return
			}
		}
	}()
	t.Cleanup(func() {
		f.Finish(messages.Outcome{Status: messages.Completed})
		close(f.Inputs)
	})
	return f
}

// task_input: a REPL round trip is one call; every answer pinned by a golden file.
func TestTaskInputStrings(t *testing.T) {
	e := newEnv(t, tools.WithInputWait(time.Minute)) // the reply always comes: no race with a loaded machine
	e.agent(t, "a1", 16)
	var b strings.Builder
	add := func(what string, r tools.Result) {
		fmt.Fprintf(&b, "== %s (is_error: %v)\n%s\n\n", what, r.IsError, r.Text)
	}
	repl(t, e, "a1")
	add("the prompt", e.call("a1", "task_output", `{"task_id":"bash-1"}`))
	add("a line, answered in the same call", e.call("a1", "task_input", `{"task_id":"bash-1","text":"1+1\n"}`))
	add("two lines", e.call("a1", "task_input", `{"task_id":"bash-1","text":"a\nb\n"}`))
	add("eof ends it", e.call("a1", "task_input", `{"task_id":"bash-1","text":"bye\n","eof":true}`))
	add("input after it ended", e.call("a1", "task_input", `{"task_id":"bash-1","text":"x\n"}`))

	plain := newFake(true)
	e.start(t, plain, "bash", "make", "a1")
	defer plain.finish(messages.Outcome{Status: messages.Completed})
	add("a task that takes no input", e.call("a1", "task_input", `{"task_id":"bash-2","text":"y\n"}`))
	add("nothing to send", e.call("a1", "task_input", `{"task_id":"bash-2","text":""}`))
	add("too much text", e.call("a1", "task_input", fmt.Sprintf(`{"task_id":"bash-2","text":%q}`, strings.Repeat("x", messages.MaxInput+1))))
	add("another agent's task", e.call("a2", "task_input", `{"task_id":"bash-1","text":"x"}`))
	add("missing text", e.call("a1", "task_input", `{"task_id":"bash-1"}`))
	golden(t, "task_input", b.String())
}

func TestTaskInputAfterEOF(t *testing.T) {
	e := newEnv(t)
	e.agent(t, "a1", 4)
	f := fakepkg.New(true)
	f.Buffered()
	f.Interactive()
	if _, err := e.rt.Tasks().Start(bg, f.Spec("bash", "cat", "a1")); err != nil {
		t.Fatal(err)
	}
	defer f.Finish(messages.Outcome{Status: messages.Completed})
	if r := e.call("a1", "task_input", `{"task_id":"bash-1","text":"","eof":true}`); r.IsError {
		t.Fatalf("eof alone: %+v", r)
	}
	if got := <-f.Inputs; !got.EOF {
		t.Errorf("write %+v, want eof", got)
	}
	want := tools.Result{Text: "the input of task bash-1 is closed already (eof was sent)", IsError: true}
	if r := e.call("a1", "task_input", `{"task_id":"bash-1","text":"late\n"}`); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
}
