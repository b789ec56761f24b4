package agentsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/taskrt/taskrt/agentsim"
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
func steps(ss ...agentsim.Step) agentsim.Model {
	var mu sync.Mutex
	return agentsim.ModelFunc(func(context.Context, *agentsim.Session) (agentsim.Step, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(ss) == 0 {
			return agentsim.Step{}, errors.New("no more steps")
		}
		s := ss[0]
		ss = ss[1:]
		return s, nil
	})
}

func tc(tool string) agentsim.ToolCall {
	return agentsim.ToolCall{Tool: tool, Args: json.RawMessage(`{}`)}
}

func kinds(es []agentsim.Entry) string {
	var parts []string
	for _, e := range es {
		p := string(e.Kind)
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
			agentsim.Step{Text: "two at once", Calls: []agentsim.ToolCall{tc("first"), tc("second")}},
			agentsim.Step{Text: "done"},
		)
		a := &agentsim.Agent{ID: "a1", Session: agentsim.NewSession("a1", nil), Model: model,
			Tools: callerFunc(func(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result {
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
		if got := kinds(a.Session.Entries()); got != want {
			t.Errorf("transcript = %s, want %s", got, want)
		}
		for _, c := range ft.callers {
			if c != "a1" {
				t.Errorf("called as %q, want a1", c)
			}
		}
	})
	t.Run("notices injected between steps are seen on the next step", func(t *testing.T) {
		sess := agentsim.NewSession("a1", nil)
		var seen []string
		n := 0
		model := agentsim.ModelFunc(func(_ context.Context, s *agentsim.Session) (agentsim.Step, error) {
			n++
			if n == 1 {
				return agentsim.Step{Calls: []agentsim.ToolCall{tc("notify")}}, nil
			}
			seen = s.Notices()
			return agentsim.Step{Text: "ok"}, nil
		})
		inject := callerFunc(func(ctx context.Context, _ messages.AgentID, _ string, _ json.RawMessage) tools.Result {
			_ = sess.Inject(ctx, "background task bash-1 finished")
			return tools.Result{Text: "done"}
		})
		a := &agentsim.Agent{ID: "a1", Session: sess, Model: model, Tools: inject}
		a.Turn(context.Background(), "go")
		if len(seen) != 1 || seen[0] != "background task bash-1 finished" {
			t.Errorf("model saw notices %q", seen)
		}
	})
	t.Run("stop reasons", func(t *testing.T) {
		tests := []struct {
			name  string
			model agentsim.Model
			want  subagent.Result
		}{
			{"final answer defaults to completed", steps(agentsim.Step{Text: "x"}), subagent.Result{Stop: "completed", Output: "x"}},
			{"a stop reason is kept", steps(agentsim.Step{Text: "cut", Stop: subagent.StopMaxTokens}), subagent.Result{Stop: "max-tokens", Output: "cut"}},
			{"a model error is stop error with detail", steps(agentsim.Step{Text: "thinking", Calls: []agentsim.ToolCall{tc("t")}}),
				subagent.Result{Stop: "error", Output: "thinking", Detail: "no more steps"}},
			{"a model panic is stop error", agentsim.ModelFunc(func(context.Context, *agentsim.Session) (agentsim.Step, error) { panic("boom") }),
				subagent.Result{Stop: "error", Detail: "model panicked: boom"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				a := &agentsim.Agent{ID: "a1", Session: agentsim.NewSession("a1", nil), Model: tc.model, Tools: &fakeTools{}}
				if got := a.Turn(context.Background(), "go"); got != tc.want {
					t.Errorf("Turn = %+v, want %+v", got, tc.want)
				}
				last := a.Session.Entries()[a.Session.Len()-1]
				if !last.Final || last.Stop != tc.want.Stop {
					t.Errorf("last entry = %+v, want the final %s entry", last, tc.want.Stop)
				}
			})
		}
	})
	t.Run("step limit", func(t *testing.T) {
		loop := agentsim.ModelFunc(func(context.Context, *agentsim.Session) (agentsim.Step, error) {
			return agentsim.Step{Calls: []agentsim.ToolCall{tc("t")}}, nil
		})
		a := &agentsim.Agent{ID: "a1", Session: agentsim.NewSession("a1", nil), Model: loop, Tools: &fakeTools{}, MaxSteps: 3}
		if got := a.Turn(context.Background(), "go"); got.Stop != "error" || got.Detail != "step limit reached (3 steps)" {
			t.Errorf("Turn = %+v", got)
		}
	})
	t.Run("cancellation aborts with the cause and the partial output", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		block := make(chan struct{})
		ft := &fakeTools{block: map[string]chan struct{}{"slow": block}}
		model := steps(agentsim.Step{Text: "half done", Calls: []agentsim.ToolCall{tc("slow")}})
		a := &agentsim.Agent{ID: "a1", Session: agentsim.NewSession("a1", func(e agentsim.Entry) {
			if e.Kind == agentsim.EntryToolCall {
				cancel(fmt.Errorf("user pressed stop"))
			}
		}), Model: model, Tools: ft}
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
	s := agentsim.NewSession("a1", func(e agentsim.Entry) { observed.Store(e.Seq, e.Kind) })
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = s.Inject(context.Background(), fmt.Sprintf("notice %d", i)) })
		wg.Go(func() { s.Append(agentsim.Entry{Kind: agentsim.EntryAssistant, Text: "x"}) })
		wg.Go(func() { _ = s.Entries() })
	}
	if err := s.WaitNotices(ctxT(t), 50); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if s.Len() != 100 || len(s.Notices()) != 50 {
		t.Errorf("len = %d, notices = %d; want 100, 50", s.Len(), len(s.Notices()))
	}
	for i, e := range s.Entries() {
		if e.Seq != i || e.Agent != "a1" {
			t.Fatalf("entry %d = %+v", i, e)
		}
		if k, ok := observed.Load(i); !ok || k != e.Kind {
			t.Errorf("observer missed entry %d", i)
		}
	}
	if got := len(s.Since(98)); got != 2 {
		t.Errorf("Since(98) has %d entries, want 2", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitNotices(ctx, 51); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitNotices on a cancelled context = %v", err)
	}
}
