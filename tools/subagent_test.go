package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// saLauncher is a fake sub-agent launcher: every run ends with result once release
// is closed (nil: at once), and Cancel ends it as aborted.
type saLauncher struct {
	result  subagent.Result
	release chan struct{}
	err     error         // Launch fails with it
	started chan struct{} // when set, closed by the first launch
	hold    chan struct{} // when set, every run's Dispose waits for it to close

	mu       sync.Mutex // protects launches
	launches []subagent.Request
}

func (l *saLauncher) Launch(_ context.Context, req subagent.Request) (subagent.Run, error) {
	l.mu.Lock()
	l.launches = append(l.launches, req)
	l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if l.started != nil {
		close(l.started)
	}
	r := &saRun{done: make(chan struct{}), hold: l.hold}
	go func() {
		if l.release != nil {
			select {
			case <-l.release:
			case <-r.done:
				return
			}
		}
		r.finish(l.result)
	}()
	return r, nil
}

func (l *saLauncher) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.launches)
}

type saRun struct {
	once   sync.Once
	done   chan struct{}
	hold   chan struct{}
	result subagent.Result
}

func (r *saRun) finish(res subagent.Result) {
	r.once.Do(func() { r.result = res; close(r.done) })
}
func (r *saRun) Cancel(reason string) {
	r.finish(subagent.Result{Stop: subagent.StopAborted, Detail: reason})
}
func (r *saRun) Wait() subagent.Result { <-r.done; return r.result }
func (r *saRun) Dispose(context.Context) error {
	if r.hold != nil {
		<-r.hold
	}
	return nil
}

// saEnv is a runtime with the task tools attached and a subagent tool on a fake
// launcher; it is closed and checked for leftovers when the test ends.
type saEnv struct {
	rt   *actors.Runtime
	set  tools.Set
	tool *tools.SubagentTool
	l    *saLauncher
}

func newSaEnv(t *testing.T, l *saLauncher, surface bool, rtOpts []actors.Option, opts ...tools.SubagentOption) *saEnv {
	t.Helper()
	rt, err := actors.NewRuntime(rtOpts...)
	if err != nil {
		t.Fatal(err)
	}
	var all []tools.Tool
	var tt *tools.TaskTools
	if surface {
		tt = tools.NewTaskTools(rt)
		all = tt.Tools()
	}
	sub := tools.NewSubagent(rt, subagent.New(l), opts...)
	set, err := tools.NewSet(append(all, sub)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if tt != nil {
			tt.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got := rt.Stats(); got != (actors.Stats{}) {
			t.Errorf("Stats after Close = %+v, want zero", got)
		}
	})
	if err := rt.Agents().Register(context.Background(), "a1"); err != nil {
		t.Fatal(err)
	}
	return &saEnv{rt: rt, set: set, tool: sub, l: l}
}

func (e *saEnv) call(ctx context.Context, name, args string) tools.Result {
	return e.set.Call(ctx, "a1", name, json.RawMessage(args))
}

func propertyNames(schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func TestSubagentSchema(t *testing.T) {
	t.Run("run_in_background is offered by default", func(t *testing.T) {
		e := newSaEnv(t, &saLauncher{}, true, nil)
		s := e.tool.Schema()
		if got, want := propertyNames(s), []string{"description", "model", "prompt", "run_in_background"}; !slices.Equal(got, want) {
			t.Errorf("properties = %v, want %v", got, want)
		}
		req, _ := s["required"].([]any)
		if len(req) != 2 || req[0] != "description" || req[1] != "prompt" {
			t.Errorf("required = %v, want [description prompt]", req)
		}
		if e.tool.Name() != "subagent" || !strings.Contains(e.tool.Description(), "run_in_background: true") {
			t.Errorf("name %q, description %q", e.tool.Name(), e.tool.Description())
		}
	})
	t.Run("EnableRunInBackground false removes it from the schema and rejects it", func(t *testing.T) {
		l := &saLauncher{result: subagent.Result{Stop: subagent.StopCompleted, Output: "fg"}}
		e := newSaEnv(t, l, true, nil, tools.WithSubagentRunInBackground(false))
		if got, want := propertyNames(e.tool.Schema()), []string{"description", "model", "prompt"}; !slices.Equal(got, want) {
			t.Errorf("properties = %v, want %v", got, want)
		}
		if strings.Contains(e.tool.Description(), "run_in_background") {
			t.Error("the description mentions run_in_background")
		}
		r := e.call(context.Background(), "subagent", `{"description":"d","prompt":"p","run_in_background":true}`)
		if want := (tools.Result{Text: `invalid arguments: unknown field "run_in_background"`, IsError: true}); r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
		if e.l.count() != 0 {
			t.Error("a rejected call launched a child")
		}
		if r := e.call(context.Background(), "subagent", `{"description":"d","prompt":"p"}`); r.Text != "fg" || r.IsError {
			t.Errorf("foreground call = %+v", r)
		}
	})
}

func TestSubagentBadArguments(t *testing.T) {
	tests := []struct{ name, args, want string }{
		{"missing prompt", `{"description":"d"}`, "invalid arguments: missing required field prompt"},
		{"blank description", `{"description":"  ","prompt":"p"}`, "invalid arguments: description must not be empty"},
		{"empty prompt", `{"description":"d","prompt":""}`, "invalid arguments: prompt must not be empty"},
		{"wrong type", `{"description":"d","prompt":"p","run_in_background":"yes"}`, "invalid arguments: run_in_background must be a boolean"},
		{"unknown field", `{"description":"d","prompt":"p","subagent_type":"x"}`, `invalid arguments: unknown field "subagent_type"`},
		{"not an object", `["d","p"]`, "invalid arguments: arguments must be a JSON object"},
		{"null model", `{"description":"d","prompt":"p","model":null}`, "invalid arguments: model must be a string, not null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSaEnv(t, &saLauncher{}, true, nil)
			r := e.call(context.Background(), "subagent", tc.args)
			if want := (tools.Result{Text: tc.want, IsError: true}); r != want {
				t.Errorf("got %+v, want %+v", r, want)
			}
			if e.l.count() != 0 {
				t.Error("bad arguments launched a child")
			}
		})
	}
}

func TestSubagentBackground(t *testing.T) {
	t.Run("returns the typed handle, then the final output through task_output", func(t *testing.T) {
		l := &saLauncher{result: subagent.Result{Stop: subagent.StopCompleted, Output: "the answer"}, release: make(chan struct{})}
		e := newSaEnv(t, l, true, nil)
		ctx := context.Background()
		r := e.call(ctx, "subagent", `{"description":"find it","prompt":"look","model":"m","run_in_background":true}`)
		want := tools.Result{
			Text: "started background task subagent-1 (subagent: find it). You will be notified when it finishes; read its output with task_output.",
			Data: tools.Handle{Kind: "background", TaskID: "subagent-1"},
		}
		if r != want {
			t.Fatalf("got %+v, want %+v", r, want)
		}
		got := e.l.launches[0]
		if got.Progress == nil {
			t.Error("a background launch gets a progress writer")
		}
		got.Progress = nil
		if got != (subagent.Request{Parent: "a1", Child: "a1/sub-1", Brief: subagent.Brief{Description: "find it", Prompt: "look", Model: "m"}}) {
			t.Errorf("launch = %+v", got)
		}
		if r := e.call(ctx, "task_output", `{"task_id":"subagent-1"}`); r.Text != "[status: running]" {
			t.Errorf("while running: %+v", r)
		}
		close(l.release)
		r = e.call(ctx, "task_output", `{"task_id":"subagent-1","wait":true,"timeout_ms":60000}`)
		if want := "the answer\n[status: completed]"; r.Text != want {
			t.Errorf("collect = %q, want %q", r.Text, want)
		}
		if s, err := e.rt.Tasks().Get(ctx, "subagent-1", "a1"); err != nil || s.Kind != "subagent" || s.Label != "find it" || s.Owner != "a1" {
			t.Errorf("snapshot = %+v, %v", s, err)
		}
	})
	t.Run("a failing start creates no task and launches nothing it should not", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		tests := []struct {
			name     string
			l        *saLauncher
			surface  bool
			ctx      context.Context
			want     string
			launched int
		}{
			{"no control surface", &saLauncher{}, false, context.Background(),
				"background tasks unavailable: no control surface is attached (load the task tools)", 0},
			{"a cancelled context", &saLauncher{}, true, cancelled, "start aborted: the call was interrupted", 0},
			{"a launcher error", &saLauncher{err: errUnknownModel}, true, context.Background(),
				`start subagent task: launch sub-agent a1/sub-1: unknown model "x"`, 1},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				e := newSaEnv(t, tc.l, tc.surface, nil)
				r := e.call(tc.ctx, "subagent", `{"description":"d","prompt":"p","run_in_background":true}`)
				if want := (tools.Result{Text: tc.want, IsError: true}); r != want {
					t.Errorf("got %+v, want %+v", r, want)
				}
				if got := e.l.count(); got != tc.launched {
					t.Errorf("launched %d children, want %d", got, tc.launched)
				}
				if snaps, err := e.rt.Tasks().List(context.Background(), "a1"); err != nil || len(snaps) != 0 {
					t.Errorf("tasks after a failed start: %v, %v", snaps, err)
				}
			})
		}
	})
	t.Run("the owner's cap is a clear tool error", func(t *testing.T) {
		l := &saLauncher{release: make(chan struct{})}
		e := newSaEnv(t, l, true, []actors.Option{actors.WithOwnerLimit(1)})
		ctx := context.Background()
		if r := e.call(ctx, "subagent", `{"description":"one","prompt":"p","run_in_background":true}`); r.IsError {
			t.Fatal(r.Text)
		}
		r := e.call(ctx, "subagent", `{"description":"two","prompt":"p","run_in_background":true}`)
		want := tools.Result{Text: "background task limit reached for this owner (limit: 1); use task_kill to stop an unneeded task, wait for it to finish, then retry", IsError: true}
		if r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
		if e.l.count() != 1 {
			t.Errorf("launched %d, want 1: a refused start must not run a child", e.l.count())
		}
	})
	t.Run("a cap held by a stopping task says so", func(t *testing.T) {
		l := &saLauncher{release: make(chan struct{}), hold: make(chan struct{})}
		e := newSaEnv(t, l, true, []actors.Option{actors.WithOwnerLimit(1)})
		defer close(l.hold)
		ctx := context.Background()
		if r := e.call(ctx, "subagent", `{"description":"one","prompt":"p","run_in_background":true}`); r.IsError {
			t.Fatal(r.Text)
		}
		if r := e.call(ctx, "task_kill", `{"task_id":"subagent-1"}`); r.IsError {
			t.Fatal(r.Text)
		}
		r := e.call(ctx, "subagent", `{"description":"two","prompt":"p","run_in_background":true}`)
		want := tools.Result{Text: "background task limit reached for this owner (limit: 1; 1 stopping); the stopping task frees its slot when it exits: wait for it with task_output (wait: true), or use task_kill to stop another task, then retry", IsError: true}
		if r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
	})
}

var errUnknownModel = errors.New(`unknown model "x"`)

func TestSubagentForeground(t *testing.T) {
	tests := []struct {
		name   string
		result subagent.Result
		want   tools.Result
	}{
		{"returns the final answer", subagent.Result{Stop: subagent.StopCompleted, Output: "42"}, tools.Result{Text: "42"}},
		{"a child that did not complete is a tool error with its status",
			subagent.Result{Stop: subagent.StopMaxTokens, Output: "partial"}, tools.Result{Text: "partial\n[status: failed, max-tokens]", IsError: true}},
		{"an errored child names the error",
			subagent.Result{Stop: subagent.StopError, Detail: "model unavailable"}, tools.Result{Text: "[status: failed, error: model unavailable]", IsError: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSaEnv(t, &saLauncher{result: tc.result}, true, nil)
			if r := e.call(context.Background(), "subagent", `{"description":"d","prompt":"p"}`); r != tc.want {
				t.Errorf("got %+v, want %+v", r, tc.want)
			}
			if snaps, _ := e.rt.Tasks().List(context.Background(), "a1"); len(snaps) != 0 {
				t.Errorf("a foreground call created tasks: %v", snaps)
			}
		})
	}
	t.Run("cancelling the call aborts the child", func(t *testing.T) {
		l := &saLauncher{release: make(chan struct{}), started: make(chan struct{})}
		e := newSaEnv(t, l, true, nil)
		ctx, cancel := context.WithCancelCause(context.Background())
		got := make(chan tools.Result, 1)
		go func() { got <- e.call(ctx, "subagent", `{"description":"d","prompt":"p"}`) }()
		<-l.started
		cancel(errors.New("user interrupted"))
		if r, want := <-got, (tools.Result{Text: "[status: killed, aborted: user interrupted]", IsError: true}); r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
	})
	t.Run("a call interrupted without a cause says so in the tools' words", func(t *testing.T) {
		l := &saLauncher{release: make(chan struct{}), started: make(chan struct{})}
		e := newSaEnv(t, l, true, nil)
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan tools.Result, 1)
		go func() { got <- e.call(ctx, "subagent", `{"description":"d","prompt":"p"}`) }()
		<-l.started
		cancel()
		if r, want := <-got, (tools.Result{Text: "[status: killed, aborted: the call was interrupted]", IsError: true}); r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
	})
	t.Run("a cancelled context never launches", func(t *testing.T) {
		e := newSaEnv(t, &saLauncher{}, true, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := e.call(ctx, "subagent", `{"description":"d","prompt":"p"}`)
		if want := (tools.Result{Text: "sub-agent not started: the call was interrupted", IsError: true}); r != want {
			t.Errorf("got %+v, want %+v", r, want)
		}
		if e.l.count() != 0 {
			t.Error("launched")
		}
	})
}
