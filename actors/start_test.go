package actors_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

func TestIDsArePerKindCounters(t *testing.T) {
	rt := newRT(t)
	var got []messages.TaskID
	for _, kind := range []string{"bash", "bash", "subagent", "bash", "subagent"} {
		f := newFake()
		got = append(got, start(t, rt, f.spec(kind, "", true)))
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
	want := []messages.TaskID{"bash-1", "bash-2", "subagent-1", "bash-3", "subagent-2"}
	assert.Equal(t, want, got)
}

// A failed start burns no number and leaves no trace, and in the preflight and
// aborted-context cases Run is never called.
func TestFailedStartLeavesNoTrace(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		spec    func(f *fake) messages.Spec
		wantErr error
		wantRun bool
	}{
		{"invalid kind is refused before Run", bg,
			func(f *fake) messages.Spec { s := f.spec("Bash!", "", false); return s }, messages.ErrInvalidSpec, false},
		{"empty label is refused before Run", bg,
			func(f *fake) messages.Spec { s := f.spec("bash", "", false); s.Label = "  "; return s }, messages.ErrInvalidSpec, false},
		{"unknown owner is refused before Run", bg,
			func(f *fake) messages.Spec { return f.spec("bash", "ghost", false) }, messages.ErrOwnerUnknown, false},
		{"already-cancelled context aborts before Run", cancelled,
			func(f *fake) messages.Spec { return f.spec("bash", "", false) }, messages.ErrAborted, false},
		{"Run error fails the start", bg,
			func(f *fake) messages.Spec {
				return messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) { f.ranCount++; return messages.Hooks{}, errBoom }}
			}, errBoom, true},
		{"Run panic fails the start", bg,
			func(f *fake) messages.Spec {
				return messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) { f.ranCount++; panic("kaboom") }}
			}, nil, true},
		{"hooks without Done are refused", bg,
			func(f *fake) messages.Spec {
				return messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) {
					f.ranCount++
					return messages.Hooks{Cancel: f.Hooks().Cancel}, nil
				}}
			}, messages.ErrInvalidSpec, true},
		{"nil Run is refused", bg,
			func(f *fake) messages.Spec { return messages.Spec{Kind: "bash", Label: "x"} }, messages.ErrInvalidSpec, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRT(t)
			f := newFake()
			_, err := rt.Tasks().Start(tc.ctx, tc.spec(f))
			require.Error(t, err)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.wantRun, f.runs() > 0, "Run called")
			list, err := rt.Tasks().List(bg, "")
			require.NoError(t, err)
			assert.Empty(t, list, "nothing recorded")
			assert.Equal(t, actors.Stats{Actors: 1}, rt.Stats(), "only the registry lives")
			// The next start gets number 1: nothing was burned.
			g := newFake()
			assert.Equal(t, messages.TaskID("bash-1"), start(t, rt, g.spec("bash", "", false)))
			g.Finish(messages.Outcome{Status: messages.Completed})
		})
	}
}

func TestRunPanicIsReportedAsError(t *testing.T) {
	rt := newRT(t)
	_, err := rt.Tasks().Start(bg, messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) { panic("kaboom") }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run panicked: kaboom")
}

func TestStartWithoutSurfaceFailsWithExactMessage(t *testing.T) {
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	defer func() { require.NoError(t, rt.Close(bg)) }()
	f := newFake()
	_, err = rt.Tasks().Start(bg, f.spec("bash", "", false))
	require.ErrorIs(t, err, messages.ErrNoSurface)
	assert.Equal(t, "background tasks unavailable: no control surface is attached", err.Error(),
		"the runtime states the fact; package tools adds the advice for a model")
	assert.Zero(t, f.runs())

	detach := rt.Tasks().AttachSurface("tools")
	id := start(t, rt, f.spec("bash", "", false))
	assert.Equal(t, messages.TaskID("bash-1"), id)
	f.Finish(messages.Outcome{Status: messages.Completed})

	detach()
	detach() // a second detach is harmless
	g := newFake()
	_, err = rt.Tasks().Start(bg, g.spec("bash", "", false))
	assert.ErrorIs(t, err, messages.ErrNoSurface, "detaching the last surface makes Start fail again")
	assert.Zero(t, g.runs())
}

func TestCancellingStartContextAfterwardsNeverTouchesTask(t *testing.T) {
	rt := newRT(t)
	ctx, cancel := context.WithCancel(bg)
	f := newFake()
	id, err := rt.Tasks().Start(ctx, f.spec("bash", "", false))
	require.NoError(t, err)
	cancel()
	s, err := rt.Tasks().Get(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status)
	assert.Empty(t, f.Cancels)
	f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	assert.Equal(t, messages.Completed, settleWait(t, rt, id, "").Status)
}

func TestOwnerCap(t *testing.T) {
	rt := newRT(t, actors.WithOwnerLimit(2))
	register(t, rt, "a1", "a2")
	f1, f2 := newFake(), newFake()
	id1 := start(t, rt, f1.spec("bash", "a1", false))
	start(t, rt, f2.spec("bash", "a1", false))

	t.Run("over the cap fails with the limit, before Run", func(t *testing.T) {
		f := newFake()
		_, err := rt.Tasks().Start(bg, f.spec("bash", "a1", false))
		require.ErrorIs(t, err, messages.ErrOwnerLimit)
		assert.Equal(t, "background task limit reached for this owner (limit: 2)", err.Error())
		var le *messages.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, messages.LimitError{Limit: 2}, *le)
		assert.Zero(t, f.runs())
	})
	t.Run("another owner has its own bucket", func(t *testing.T) {
		f := newFake()
		start(t, rt, f.spec("bash", "a2", false))
		f.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("a stopping task holds its slot until it settles", func(t *testing.T) {
		f1.HoldCancel()
		res, _, err := rt.Tasks().Kill(bg, id1, "a1", "no longer needed")
		require.NoError(t, err)
		require.Equal(t, messages.KillRequested, res)
		_, err = rt.Tasks().Start(bg, newFake().spec("bash", "a1", false))
		require.ErrorIs(t, err, messages.ErrOwnerLimit)
		var le *messages.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, messages.LimitError{Limit: 2, Stopping: 1}, *le, "the error counts the stopping task")
		assert.Equal(t, "background task limit reached for this owner (limit: 2; 1 stopping)", err.Error())
		f1.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"})
		settleWait(t, rt, id1, "a1")
		f := newFake()
		start(t, rt, f.spec("bash", "a1", false))
		f.Finish(messages.Outcome{Status: messages.Failed})
	})
	t.Run("unowned tasks share one bucket", func(t *testing.T) {
		u1, u2 := newFake(), newFake()
		start(t, rt, u1.spec("bash", "", false))
		start(t, rt, u2.spec("bash", "", false))
		_, err := rt.Tasks().Start(bg, newFake().spec("bash", "", false))
		require.ErrorIs(t, err, messages.ErrOwnerLimit)
		u1.Finish(messages.Outcome{Status: messages.Completed})
		u2.Finish(messages.Outcome{Status: messages.Completed})
	})
	f2.Finish(messages.Outcome{Status: messages.Completed})
}

func TestStartForUnknownOrDisposingOwner(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1")
	block := make(chan struct{})
	entered := make(chan struct{})
	_, err := rt.Agents().OnCleanup(bg, "a1", func(context.Context) error { close(entered); <-block; return nil })
	require.NoError(t, err)
	disposed := make(chan error, 1)
	go func() { disposed <- rt.Agents().Dispose(bg, "a1") }()
	<-entered
	f := newFake()
	_, err = rt.Tasks().Start(bg, f.spec("bash", "a1", false))
	assert.ErrorIs(t, err, messages.ErrOwnerUnknown, "start for a disposing owner")
	_, err = rt.Agents().OnCleanup(bg, "a1", func(context.Context) error { return nil })
	assert.ErrorIs(t, err, messages.ErrOwnerUnknown, "cleanup for a disposing owner")
	close(block)
	require.NoError(t, <-disposed)
	_, err = rt.Tasks().Start(bg, f.spec("bash", "a1", false))
	assert.ErrorIs(t, err, messages.ErrOwnerUnknown, "start for an unknown owner")
	assert.Zero(t, f.runs())
	assert.True(t, errors.Is(rt.Agents().Dispose(bg, "a1"), messages.ErrOwnerUnknown))
}

// TestWorkDoneWithinRunIsSettledWhenStartReturns pins the instant-outcome rule: when
// Done already holds the outcome as the task actor starts, and no output
// announcement is on its way (nothing written, or no event subscriber to announce
// it to), the task settles on the spot, before its starter is answered — so the
// first call that names the id finds it settled, and a wait on it is answered from
// the registry's index. With an output announcement pending, the outcome waits
// behind it (TestOutputWrittenBeforeTheWatchComesBeforeTheSettlement).
func TestWorkDoneWithinRunIsSettledWhenStartReturns(t *testing.T) {
	cases := []struct {
		name   string
		stream bool
		output string
	}{
		{"final kind", false, ""},
		{"stream kind, no output", true, ""},
		{"stream kind, output and no subscriber", true, "printed\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := newRT(t, actors.WithoutOwnerLimit(), actors.WithRetention(200))
			register(t, rt, "a1")
			for range 100 {
				f := newFake()
				if c.output != "" {
					f.Buffered()
					f.Emit(c.output)
				}
				f.Finish(messages.Outcome{Status: messages.Completed, Output: "result"})
				id := start(t, rt, f.spec("bash", "a1", c.stream))
				s, err := rt.Tasks().Get(bg, id, "a1")
				require.NoError(t, err)
				require.Equal(t, messages.Completed, s.Status, "%s right after Start returned", id)
				require.False(t, s.Reported)
			}
		})
	}
}

// A task whose work was done within Run reaches the registry as one message: its
// settlement rides on its announcement. A task that settles later still sends
// both, and either way the registry has the settlement before anyone can name
// the task by its id.
func TestWorkDoneWithinRunReachesTheRegistryAsOneMessage(t *testing.T) {
	for _, instant := range []bool{true, false} {
		name := map[bool]string{true: "settled within Run", false: "settled later"}[instant]
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string]int{}
			rt := newRT(t, actors.WithRegistryHook(func(msg any) {
				switch kind := fmt.Sprintf("%T", msg); kind {
				case "*actors.taskSpawned", "*actors.taskSettled":
					mu.Lock()
					got[kind]++
					mu.Unlock()
				}
			}))
			register(t, rt, "a1")
			const n = 20
			for range n {
				f := newFake()
				if instant {
					f.Finish(messages.Outcome{Status: messages.Completed, Output: "result"})
				}
				id := start(t, rt, f.spec("bash", "a1", false))
				if !instant {
					f.Finish(messages.Outcome{Status: messages.Completed, Output: "result"})
				}
				s := settleWait(t, rt, id, "a1")
				require.Equal(t, messages.Completed, s.Status)
			}
			// The task sent the registry its settlement before it answered the
			// wait, so the registry handles it before this List.
			_, err := rt.Tasks().List(bg, "a1")
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			want := map[string]int{"*actors.taskSpawned": n, "*actors.taskSettled": n}
			if instant {
				want = map[string]int{"*actors.taskSpawned": n}
			}
			assert.Equal(t, want, got)
		})
	}
}

// goid is the calling goroutine's id, from its stack header ("goroutine N [...").
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestAnAgentsTaskStartsOnTheAgentsGoroutine pins how an agent spawns its tasks: the
// new task actor's Started (its announcement and its starter's answer) runs on the
// agent actor's goroutine, inside the spawn, rather than on a dispatcher worker it is
// handed to (docs/cost.md: a hand-off less per start). Each task's Started sees the
// goroutine its agent's spawnTask handler ran on.
func TestAnAgentsTaskStartsOnTheAgentsGoroutine(t *testing.T) {
	var mu sync.Mutex
	spawning := map[messages.AgentID]string{} // agent → goroutine of its current spawnTask
	started := map[messages.TaskID]string{}   // task → goroutine of its Started
	rt := newRT(t,
		actors.WithAgentHook(func(agent messages.AgentID, m any) {
			if fmt.Sprintf("%T", m) == "*actors.spawnTask" {
				mu.Lock()
				spawning[agent] = goid()
				mu.Unlock()
			}
		}),
		actors.WithTaskHook(func(task messages.TaskID, m any) {
			if _, ok := m.(*actor.Started); ok {
				mu.Lock()
				started[task] = goid()
				mu.Unlock()
			}
		}))
	register(t, rt, "a1", "a2")
	for i := range 6 {
		owner := []messages.AgentID{"a1", "a2"}[i%2]
		f := newFake()
		id := start(t, rt, f.spec("bash", owner, true))
		mu.Lock()
		got, want := started[id], spawning[owner]
		mu.Unlock()
		require.NotEmpty(t, want, "no spawnTask seen for %s", owner)
		assert.Equal(t, want, got, "%s (of %s): Started ran on goroutine %s, its agent's spawn on %s", id, owner, got, want)
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, owner)
	}
}

// TestAStartRunsAnIdleAgentOnTheCallersGoroutine pins how a start reaches its agent:
// the registry answers the commit of an owned task with the agent to hand it to, and
// the caller, about to wait for the task's answer, runs the agent when it is idle — its
// spawn (and with it the task's Started) runs on the goroutine that called Start
// (docs/cost.md: a hand-off less per start).
func TestAStartRunsAnIdleAgentOnTheCallersGoroutine(t *testing.T) {
	var mu sync.Mutex
	var spawnedOn []string
	rt := newRT(t, actors.WithAgentHook(func(_ messages.AgentID, m any) {
		if fmt.Sprintf("%T", m) == "*actors.spawnTask" {
			mu.Lock()
			spawnedOn = append(spawnedOn, goid())
			mu.Unlock()
		}
	}))
	register(t, rt, "a1")
	caller := goid()
	run := func() string {
		f := newFake()
		id := start(t, rt, f.spec("bash", "a1", true))
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "a1")
		mu.Lock()
		defer mu.Unlock()
		return spawnedOn[len(spawnedOn)-1]
	}
	// The agent is idle only once it has run its own Started, which a dispatcher
	// worker runs after the registration returned; a start that comes first finds it
	// running, and that worker runs the spawn too (the flake run caught it: 9 in 300
	// at 686414f). Once a spawn ran on the caller, the caller left the agent idle.
	for try := 0; run() != caller; try++ {
		if try == 20 {
			t.Fatalf("no start ran the agent on the caller's goroutine in 20 tries: %v", spawnedOn)
		}
	}
	mu.Lock()
	spawnedOn = nil
	mu.Unlock()
	for range 4 {
		run()
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{caller, caller, caller, caller}, spawnedOn, "the goroutines the agent's spawns ran on, the agent idle; the caller is %s", caller)
}
