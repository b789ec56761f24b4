package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/taskrt/taskrt/actors"
	fakeproducer "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
	taskrt "github.com/taskrt/taskrt/tools/adapters/openai"
)

var bg = context.Background()

// env is a runtime with the task tools, agents "a1" (whose injector is an inbox)
// and "a2", and a Toolset bound to a1; torn down and checked at the end of the test.
type env struct {
	rt      *actors.Runtime
	tt      *tools.TaskTools
	inbox   *tools.Inbox
	toolset *taskrt.Toolset
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	tt := tools.NewTaskTools(rt)
	t.Cleanup(func() {
		tt.Close()
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
		if got := rt.Stats(); got != (actors.Stats{}) {
			t.Errorf("Stats after Close = %+v, want zero", got)
		}
	})
	inbox := tools.NewInbox()
	if err := rt.Agents().Register(bg, "a1", actors.WithInjector(inbox.Inject)); err != nil {
		t.Fatal(err)
	}
	if err := rt.Agents().Register(bg, "a2"); err != nil {
		t.Fatal(err)
	}
	ts, err := taskrt.New("a1", tt.Tools(), taskrt.WithInbox(inbox))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rt: rt, tt: tt, inbox: inbox, toolset: ts}
	e.start(t, "a1") // bash-1: a1's
	e.start(t, "a2") // bash-2: another agent's, not found for a1
	return e
}

func (e *env) start(t *testing.T, owner messages.AgentID) {
	t.Helper()
	f := fakeproducer.New(true)
	if _, err := e.rt.Tasks().Start(bg, f.Spec("bash", "make", owner)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Completed}) })
}

const notice = "background task bash-9 (bash: x) finished [status: completed]. Read its output with task_output."

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x) // keys sorted
	return string(b)
}

func TestTools(t *testing.T) {
	e := newEnv(t)
	chat, resp := e.toolset.ChatTools(), e.toolset.ResponseTools()
	for i, tool := range e.tt.Tools() {
		t.Run(tool.Name()+": a non-strict function with the tool's schema", func(t *testing.T) {
			schema := jsonOf(t, tool.Schema())
			c := chat[i].OfFunction.Function
			if c.Name != tool.Name() || c.Description.Value != tool.Description() || c.Strict.Value || !c.Strict.Valid() || jsonOf(t, c.Parameters) != schema {
				t.Errorf("chat tool = %s", jsonOf(t, chat[i]))
			}
			r := resp[i].OfFunction
			if r.Name != tool.Name() || r.Description.Value != tool.Description() || r.Strict.Value || !r.Strict.Valid() || jsonOf(t, r.Parameters) != schema {
				t.Errorf("responses tool = %s", jsonOf(t, resp[i]))
			}
		})
	}
}

// The calls of the dispatch tests: a1's task, another agent's, an unknown tool.
var dispatchCalls = []struct{ id, name, args, want string }{
	{"c1", "task_output", `{"task_id":"bash-1"}`, "[status: running]"},
	{"c2", "task_output", `{"task_id":"bash-2"}`, "task not found: bash-2"},
	{"c3", "no_such_tool", `{}`, "unknown tool: no_such_tool"},
}

func TestDispatchChat(t *testing.T) {
	t.Run("one tool message per call, in order, run as the owner; the notices are parts of the last", func(t *testing.T) {
		e := newEnv(t)
		if err := e.inbox.Inject(bg, notice); err != nil {
			t.Fatal(err)
		}
		var calls []any
		for _, c := range dispatchCalls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		var msg sdk.ChatCompletionMessage
		if err := json.Unmarshal([]byte(jsonOf(t, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})), &msg); err != nil {
			t.Fatal(err)
		}
		out, ok := e.toolset.DispatchChat(bg, msg)
		if !ok || len(out) != len(dispatchCalls) {
			t.Fatalf("DispatchChat = %d messages, %v", len(out), ok)
		}
		for i, c := range dispatchCalls {
			tm := out[i].OfTool
			var parts []string
			for _, p := range tm.Content.OfArrayOfContentParts {
				parts = append(parts, p.Text)
			}
			want := []string{c.want}
			if i == len(dispatchCalls)-1 {
				want = append(want, notice)
			}
			if tm.ToolCallID != c.id || len(parts) != len(want) || !strings.HasPrefix(parts[0], want[0]) || !slices.Equal(parts[1:], want[1:]) {
				t.Errorf("message %d = %s %q, want %s %q", i, tm.ToolCallID, parts, c.id, want)
			}
		}
		if e.inbox.Len() != 0 {
			t.Errorf("inbox holds %d notices after the dispatch", e.inbox.Len())
		}
	})
	t.Run("a message without tool calls runs nothing", func(t *testing.T) {
		e := newEnv(t)
		if _, ok := e.toolset.DispatchChat(bg, sdk.ChatCompletionMessage{Content: "done"}); ok {
			t.Error("DispatchChat answered a message without tool calls")
		}
	})
	t.Run("ChatNoticeMessage is a user message of one text part per notice", func(t *testing.T) {
		got := jsonOf(t, taskrt.ChatNoticeMessage([]string{"n1", "n2"}))
		if want := `{"content":[{"text":"n1","type":"text"},{"text":"n2","type":"text"}],"role":"user"}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

func TestDispatchResponse(t *testing.T) {
	t.Run("one function_call_output per call, in order, run as the owner; the notices are items of the last", func(t *testing.T) {
		e := newEnv(t)
		if err := e.inbox.Inject(bg, notice); err != nil {
			t.Fatal(err)
		}
		output := []any{map[string]any{"type": "message", "id": "m", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "checking", "annotations": []any{}}}}}
		for _, c := range dispatchCalls {
			output = append(output, map[string]any{"type": "function_call", "id": "fc" + c.id, "call_id": c.id, "name": c.name, "arguments": c.args, "status": "completed"})
		}
		var resp responses.Response
		if err := json.Unmarshal([]byte(jsonOf(t, map[string]any{"id": "r", "object": "response", "output": output})), &resp); err != nil {
			t.Fatal(err)
		}
		out, ok := e.toolset.DispatchResponse(bg, &resp)
		if !ok || len(out) != len(dispatchCalls) {
			t.Fatalf("DispatchResponse = %d items, %v", len(out), ok)
		}
		for i, c := range dispatchCalls {
			o := out[i].OfFunctionCallOutput
			parts := []string{o.Output.OfString.Value}
			if list := o.Output.OfResponseFunctionCallOutputItemArray; list != nil {
				parts = nil
				for _, p := range list {
					parts = append(parts, p.OfInputText.Text)
				}
			}
			want := []string{c.want}
			if i == len(dispatchCalls)-1 {
				want = append(want, notice)
			}
			if o.CallID.Value != c.id || len(parts) != len(want) || !strings.HasPrefix(parts[0], want[0]) || !slices.Equal(parts[1:], want[1:]) {
				t.Errorf("item %d = %s %q, want %s %q", i, o.CallID.Value, parts, c.id, want)
			}
		}
		if got := jsonOf(t, out[0]); got != `{"call_id":"c1","output":"[status: running]","type":"function_call_output"}` {
			t.Errorf("item 0 on the wire = %s", got)
		}
	})
	t.Run("a response without function calls runs nothing", func(t *testing.T) {
		e := newEnv(t)
		if _, ok := e.toolset.DispatchResponse(bg, &responses.Response{}); ok {
			t.Error("DispatchResponse answered a response without function calls")
		}
	})
	t.Run("ResponseNoticeItem is a user message item of one input_text per notice", func(t *testing.T) {
		got := jsonOf(t, taskrt.ResponseNoticeItem([]string{"n1", "n2"}))
		if want := `{"content":[{"text":"n1","type":"input_text"},{"text":"n2","type":"input_text"}],"role":"user"}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// Each example loop ends with the model's answer after an inbox wake-up, hands the
// notice over as a user message between turns, and leaves nothing running.
func TestExampleLoops(t *testing.T) {
	for name, run := range map[string]func(io.Writer) (exampleReport, error){
		"responses": runResponsesExample, "chat completions": runChatExample,
	} {
		t.Run(name, func(t *testing.T) {
			var transcript bytes.Buffer
			rep, err := run(&transcript)
			if err != nil {
				t.Fatalf("%v\n%s", err, transcript.String())
			}
			if rep.wakeups != 1 {
				t.Errorf("wake-ups = %d, want 1", rep.wakeups)
			}
			if want := "All 42 tests passed, and lint found no issues."; rep.answer != want {
				t.Errorf("answer = %q, want %q", rep.answer, want)
			}
			if rep.stats != (actors.Stats{}) || rep.processes != 0 {
				t.Errorf("after the loop: stats %+v, %d processes; want nothing left", rep.stats, rep.processes)
			}
			woken := 0
			for _, r := range rep.requests {
				if !strings.Contains(lastText(r), "finished [status: completed, exit code: 0]") {
					continue
				}
				woken++
				items, _ := r["messages"].([]any)
				if items == nil {
					items, _ = r["input"].([]any)
				}
				if last := items[len(items)-1].(map[string]any); last["role"] != "user" {
					t.Errorf("the notice came in %s, want a user message", jsonOf(t, last))
				}
			}
			if woken != 1 {
				t.Errorf("%d requests carried the notice, want 1", woken)
			}
		})
	}
}
