package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/taskrt/taskrt/actors"
	fakeproducer "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
	taskrt "github.com/taskrt/taskrt/tools/adapters/anthropic"
)

var bg = context.Background()

// env is a runtime with the task tools, an agent "a1" whose injector is an inbox,
// and a Toolset bound to it; torn down and checked at the end of the test.
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
	ts, err := taskrt.New("a1", tt.Tools(), taskrt.WithInbox(inbox))
	if err != nil {
		t.Fatal(err)
	}
	return &env{rt: rt, tt: tt, inbox: inbox, toolset: ts}
}

// start starts a fake task owned by owner and returns it; it is finished at the end
// of the test.
func (e *env) start(t *testing.T, owner messages.AgentID) (*fakeproducer.Task, messages.TaskID) {
	t.Helper()
	f := fakeproducer.New(true)
	id, err := e.rt.Tasks().Start(bg, f.Spec("bash", "make", owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Completed}) })
	return f, id
}

func TestParams(t *testing.T) {
	e := newEnv(t)
	params := e.toolset.Params()
	var names []string
	for i, p := range params {
		tool := e.tt.Tools()[i]
		names = append(names, p.OfTool.Name)
		t.Run(tool.Name()+": the input schema is the tool's", func(t *testing.T) {
			got, err := json.Marshal(p.OfTool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tool.Schema())
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Errorf("input_schema\n got: %s\nwant: %s", got, want)
			}
			if p.OfTool.Description.Value != tool.Description() {
				t.Errorf("description = %q", p.OfTool.Description.Value)
			}
		})
	}
	if want := []string{"task_output", "task_list", "task_kill", "task_wait", "task_input", "task_watch"}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	t.Run("the beta tools carry the same schemas", func(t *testing.T) {
		for i, bt := range e.toolset.BetaTools() {
			got, _ := json.Marshal(bt.InputSchema())
			want, _ := json.Marshal(params[i].OfTool.InputSchema)
			if bt.Name() != params[i].OfTool.Name || !jsonEqual(t, got, want) {
				t.Errorf("%s: %s, want %s", bt.Name(), got, want)
			}
		}
	})
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// message decodes a Messages API response body into the SDK's Message.
func message(t *testing.T, body string) *sdk.Message {
	t.Helper()
	var m sdk.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestDispatch(t *testing.T) {
	t.Run("one tool_result per tool_use, in order, run as the owner, then the notices beside", func(t *testing.T) {
		e := newEnv(t)
		e.start(t, "a1")
		if err := e.rt.Agents().Register(bg, "someone-else"); err != nil {
			t.Fatal(err)
		}
		e.start(t, "someone-else") // bash-2: another agent's, not found for a1
		if err := e.inbox.Inject(bg, "background task bash-9 (bash: x) finished [status: completed]. Read its output with task_output."); err != nil {
			t.Fatal(err)
		}
		msg := message(t, `{"id":"m","type":"message","role":"assistant","model":"x","stop_reason":"tool_use","content":[
			{"type":"text","text":"checking"},
			{"type":"tool_use","id":"t1","name":"task_output","input":{"task_id":"bash-1"}},
			{"type":"tool_use","id":"t2","name":"task_output","input":{"task_id":"bash-2"}},
			{"type":"tool_use","id":"t3","name":"no_such_tool","input":{}}]}`)
		answer, ok := e.toolset.Dispatch(bg, msg)
		if !ok {
			t.Fatal("Dispatch found no tool_use")
		}
		type block struct {
			id, text string
			isError  bool
		}
		var got []block
		for _, b := range answer.OfUser.Content {
			switch {
			case b.OfToolResult != nil:
				got = append(got, block{b.OfToolResult.ToolUseID, b.OfToolResult.Content[0].OfText.Text, b.OfToolResult.IsError.Value})
			case b.OfText != nil:
				got = append(got, block{"", b.OfText.Text, false})
			}
		}
		want := []block{
			{"t1", "[status: running]", false},
			{"t2", "task not found: bash-2", true},
			{"t3", "unknown tool: no_such_tool", true},
			{"", "background task bash-9 (bash: x) finished [status: completed]. Read its output with task_output.", false},
		}
		if len(got) != len(want) {
			t.Fatalf("answer = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].id != want[i].id || got[i].isError != want[i].isError || !strings.HasPrefix(got[i].text, want[i].text) {
				t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if e.inbox.Len() != 0 {
			t.Errorf("inbox still holds %d notices after Dispatch", e.inbox.Len())
		}
	})
	t.Run("a message without tool_use runs nothing", func(t *testing.T) {
		e := newEnv(t)
		if _, ok := e.toolset.Dispatch(bg, message(t, `{"id":"m","type":"message","role":"assistant","model":"x","stop_reason":"end_turn","content":[{"type":"text","text":"done"}]}`)); ok {
			t.Error("Dispatch answered a message without tool_use")
		}
	})
	t.Run("NoticeMessage is a user message of one text block per notice", func(t *testing.T) {
		m := taskrt.NoticeMessage([]string{"n1", "n2"})
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"content":[{"text":"n1","type":"text"},{"text":"n2","type":"text"}],"role":"user"}`; !jsonEqual(t, b, []byte(want)) {
			t.Errorf("NoticeMessage = %s, want %s", b, want)
		}
	})
}

// The BetaTools in the SDK's tool runner: calls run as the owner; a notice queued
// between two turns rides inside the next successful tool_result's content, not in
// an error's.
func TestBetaToolRunner(t *testing.T) {
	e := newEnv(t)
	e.start(t, "a1")
	const notice = "background task bash-7 (bash: y) finished [status: completed]. Read its output with task_output."
	model := newFakeModel(
		rule{"bash-7", func() reply { return reply{text: "noted"} }},
		rule{"task not found", func() reply { return reply{calls: []call{{"task_list", `{}`}}} }},
		rule{"please", func() reply { return reply{calls: []call{{"task_output", `{"task_id":"bash-99"}`}}} }},
	)
	defer model.Close()
	client := sdk.NewClient(option.WithBaseURL(model.URL()), option.WithAPIKey("fake"), option.WithMaxRetries(0))
	runner := client.Beta.Messages.NewToolRunner(e.toolset.BetaTools(), sdk.BetaToolRunnerParams{
		BetaMessageNewParams: sdk.BetaMessageNewParams{
			Model: "claude-fake", MaxTokens: 256,
			Messages: []sdk.BetaMessageParam{sdk.NewBetaUserMessage(sdk.NewBetaTextBlock("please"))},
		},
		DisableThread: true,
	})
	if _, err := runner.NextMessage(bg); err != nil { // the model calls task_output on an unknown id
		t.Fatal(err)
	}
	if err := e.inbox.Inject(bg, notice); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.NextMessage(bg); err != nil { // the error result goes out; the model lists
		t.Fatal(err)
	}
	if e.inbox.Len() != 1 {
		t.Errorf("an error result took the notice: inbox holds %d", e.inbox.Len())
	}
	final, err := runner.RunToCompletion(bg) // task_list's result, with the notice inside
	if err != nil {
		t.Fatal(err)
	}
	if got := final.Content[0].Text; got != "noted" {
		t.Errorf("final answer = %q", got)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if got, want := toolResults(t, reqs[1]), []string{"is_error Error: task not found: bash-99"}; !slices.Equal(got, want) {
		t.Errorf("second request's tool results = %q, want %q", got, want)
	}
	if got, want := toolResults(t, reqs[2]), []string{"bash-1 [bash] running — make", notice}; !slices.Equal(got, want) {
		t.Errorf("third request's tool results = %q, want %q", got, want)
	}
}

// toolResults are the texts of the tool_result blocks of a request's last message
// ("is_error " before an error's).
func toolResults(t *testing.T, req map[string]any) []string {
	t.Helper()
	msgs := req["messages"].([]any)
	var out []string
	for _, b := range msgs[len(msgs)-1].(map[string]any)["content"].([]any) {
		b := b.(map[string]any)
		if b["type"] != "tool_result" {
			continue
		}
		prefix := ""
		if b["is_error"] == true {
			prefix = "is_error "
		}
		for _, c := range b["content"].([]any) {
			out = append(out, prefix+c.(map[string]any)["text"].(string))
		}
	}
	return out
}

// The example loop ends with the model's answer after an inbox wake-up, and leaves
// nothing running.
func TestExampleLoop(t *testing.T) {
	rep, err := runExample(io.Discard)
	if err != nil {
		t.Fatal(err)
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
	t.Run("the notice reached the model as the user message of the woken turn", func(t *testing.T) {
		var woken map[string]any
		for _, r := range rep.requests {
			if strings.Contains(lastMessageText(r), "finished [status: completed, exit code: 0]") {
				woken = r
			}
		}
		if woken == nil {
			t.Fatal("no request carried the notice")
		}
		msgs := woken["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		prev := msgs[len(msgs)-2].(map[string]any)
		if last["role"] != "user" || prev["role"] != "assistant" {
			t.Errorf("the notice is in a %v message after a %v one, want a user message after the ended turn", last["role"], prev["role"])
		}
		if got := toolResults(t, woken); got != nil {
			t.Errorf("the woken turn's message carries tool results %q", got)
		}
	})
}
