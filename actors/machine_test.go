package actors_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The task machine as task.go draws it: each rule, the phases it applies from,
// and where it leads. A change to the machine changes this table and the
// drawing together.
func TestTaskMachineIsTheDrawing(t *testing.T) {
	want := map[string]struct {
		from []string
		to   string
	}{
		"queuedStarted":        {[]string{"queued"}, "running"},
		"queuedStartFailed":    {[]string{"queued"}, "settled"},
		"killedWhileQueued":    {[]string{"queued"}, "settled"},
		"killAccepted":         {[]string{"running"}, "stopping"},
		"teardownBegan":        {[]string{"running"}, "stopping"},
		"outcomeDelivered":     {[]string{"running", "stopping"}, "settled"},
		"contractBroken":       {[]string{"running", "stopping"}, "settled"},
		"teardownCancelFailed": {[]string{"stopping"}, "settled"},
		"settleTimedOut":       {[]string{"stopping"}, "settled"},
		"runtimePanicked":      {[]string{"queued", "running", "stopping"}, "settled"},
	}
	got := actors.TaskRules()
	require.Len(t, got, len(want))
	for _, r := range got {
		w, ok := want[r.Name]
		if assert.True(t, ok, "rule %s is not drawn", r.Name) {
			assert.Equal(t, w.from, r.From, "rule %s applies from", r.Name)
			assert.Equal(t, w.to, r.To, "rule %s leads to", r.Name)
		}
	}
}

// rulesOf records, per task, the rules its transitions applied.
type rulesOf struct {
	mu    sync.Mutex
	rules map[messages.TaskID][]string
}

func (r *rulesOf) hook(id messages.TaskID, rule string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules[id] = append(r.rules[id], rule)
}

func (r *rulesOf) of(id messages.TaskID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rules[id])
}

// Each rule of the task machine is what exactly the cases it names go through:
// every case below drives a real task through the runtime and checks the rules
// its transitions applied, in order; together the cases use every rule.
func TestEachRuleIsUsedByTheCasesItNames(t *testing.T) {
	type run struct {
		rt  *actors.Runtime
		rec *rulesOf
	}
	cases := []struct {
		name  string
		opts  []actors.Option
		drive func(t *testing.T, r run) messages.TaskID
		want  []string
	}{
		{"work that ends by itself", nil, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			id := start(t, r.rt, f.spec("job", "a1", true))
			f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"outcomeDelivered"}},
		{"a kill", nil, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			f.HoldCancel()
			id := start(t, r.rt, f.spec("job", "a1", true))
			_, _, err := r.rt.Tasks().Kill(bg, id, "a1", "enough")
			require.NoError(t, err)
			f.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"})
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"killAccepted", "outcomeDelivered"}},
		{"the owner's disposal", nil, func(t *testing.T, r run) messages.TaskID {
			id := start(t, r.rt, newFake().spec("job", "a1", true))
			require.NoError(t, r.rt.Agents().Dispose(bg, "a1"))
			return id
		}, []string{"teardownBegan", "outcomeDelivered"}},
		{"Done closed without an outcome", nil, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			id := start(t, r.rt, f.spec("job", "a1", true))
			f.CloseDone()
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"contractBroken"}},
		{"a non-terminal outcome", nil, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			id := start(t, r.rt, f.spec("job", "a1", true))
			f.Finish(messages.Outcome{Status: messages.Running})
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"contractBroken"}},
		{"a Cancel that fails during teardown", nil, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			f.FailCancel(errors.New("no"))
			id := start(t, r.rt, f.spec("job", "a1", true))
			require.NoError(t, r.rt.Agents().Dispose(bg, "a1"))
			return id
		}, []string{"teardownBegan", "teardownCancelFailed"}},
		{"work that never settles after teardown", []actors.Option{actors.WithSettleTimeout(50 * time.Millisecond)}, func(t *testing.T, r run) messages.TaskID {
			f := newFake()
			f.HoldCancel()
			id := start(t, r.rt, f.spec("job", "a1", true))
			require.NoError(t, r.rt.Agents().Dispose(bg, "a1"))
			f.Finish(messages.Outcome{Status: messages.Killed}) // too late: abandoned
			return id
		}, []string{"teardownBegan", "settleTimedOut"}},
		{"a queued start that runs", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, func(t *testing.T, r run) messages.TaskID {
			first, second := newFake(), newFake()
			a := start(t, r.rt, first.spec("job", "a1", true))
			id := start(t, r.rt, second.spec("job", "a1", true))
			sub, err := r.rt.Subscribe(bg)
			require.NoError(t, err)
			defer sub.Close()
			first.Finish(messages.Outcome{Status: messages.Completed})
			waitTerminal(t, r.rt, a)
			for e := range sub.Events() { // the queued task's start is an event no request waits for
				if e.Kind == messages.EventTaskStarted && e.Task.ID == id {
					break
				}
			}
			second.Finish(messages.Outcome{Status: messages.Completed})
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"queuedStarted", "outcomeDelivered"}},
		{"a kill while queued", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, func(t *testing.T, r run) messages.TaskID {
			start(t, r.rt, newFake().spec("job", "a1", true))
			id := start(t, r.rt, newFake().spec("job", "a1", true))
			_, _, err := r.rt.Tasks().Kill(bg, id, "a1", "not needed")
			require.NoError(t, err)
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"killedWhileQueued"}},
		{"a teardown while queued", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, func(t *testing.T, r run) messages.TaskID {
			start(t, r.rt, newFake().spec("job", "a1", true))
			id := start(t, r.rt, newFake().spec("job", "a1", true))
			require.NoError(t, r.rt.Agents().Dispose(bg, "a1"))
			return id
		}, []string{"killedWhileQueued"}},
		{"a queued start whose Run fails", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, func(t *testing.T, r run) messages.TaskID {
			first := newFake()
			a := start(t, r.rt, first.spec("job", "a1", true))
			id := start(t, r.rt, messages.Spec{Kind: "job", Label: "fails", Owner: "a1",
				Run: func() (messages.Hooks, error) { return messages.Hooks{}, errors.New("no room") }})
			first.Finish(messages.Outcome{Status: messages.Completed})
			waitTerminal(t, r.rt, a)
			waitTerminal(t, r.rt, id)
			return id
		}, []string{"queuedStartFailed"}},
	}
	used := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &rulesOf{rules: map[messages.TaskID][]string{}}
			rt := newRT(t, append(tc.opts, actors.WithRuleHook(rec.hook))...)
			register(t, rt, "a1")
			id := tc.drive(t, run{rt, rec})
			assert.Equal(t, tc.want, rec.of(id))
			for _, r := range rec.of(id) {
				used[r] = true
			}
		})
	}
	t.Run("a panic in the runtime's own code on the task's actor", func(t *testing.T) {
		rec := &rulesOf{rules: map[messages.TaskID][]string{}}
		var once sync.Once
		hook := func(_ messages.TaskID, msg any) {
			if _, ok := msg.(*actor.Started); ok {
				once.Do(func() { panic("runtime bug") })
			}
		}
		rt := newRT(t, actors.WithRuleHook(rec.hook), actors.WithTaskHook(hook))
		register(t, rt, "a1")
		id := start(t, rt, newFake().spec("job", "a1", true))
		s := waitTerminal(t, rt, id)
		assert.Equal(t, messages.Failed, s.Status)
		assert.Equal(t, []string{"runtimePanicked"}, rec.of(id))
		used["runtimePanicked"] = true
	})
	for _, r := range actors.TaskRules() {
		assert.True(t, used[r.Name], "no case uses rule %s", r.Name)
	}
}

// waitTerminal waits for the task's end and returns its terminal snapshot.
func waitTerminal(t *testing.T, rt *actors.Runtime, id messages.TaskID) messages.Snapshot {
	t.Helper()
	s, err := rt.Tasks().Wait(bg, id, "a1", time.Minute)
	require.NoError(t, err)
	require.True(t, s.Status.Terminal(), "task %s still %s after a minute", id, s.Status)
	return s
}
