package subagent_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLauncher records launches and hands out fakeRuns the test drives.
type fakeLauncher struct {
	mu   sync.Mutex // protects reqs and runs
	reqs []subagent.Request
	runs []*fakeRun
	err  error // returned by Launch when set

	started chan *fakeRun // when set, receives every run launched
}

func (l *fakeLauncher) Launch(_ context.Context, req subagent.Request) (subagent.Run, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	if l.err != nil {
		return nil, l.err
	}
	r := newFakeRun()
	l.runs = append(l.runs, r)
	if l.started != nil {
		l.started <- r
	}
	return r, nil
}

func (l *fakeLauncher) launched() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *fakeLauncher) run(i int) *fakeRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[i]
}

// fakeRun ends when finish or Cancel is called; Dispose blocks until allowDispose.
type fakeRun struct {
	mu       sync.Mutex // protects result, reasons, events
	result   subagent.Result
	reasons  []string
	events   []string
	ended    chan struct{}
	endOnce  sync.Once
	disposed chan struct{} // closed by the test to let Dispose return
	inDisp   chan struct{} // closed when Dispose was entered
	dispErr  error
}

func newFakeRun() *fakeRun {
	return &fakeRun{ended: make(chan struct{}), disposed: make(chan struct{}), inDisp: make(chan struct{})}
}

func (r *fakeRun) finish(res subagent.Result) {
	r.endOnce.Do(func() {
		r.mu.Lock()
		r.result = res
		r.mu.Unlock()
		close(r.ended)
	})
}

func (r *fakeRun) Cancel(reason string) {
	r.mu.Lock()
	r.reasons = append(r.reasons, reason)
	r.mu.Unlock()
	r.finish(subagent.Result{Stop: subagent.StopAborted, Output: "partial", Detail: reason})
}

func (r *fakeRun) Wait() subagent.Result {
	<-r.ended
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "wait")
	return r.result
}

func (r *fakeRun) Dispose(context.Context) error {
	close(r.inDisp)
	<-r.disposed
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "dispose")
	return r.dispErr
}

func TestMap(t *testing.T) {
	tests := []struct {
		name string
		in   subagent.Result
		want messages.Outcome
	}{
		{"completed maps to completed", subagent.Result{Stop: subagent.StopCompleted, Output: "answer"},
			messages.Outcome{Status: messages.Completed, Output: "answer"}},
		{"aborted maps to killed with the reason", subagent.Result{Stop: subagent.StopAborted, Output: "half", Detail: "no longer needed"},
			messages.Outcome{Status: messages.Killed, Detail: "aborted: no longer needed", Output: "half"}},
		{"aborted without a reason", subagent.Result{Stop: subagent.StopAborted},
			messages.Outcome{Status: messages.Killed, Detail: "aborted"}},
		{"error maps to failed with its message", subagent.Result{Stop: subagent.StopError, Detail: "tool crashed"},
			messages.Outcome{Status: messages.Failed, Detail: "error: tool crashed"}},
		{"max-tokens maps to failed", subagent.Result{Stop: subagent.StopMaxTokens, Output: "trunc"},
			messages.Outcome{Status: messages.Failed, Detail: "max-tokens", Output: "trunc"}},
		{"refusal maps to failed", subagent.Result{Stop: subagent.StopRefusal},
			messages.Outcome{Status: messages.Failed, Detail: "refusal"}},
		{"an unknown reason maps to failed with that reason", subagent.Result{Stop: "overloaded"},
			messages.Outcome{Status: messages.Failed, Detail: "overloaded"}},
		{"an empty reason maps to failed", subagent.Result{},
			messages.Outcome{Status: messages.Failed, Detail: "unknown stop reason"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := subagent.Map(tc.in); got != tc.want {
				t.Errorf("outcomeOf(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	p := subagent.New(&fakeLauncher{})
	s := p.Spec("a1", subagent.Brief{Description: "find the bug", Prompt: "look"})
	if s.Kind != "subagent" || s.Label != "find the bug" || s.Owner != "a1" || s.Run == nil {
		t.Fatalf("Spec = %+v, want kind subagent, label the description, owner a1, a Run", s)
	}
}

func TestStartDoneAwaitsResultAndDisposal(t *testing.T) {
	l := &fakeLauncher{}
	p := subagent.New(l)
	h, err := p.Spec("a1", subagent.Brief{Description: "d", Prompt: "p", Model: "m"}).Run()
	if err != nil {
		t.Fatal(err)
	}
	if cap(h.Done) != 1 {
		t.Errorf("cap(Done) = %d, want 1", cap(h.Done))
	}
	if h.ReadOutput != nil {
		t.Error("ReadOutput is set; a sub-agent is a final-output kind")
	}
	run := l.run(0)
	run.finish(subagent.Result{Stop: subagent.StopCompleted, Output: "42"})
	<-run.inDisp
	select {
	case o := <-h.Done:
		t.Fatalf("Done delivered %+v before the child was disposed", o)
	default:
	}
	close(run.disposed)
	if got, want := <-h.Done, (messages.Outcome{Status: messages.Completed, Output: "42"}); got != want {
		t.Errorf("outcome = %+v, want %+v", got, want)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if len(run.events) != 2 || run.events[0] != "wait" || run.events[1] != "dispose" {
		t.Errorf("events = %v, want [wait dispose]", run.events)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.reqs[0]
	if got.Progress == nil {
		t.Error("a background launch gets a progress writer")
	}
	got.Progress = nil
	if want := (subagent.Request{Parent: "a1", Child: "a1/sub-1", Brief: subagent.Brief{Description: "d", Prompt: "p", Model: "m"}}); got != want {
		t.Errorf("request = %+v, want %+v", got, want)
	}
}

func TestCancelForwardsReason(t *testing.T) {
	l := &fakeLauncher{}
	p := subagent.New(l)
	h, err := p.Start(context.Background(), "a1", subagent.Brief{Description: "d", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	run := l.run(0)
	close(run.disposed)
	if err := h.Cancel("no longer needed"); err != nil {
		t.Fatal(err)
	}
	if err := h.Cancel("again"); err != nil {
		t.Fatal(err)
	}
	got := <-h.Done
	want := messages.Outcome{Status: messages.Killed, Detail: "aborted: no longer needed", Output: "partial"}
	if got != want {
		t.Errorf("outcome = %+v, want %+v", got, want)
	}
}

func TestDisposeFailureFailsTheTask(t *testing.T) {
	l := &fakeLauncher{}
	p := subagent.New(l)
	h, err := p.Start(context.Background(), "a1", subagent.Brief{Description: "d", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	run := l.run(0)
	run.dispErr = errors.New("runtime closed")
	close(run.disposed)
	run.finish(subagent.Result{Stop: subagent.StopCompleted, Output: "x"})
	got := <-h.Done
	if got.Status != messages.Failed || got.Detail != "disposing the child agent failed: runtime closed" {
		t.Errorf("outcome = %+v, want failed naming the disposal error", got)
	}
}

func TestLaunchFailures(t *testing.T) {
	tests := []struct {
		name     string
		launcher *fakeLauncher
		brief    subagent.Brief
		wantErr  string
		launched int
	}{
		{"launcher error is returned", &fakeLauncher{err: errors.New("unknown model \"x\"")},
			subagent.Brief{Description: "d", Prompt: "p", Model: "x"}, "launch sub-agent a1/sub-1: unknown model \"x\"", 1},
		{"empty description is refused before launch", &fakeLauncher{},
			subagent.Brief{Prompt: "p"}, "sub-agent description is empty", 0},
		{"empty prompt is refused before launch", &fakeLauncher{},
			subagent.Brief{Description: "d", Prompt: "  "}, "sub-agent prompt is empty", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := subagent.New(tc.launcher)
			_, err := p.Spec("a1", tc.brief).Run()
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("Run error = %v, want %q", err, tc.wantErr)
			}
			if got := tc.launcher.launched(); got != tc.launched {
				t.Errorf("launched %d, want %d", got, tc.launched)
			}
		})
	}
}

type panicLauncher struct{}

func (panicLauncher) Launch(context.Context, subagent.Request) (subagent.Run, error) { panic("boom") }

func TestLauncherPanicIsAnError(t *testing.T) {
	_, err := subagent.New(panicLauncher{}).Start(context.Background(), "", subagent.Brief{Description: "d", Prompt: "p"})
	if err == nil || err.Error() != "launch sub-agent sub-1: launcher panicked: boom" {
		t.Errorf("err = %v", err)
	}
}

func TestChildIDs(t *testing.T) {
	l := &fakeLauncher{err: errors.New("no")}
	p := subagent.New(l)
	for _, owner := range []messages.AgentID{"a1", "a1", "", "a2"} {
		_, _ = p.Start(context.Background(), owner, subagent.Brief{Description: "d", Prompt: "p"})
	}
	want := []messages.AgentID{"a1/sub-1", "a1/sub-2", "sub-3", "a2/sub-4"}
	for i, r := range l.reqs {
		if r.Child != want[i] {
			t.Errorf("child %d = %q, want %q", i, r.Child, want[i])
		}
	}
}

func TestForegroundRun(t *testing.T) {
	t.Run("returns the outcome after disposal", func(t *testing.T) {
		l := &fakeLauncher{started: make(chan *fakeRun, 1)}
		p := subagent.New(l)
		got := make(chan messages.Outcome, 1)
		go func() {
			o, err := p.Run(context.Background(), "a1", subagent.Brief{Description: "d", Prompt: "p"})
			if err != nil {
				t.Error(err)
			}
			got <- o
		}()
		run := <-l.started
		close(run.disposed)
		run.finish(subagent.Result{Stop: subagent.StopRefusal})
		if o := <-got; o.Status != messages.Failed || o.Detail != "refusal" {
			t.Errorf("outcome = %+v", o)
		}
	})
	t.Run("cancelling ctx aborts the child", func(t *testing.T) {
		l := &fakeLauncher{started: make(chan *fakeRun, 1)}
		p := subagent.New(l)
		ctx, cancel := context.WithCancelCause(context.Background())
		got := make(chan messages.Outcome, 1)
		go func() {
			o, err := p.Run(ctx, "a1", subagent.Brief{Description: "d", Prompt: "p"})
			if err != nil {
				t.Error(err)
			}
			got <- o
		}()
		close((<-l.started).disposed)
		cancel(errors.New("user interrupted"))
		if o := <-got; o.Status != messages.Killed || o.Detail != "aborted: user interrupted" {
			t.Errorf("outcome = %+v", o)
		}
	})
	t.Run("an already cancelled ctx never launches", func(t *testing.T) {
		l := &fakeLauncher{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := subagent.New(l).Run(ctx, "a1", subagent.Brief{Description: "d", Prompt: "p"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if l.launched() != 0 {
			t.Error("the child was launched")
		}
	})
}

// A background run reports its progress through Request.Progress; the hooks hand it to
// the runtime as the task's progress stream (a final-output kind's), released with the
// task.
func TestStartHandsTheRunsProgressToTheRuntime(t *testing.T) {
	l := &fakeLauncher{}
	p := subagent.New(l)
	h, err := p.Start(context.Background(), "a1", subagent.Brief{Description: "d", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Progress == nil || h.ReadOutput != nil || h.Output != nil {
		t.Fatalf("hooks: Progress %v, ReadOutput set %v, Output %v; want a final-output kind with progress", h.Progress, h.ReadOutput != nil, h.Output)
	}
	l.mu.Lock()
	progress := l.reqs[0].Progress
	l.mu.Unlock()
	if progress == nil {
		t.Fatal("the launch got no progress writer")
	}
	if _, err := io.WriteString(progress, "→ bash {\"command\":\"ls\"}\n"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Progress.Read(), "→ bash {\"command\":\"ls\"}\n"; got != want {
		t.Errorf("progress read %q, want %q", got, want)
	}
	run := l.run(0)
	run.finish(subagent.Result{Stop: subagent.StopCompleted, Output: "done"})
	close(run.disposed)
	if o := <-h.Done; o.Output != "done" {
		t.Errorf("outcome %+v", o)
	}
	h.Release()
}
