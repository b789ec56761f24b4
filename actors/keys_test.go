package actors_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// keyedSpec is a fake's spec with a key.
func keyedSpec(f *fake, owner messages.AgentID, key string) messages.Spec {
	s := f.spec("bash", owner, true)
	s.Key = key
	return s
}

// Idempotent starts: the rules of messages.Spec.Key.
func TestKeyedStarts(t *testing.T) {
	t.Run("a retried start with the key of a running task returns its id and starts nothing", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		first, second := newFake(), newFake()
		id := start(t, rt, keyedSpec(first, "a1", "k1"))
		got, err := rt.Tasks().Start(bg, keyedSpec(second, "a1", "k1"))
		require.ErrorIs(t, err, messages.ErrDuplicate)
		assert.Equal(t, id, got)
		assert.Equal(t, 0, second.runs(), "the retry's Run is never called")
		list, err := rt.Tasks().List(bg, "a1")
		require.NoError(t, err)
		assert.Len(t, list, 1, "one task")
		first.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("a settled task still retained keeps its key", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f := newFake()
		id := start(t, rt, keyedSpec(f, "a1", "k1"))
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "a1")
		got, err := rt.Tasks().Start(bg, keyedSpec(newFake(), "a1", "k1"))
		require.ErrorIs(t, err, messages.ErrDuplicate)
		assert.Equal(t, id, got)
	})
	t.Run("an evicted task frees its key", func(t *testing.T) {
		rt := newRT(t, actors.WithNoRetention())
		register(t, rt, "a1")
		f := newFake()
		id := start(t, rt, keyedSpec(f, "a1", "k1"))
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "a1")
		g := newFake()
		got, err := rt.Tasks().Start(bg, keyedSpec(g, "a1", "k1"))
		require.NoError(t, err)
		assert.Equal(t, messages.TaskID("bash-2"), got)
		g.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("keys are per owner", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1", "a2")
		f, g, h := newFake(), newFake(), newFake()
		ids := []messages.TaskID{start(t, rt, keyedSpec(f, "a1", "k")), start(t, rt, keyedSpec(g, "a2", "k")), start(t, rt, keyedSpec(h, "", "k"))}
		assert.Equal(t, []messages.TaskID{"bash-1", "bash-2", "bash-3"}, ids)
		for _, x := range []*fake{f, g, h} {
			x.Finish(messages.Outcome{Status: messages.Completed})
		}
	})
	t.Run("a duplicate at the owner's cap still finds its task", func(t *testing.T) {
		rt := newRT(t, actors.WithOwnerLimit(1))
		register(t, rt, "a1")
		f := newFake()
		id := start(t, rt, keyedSpec(f, "a1", "k1"))
		got, err := rt.Tasks().Start(bg, keyedSpec(newFake(), "a1", "k1"))
		require.ErrorIs(t, err, messages.ErrDuplicate)
		assert.Equal(t, id, got)
		_, err = rt.Tasks().Start(bg, keyedSpec(newFake(), "a1", "k2"))
		require.ErrorIs(t, err, messages.ErrOwnerLimit, "another key is a new start, refused at the cap")
		f.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("a disposed owner's keys are gone with it", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		start(t, rt, keyedSpec(newFake(), "a1", "k1"))
		require.NoError(t, rt.Agents().Dispose(bg, "a1"))
		register(t, rt, "a1")
		g := newFake()
		got, err := rt.Tasks().Start(bg, keyedSpec(g, "a1", "k1"))
		require.NoError(t, err)
		assert.Equal(t, messages.TaskID("bash-2"), got)
		g.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("a key over the bound is an invalid spec", func(t *testing.T) {
		rt := newRT(t)
		f := newFake()
		s := keyedSpec(f, "", string(make([]byte, messages.MaxKey+1)))
		_, err := rt.Tasks().Start(bg, s)
		require.ErrorIs(t, err, messages.ErrInvalidSpec)
		assert.Equal(t, 0, f.runs())
	})
}

// heldRun is a Run that blocks until release is closed, then returns f's hooks, or
// err when set.
func heldRun(f *fake, release <-chan struct{}, err error) func() (messages.Hooks, error) {
	run := f.spec("bash", "", true).Run
	return func() (messages.Hooks, error) {
		<-release
		if err != nil {
			return messages.Hooks{}, err
		}
		return run()
	}
}

// reservesSeen counts the start preflights the registry received.
func reservesSeen(n *atomic.Int64) actors.Option {
	return actors.WithRegistryHook(func(msg any) {
		if fmt.Sprintf("%T", msg) == "*actors.reserveStart" {
			n.Add(1)
		}
	})
}

// A retry that races the original start (its Run still running) waits for it, so
// that the work is never started twice.
func TestKeyedStartsRacingTheOriginal(t *testing.T) {
	t.Run("retries in flight all get the original's id", func(t *testing.T) {
		var reserves atomic.Int64
		rt := newRT(t, reservesSeen(&reserves))
		register(t, rt, "a1")
		release := make(chan struct{})
		first := newFake()
		s := first.spec("bash", "a1", true)
		s.Key, s.Run = "k1", heldRun(first, release, nil)
		const retries = 8
		type res struct {
			id  messages.TaskID
			err error
		}
		results := make(chan res, retries+1)
		var wg sync.WaitGroup
		wg.Go(func() { id, err := rt.Tasks().Start(bg, s); results <- res{id, err} })
		for reserves.Load() < 1 {
			runtimeYield() // the original holds the key first
		}
		others := make([]*fake, retries)
		for i := range others {
			others[i] = newFake()
			r := keyedSpec(others[i], "a1", "k1")
			wg.Go(func() { id, err := rt.Tasks().Start(bg, r); results <- res{id, err} })
		}
		for reserves.Load() < retries+1 {
			runtimeYield()
		}
		// Every preflight reached the registry before the original's Run returns.
		// The hook runs before the message is handled, and the commit is queued
		// behind them all.
		close(release)
		wg.Wait()
		close(results)
		var ok, dups int
		for r := range results {
			assert.Equal(t, messages.TaskID("bash-1"), r.id)
			switch {
			case r.err == nil:
				ok++
			case assert.ErrorIs(t, r.err, messages.ErrDuplicate):
				dups++
			}
		}
		assert.Equal(t, [2]int{1, retries}, [2]int{ok, dups}, "one start, the rest duplicates")
		for _, o := range others {
			assert.Equal(t, 0, o.runs())
		}
		first.Finish(messages.Outcome{Status: messages.Completed})
	})
	t.Run("when the original fails a parked retry starts the work itself", func(t *testing.T) {
		var reserves atomic.Int64
		rt := newRT(t, reservesSeen(&reserves))
		register(t, rt, "a1")
		release := make(chan struct{})
		first := newFake()
		s := first.spec("bash", "a1", true)
		s.Key, s.Run = "k1", heldRun(first, release, errBoom)
		errc := make(chan error, 1)
		go func() { _, err := rt.Tasks().Start(bg, s); errc <- err }()
		for reserves.Load() < 1 {
			runtimeYield()
		}
		retry := newFake()
		idc := make(chan messages.TaskID, 1)
		go func() {
			id, err := rt.Tasks().Start(bg, keyedSpec(retry, "a1", "k1"))
			assert.NoError(t, err)
			idc <- id
		}()
		for reserves.Load() < 2 {
			runtimeYield()
		}
		close(release)
		require.ErrorIs(t, <-errc, errBoom)
		assert.Equal(t, messages.TaskID("bash-1"), <-idc, "the failed start burned no number")
		assert.Equal(t, 1, retry.runs())
		retry.Finish(messages.Outcome{Status: messages.Completed})
	})
}
