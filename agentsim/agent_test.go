package agentsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// fakeTools answers every call with "<tool> ok", recording the caller.
type fakeTools struct {
	mu      sync.Mutex
	callers []messages.AgentID
	block   map[string]chan struct{} // a call to this tool waits for the channel
}

func (f *fakeTools) Call(ctx context.Context, caller messages.AgentID, name string, _ json.RawMessage) tools.Result {
	f.mu.Lock()
	f.callers = append(f.callers, caller)
	ch := f.block[name]
	f.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return tools.Result{Text: ctx.Err().Error(), IsError: true}
		}
	}
	return tools.Result{Text: name + " ok"}
}

// steps is a model that returns the given steps in order.
func steps(ss ...Step) Model {
	var mu sync.Mutex
	return modelFunc(func(context.Context, *Session) (Step, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(ss) == 0 {
			return Step{}, errors.New("no more steps")
		}
		s := ss[0]
		ss = ss[1:]
		return s, nil
	})
}

func tc(tool string) ToolCall {
	return ToolCall{Tool: tool, Args: json.RawMessage(`{}`)}
}

func kinds(es []Entry) string {
	var parts []string
	for _, e := range es {
		p := e.Kind
		if e.Tool != "" {
			p += ":" + e.Tool
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func TestTurn(t *testing.T) {
	t.Run("tool calls run as the agent and results follow in call order", func(t *testing.T) {
		// The first call blocks until the second has run: they must be concurrent.
		second := make(chan struct{})
		ft := &fakeTools{block: map[string]chan struct{}{"first": second}}
		model := steps(
			Step{Text: "two at once", Calls: []ToolCall{tc("first"), tc("second")}},
			Step{Text: "done"},
		)
		a := &Agent{id: "a1", session: newSession("a1", nil), model: model,
			tools: callerFunc(func(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result {
				r := ft.Call(ctx, caller, name, args)
				if name == "second" {
					close(second)
				}
				return r
			})}
		res := a.Turn(context.Background(), "go")
		if res != (subagent.Result{Stop: subagent.StopCompleted, Output: "done"}) {
			t.Errorf("result = %+v", res)
		}
		want := "user assistant tool_call:first tool_call:second tool_result:first tool_result:second assistant"
		if got := kinds(a.session.Entries()); got != want {
			t.Errorf("transcript = %s, want %s", got, want)
		}
		for _, c := range ft.callers {
			if c != "a1" {
				t.Errorf("called as %q, want a1", c)
			}
		}
	})
	t.Run("notices injected between steps are seen on the next step", func(t *testing.T) {
		sess := newSession("a1", nil)
		var seen []string
		n := 0
		model := modelFunc(func(_ context.Context, s *Session) (Step, error) {
			n++
			if n == 1 {
				return Step{Calls: []ToolCall{tc("notify")}}, nil
			}
			seen = s.noticeTexts()
			return Step{Text: "ok"}, nil
		})
		inject := callerFunc(func(ctx context.Context, _ messages.AgentID, _ string, _ json.RawMessage) tools.Result {
			_ = sess.inject(ctx, "background task bash-1 finished")
			return tools.Result{Text: "done"}
		})
		a := &Agent{id: "a1", session: sess, model: model, tools: inject}
		a.Turn(context.Background(), "go")
		if len(seen) != 1 || seen[0] != "background task bash-1 finished" {
			t.Errorf("model saw notices %q", seen)
		}
	})
	t.Run("stop reasons", func(t *testing.T) {
		tests := []struct {
			name  string
			model Model
			want  subagent.Result
		}{
			{"final answer defaults to completed", steps(Step{Text: "x"}), subagent.Result{Stop: "completed", Output: "x"}},
			{"a stop reason is kept", steps(Step{Text: "cut", Stop: subagent.StopMaxTokens}), subagent.Result{Stop: "max-tokens", Output: "cut"}},
			{"a model error is stop error with detail", steps(Step{Text: "thinking", Calls: []ToolCall{tc("t")}}),
				subagent.Result{Stop: "error", Output: "thinking", Detail: "no more steps"}},
			{"a model panic is stop error", modelFunc(func(context.Context, *Session) (Step, error) { panic("boom") }),
				subagent.Result{Stop: "error", Detail: "model panicked: boom"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				a := &Agent{id: "a1", session: newSession("a1", nil), model: tc.model, tools: &fakeTools{}}
				if got := a.Turn(context.Background(), "go"); got != tc.want {
					t.Errorf("Turn = %+v, want %+v", got, tc.want)
				}
				last := a.session.Entries()[a.session.size()-1]
				if !last.Final || last.Stop != tc.want.Stop {
					t.Errorf("last entry = %+v, want the final %s entry", last, tc.want.Stop)
				}
			})
		}
	})
	t.Run("step limit", func(t *testing.T) {
		loop := modelFunc(func(context.Context, *Session) (Step, error) {
			return Step{Calls: []ToolCall{tc("t")}}, nil
		})
		a := &Agent{id: "a1", session: newSession("a1", nil), model: loop, tools: &fakeTools{}, maxSteps: 3}
		if got := a.Turn(context.Background(), "go"); got.Stop != "error" || got.Detail != "step limit reached (3 steps)" {
			t.Errorf("Turn = %+v", got)
		}
	})
	t.Run("cancellation aborts with the cause and the partial output", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		block := make(chan struct{})
		ft := &fakeTools{block: map[string]chan struct{}{"slow": block}}
		model := steps(Step{Text: "half done", Calls: []ToolCall{tc("slow")}})
		a := &Agent{id: "a1", session: newSession("a1", func(e Entry) {
			if e.Kind == entryToolCall {
				cancel(fmt.Errorf("user pressed stop"))
			}
		}), model: model, tools: ft}
		got := a.Turn(ctx, "go")
		want := subagent.Result{Stop: subagent.StopAborted, Output: "half done", Detail: "user pressed stop"}
		if got != want {
			t.Errorf("Turn = %+v, want %+v", got, want)
		}
	})
}

type callerFunc func(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result

func (f callerFunc) Call(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result {
	return f(ctx, caller, name, args)
}

func TestSessionIsSafeForConcurrentUse(t *testing.T) {
	var observed sync.Map
	s := newSession("a1", func(e Entry) { observed.Store(e.Seq, e.Kind) })
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = s.inject(context.Background(), fmt.Sprintf("notice %d", i)) })
		wg.Go(func() { s.append(Entry{Kind: entryAssistant, Text: "x"}) })
		wg.Go(func() { _ = s.Entries() })
	}
	if err := s.waitNotices(ctxT(t), 50); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if s.size() != 100 || len(s.noticeTexts()) != 50 {
		t.Errorf("len = %d, notices = %d; want 100, 50", s.size(), len(s.noticeTexts()))
	}
	for i, e := range s.Entries() {
		if e.Seq != i || e.Agent != "a1" {
			t.Fatalf("entry %d = %+v", i, e)
		}
		if k, ok := observed.Load(i); !ok || k != e.Kind {
			t.Errorf("observer missed entry %d", i)
		}
	}
	if got := len(s.since(98)); got != 2 {
		t.Errorf("since(98) has %d entries, want 2", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.waitNotices(ctx, 51); !errors.Is(err, context.Canceled) {
		t.Errorf("waitNotices on a cancelled context = %v", err)
	}
}
