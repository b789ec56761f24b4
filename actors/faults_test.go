package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Fault injection: after each fault the runtime still answers, every other task is
// unaffected, and the tree returns to zero (newRT's cleanup asserts the zero).

func TestFaultInjectorPanicsOrErrors(t *testing.T) {
	rt := newRT(t)
	require.NoError(t, rt.Agents().Register(bg, "panics", actors.WithInjector(func(context.Context, string) error { panic("injector exploded") })))
	require.NoError(t, rt.Agents().Register(bg, "errs", actors.WithInjector(func(context.Context, string) error { return errBoom })))
	err := rt.Agents().Inject(bg, "panics", "hi")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injector panicked: injector exploded")
	assert.ErrorIs(t, rt.Agents().Inject(bg, "errs", "hi"), errBoom)
	f := newFake()
	id := start(t, rt, f.spec("bash", "panics", false))
	f.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, messages.Completed, settleWait(t, rt, id, "panics").Status, "the runtime still answers")
}

func TestFaultReleasePanicIsContained(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1")
	f := newFake()
	_, err := rt.Tasks().Start(bg, messages.Spec{Kind: "bash", Label: "x", Owner: "a1", Run: func() (messages.Hooks, error) {
		h := f.hooks(false)
		h.Release = func() { panic("release exploded") }
		return h, nil
	}})
	require.NoError(t, err)
	require.NoError(t, rt.Agents().Dispose(bg, "a1"))
	assert.Equal(t, actors.Stats{Actors: 1}, rt.Stats())
}

func TestFaultCleanupBlocksUntilCloseGivesUp(t *testing.T) {
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	register(t, rt, "a1")
	_, err = rt.Agents().OnCleanup(bg, "a1", func(ctx context.Context) error {
		<-ctx.Done() // a cleanup that honours its context
		return ctx.Err()
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, rt.Close(ctx), context.DeadlineExceeded)
	require.NoError(t, rt.Close(bg), "the cleanup's context was cancelled, so the retry completes")
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

func TestFaultKillStormDuringDispose(t *testing.T) {
	rt := newRT(t, actors.WithoutOwnerLimit())
	register(t, rt, "a1", "bystander")
	rec := record(rt)
	var ids []messages.TaskID
	for i := 0; i < 30; i++ {
		f := newFake()
		if i%3 == 0 {
			f.FailCancel(errBoom) // some producers' cancel fails
		}
		ids = append(ids, start(t, rt, f.spec("bash", "a1", true)))
	}
	other := newFake()
	otherID := start(t, rt, other.spec("bash", "bystander", true))
	var wg sync.WaitGroup
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for _, id := range ids {
				_, _, err := rt.Tasks().Kill(bg, id, "a1", "storm")
				if err != nil && !errors.Is(err, messages.ErrTaskNotFound) && !errors.Is(err, messages.ErrCancelFailed) {
					assert.NoError(t, err)
				}
			}
		}(g)
	}
	require.NoError(t, rt.Agents().Dispose(bg, "a1"))
	wg.Wait()
	seen := map[messages.TaskID]int{}
	for range ids {
		seen[rec.next(t).ID]++
	}
	for _, id := range ids {
		assert.Equal(t, 1, seen[id], "%s settled once", id)
	}
	s, err := rt.Tasks().Get(bg, otherID, "bystander")
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status, "the bystander is unaffected")
	assert.Empty(t, other.Cancels)
	other.Finish(messages.Outcome{Status: messages.Completed})
}

func TestFaultCloseDuringStartsKillsAndDisposals(t *testing.T) {
	rt, err := actors.NewRuntime(actors.WithoutOwnerLimit())
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	agents := []messages.AgentID{"a1", "a2", "a3"}
	register(t, rt, agents...)
	var mu sync.Mutex
	settled := map[messages.TaskID]int{}
	rt.Tasks().OnDone(func(s messages.Snapshot) { mu.Lock(); settled[s.ID]++; mu.Unlock() })
	var started sync.Map
	var wg sync.WaitGroup
	stopAll := make(chan struct{})
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			owner := agents[g%len(agents)]
			for i := 0; ; i++ {
				select {
				case <-stopAll:
					return
				default:
				}
				f := newFake()
				id, err := rt.Tasks().Start(bg, f.spec("bash", owner, true))
				if err != nil {
					if !errors.Is(err, messages.ErrOwnerUnknown) && !errors.Is(err, messages.ErrClosed) {
						assert.NoError(t, err)
					}
					if errors.Is(err, messages.ErrClosed) {
						return
					}
					_ = rt.Agents().Register(bg, owner)
					continue
				}
				started.Store(id, f)
				_, _, _ = rt.Tasks().Kill(bg, id, owner, "storm")
				if i%7 == 0 {
					_ = rt.Agents().Dispose(bg, owner)
				}
			}
		}(g)
	}
	// Let the storm run until a good number of tasks exist, then close under it.
	for {
		n := 0
		started.Range(func(any, any) bool { n++; return n < 200 })
		if n >= 200 {
			break
		}
		runtimeYield()
	}
	require.NoError(t, rt.Close(bg))
	close(stopAll)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Listeners are silent from the moment Close begins: a task settled by the close
	// is not announced; none is announced twice; every task's record was released.
	started.Range(func(k, v any) bool {
		assert.LessOrEqual(t, settled[k.(messages.TaskID)], 1, "%s announced at most once", k)
		select {
		case <-v.(*fake).Released:
		default:
			t.Errorf("%s was not released by the time Close returned", k)
		}
		return true
	})
	assert.Equal(t, actors.Stats{}, rt.Stats())
}

// TestTaskActorPanicAtStartIsContained: a panic in the runtime's own code while a task
// actor starts — after it announced itself, before it took the outcome its Done
// already held and answered its starter — is contained: the task is recorded failed
// (never restarted), Start still returns its id, and the runtime closes clean.
func TestTaskActorPanicAtStartIsContained(t *testing.T) {
	rt := newRT(t, actors.WithTaskHook(func(_ messages.TaskID, m any) {
		if _, ok := m.(*actor.Started); ok {
			panic("injected")
		}
	}))
	register(t, rt, "a1")
	f := newFake()
	f.Finish(messages.Outcome{Status: messages.Completed})
	id, err := rt.Tasks().Start(bg, f.spec("bash", "a1", false))
	require.NoError(t, err)
	s := settleWait(t, rt, id, "a1")
	assert.Equal(t, messages.Failed, s.Status)
	assert.Equal(t, "runtime panic: injected", s.Detail)
}
