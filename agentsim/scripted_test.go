package agentsim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

func TestScripted(t *testing.T) {
	t.Run("variables: saved handles, the prompt and the latest result", func(t *testing.T) {
		script := modelScript{Steps: []scriptStep{
			{Call: &scriptCall{Tool: "start", Args: json.RawMessage(`{"n": 1}`), Save: "job"}},
			{Call: &scriptCall{Tool: "read", Args: json.RawMessage(`{"task_id": "${job}", "note": "${prompt}", "n": 2}`)}},
			{Answer: ptr("${job}: ${result}")},
		}}
		m := newScripted("m", script, nil)
		var args []string
		caller := callerFunc(func(_ context.Context, _ messages.AgentID, name string, raw json.RawMessage) tools.Result {
			args = append(args, string(raw))
			if name == "start" {
				return tools.Result{Text: "started", Data: tools.Handle{Kind: "background", TaskID: "bash-7"}}
			}
			return tools.Result{Text: "out \"quoted\""}
		})
		a := &Agent{id: "a1", session: newSession("a1", nil), model: m, tools: caller}
		res := a.Turn(context.Background(), `say "hi"`)
		if want := `bash-7: out "quoted"`; res.Output != want {
			t.Errorf("answer = %q, want %q", res.Output, want)
		}
		want := []string{`{"n":1}`, `{"n":2,"note":"say \"hi\"","task_id":"bash-7"}`}
		if strings.Join(args, "|") != strings.Join(want, "|") {
			t.Errorf("args = %q, want %q", args, want)
		}
		if f := m.failed(); len(f) != 0 {
			t.Errorf("failures = %q", f)
		}
	})
	t.Run("an unmet expectation ends the turn and is recorded", func(t *testing.T) {
		script := modelScript{Steps: []scriptStep{
			{Call: &scriptCall{Tool: "x", Expect: "wanted", ExpectError: new(bool)}},
			{Answer: ptr("unreachable")},
		}}
		m := newScripted("m", script, nil)
		caller := callerFunc(func(context.Context, messages.AgentID, string, json.RawMessage) tools.Result {
			return tools.Result{Text: "other", IsError: true}
		})
		a := &Agent{id: "a1", session: newSession("a1", nil), model: m, tools: caller}
		res := a.Turn(context.Background(), "go")
		if res.Stop != "error" || !strings.HasPrefix(res.Detail, "expectation failed: ") {
			t.Errorf("result = %+v", res)
		}
		want := []string{
			`model m: x result "other" does not contain "wanted"`,
			`model m: x result is_error = true, want false: other`,
		}
		if got := m.failed(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("failures = %q, want %q", got, want)
		}
	})
	t.Run("a script continues across turns and says when it is exhausted", func(t *testing.T) {
		m := newScripted("m", modelScript{Steps: []scriptStep{{Answer: ptr("one")}}}, nil)
		a := &Agent{id: "a1", session: newSession("a1", nil), model: m, tools: &fakeTools{}}
		if got := a.Turn(context.Background(), "1").Output; got != "one" {
			t.Errorf("turn 1 = %q", got)
		}
		if got := a.Turn(context.Background(), "2"); got.Stop != "error" || got.Detail != "model m: script exhausted after 1 steps" {
			t.Errorf("turn 2 = %+v", got)
		}
	})
	t.Run("gates and notices block until satisfied or cancelled", func(t *testing.T) {
		gates := &gateSet{}
		m := newScripted("m", modelScript{Steps: []scriptStep{
			{Await: "go", AwaitNotices: 1, Answer: ptr("released")},
		}}, gates)
		sess := newSession("a1", nil)
		got := make(chan string, 1)
		go func() {
			st, err := m.Next(context.Background(), sess)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- st.Text
		}()
		gates.open("go")
		_ = sess.inject(context.Background(), "n")
		if s := <-got; s != "released" {
			t.Errorf("Next = %q", s)
		}
		never := newScripted("n", modelScript{Steps: []scriptStep{{Await: neverGate, Answer: ptr("")}}}, gates)
		gates.open(neverGate)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := never.Next(ctx, sess); !errors.Is(err, context.Canceled) {
			t.Errorf("Next on the never gate = %v, want context.Canceled", err)
		}
	})
	t.Run("validate", func(t *testing.T) {
		if err := (modelScript{}).validate(); err == nil || err.Error() != "no steps" {
			t.Errorf("empty script: %v", err)
		}
		bad := modelScript{Steps: []scriptStep{{Answer: ptr("x")}, {Call: &scriptCall{Tool: "t", Args: json.RawMessage(`{`)}}}}
		if err := bad.validate(); err == nil || err.Error() != "step 2: call t: args are not valid JSON" {
			t.Errorf("bad args: %v", err)
		}
		for name, m := range builtinModels() {
			if err := m.validate(); err != nil {
				t.Errorf("built-in %s: %v", name, err)
			}
		}
	})
}
