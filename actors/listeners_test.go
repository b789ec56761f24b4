package actors_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

func TestListenersSeeEverySettlementOnceInOrder(t *testing.T) {
	rt := newRT(t)
	r1, r2 := record(rt), record(rt)
	var want []messages.TaskID
	for i := 0; i < 20; i++ {
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "")
		want = append(want, id)
	}
	for i := range want {
		r1.next(t)
		r2.next(t)
		_ = i
	}
	assert.Equal(t, want, r1.ids())
	assert.Equal(t, want, r2.ids())
}

func TestPanickingAndBlockedListenersHarmNoOne(t *testing.T) {
	rt := newRT(t)
	unblock := make(chan struct{})
	blockedEntered := make(chan struct{}, 100)
	stopBlocked := rt.Tasks().OnDone(func(messages.Snapshot) {
		blockedEntered <- struct{}{}
		<-unblock
	})
	stopPanicking := rt.Tasks().OnDone(func(messages.Snapshot) { panic("listener exploded") })
	healthy := record(rt)
	var ids []messages.TaskID
	for i := 0; i < 5; i++ {
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		f.Finish(messages.Outcome{Status: messages.Completed})
		ids = append(ids, id)
	}
	<-blockedEntered
	for range ids {
		healthy.next(t) // the healthy listener gets every settlement while one is blocked
	}
	// Five tasks finished one after another still settle through five independent
	// Done watchers: their settlement order is not their finish order. Compare sets.
	assert.ElementsMatch(t, ids, healthy.ids())
	// The registry still answers while a listener is blocked.
	list, err := rt.Tasks().List(bg, "")
	require.NoError(t, err)
	assert.Len(t, list, 5)
	close(unblock)
	stopBlocked()
	stopPanicking()
}

func TestUnsubscribedListenerIsNotCalled(t *testing.T) {
	rt := newRT(t)
	var mu sync.Mutex
	calls := 0
	stop := rt.Tasks().OnDone(func(messages.Snapshot) { mu.Lock(); calls++; mu.Unlock() })
	stop()
	stop() // idempotent
	rec := record(rt)
	f := newFake()
	start(t, rt, f.spec("bash", "", false))
	f.Finish(messages.Outcome{Status: messages.Completed})
	rec.next(t)
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, calls)
}

func TestUnsubscribeWaitsForARunningCall(t *testing.T) {
	rt := newRT(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	finished := false
	stop := rt.Tasks().OnDone(func(messages.Snapshot) {
		close(entered)
		<-release
		mu.Lock()
		finished = true
		mu.Unlock()
	})
	f := newFake()
	start(t, rt, f.spec("bash", "", false))
	f.Finish(messages.Outcome{Status: messages.Completed})
	<-entered
	unsubscribed := make(chan struct{})
	go func() { stop(); close(unsubscribed) }()
	select {
	case <-unsubscribed:
		t.Fatal("unsubscribe returned while the listener was still running")
	default:
	}
	close(release)
	<-unsubscribed
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, finished)
}

func TestListenerCanUnsubscribeItself(t *testing.T) {
	rt := newRT(t)
	var stop func()
	ready := make(chan struct{})
	done := make(chan struct{})
	stop = rt.Tasks().OnDone(func(messages.Snapshot) {
		<-ready
		stop() // must not deadlock waiting for itself
		close(done)
	})
	close(ready)
	f := newFake()
	start(t, rt, f.spec("bash", "", false))
	f.Finish(messages.Outcome{Status: messages.Completed})
	<-done
}
