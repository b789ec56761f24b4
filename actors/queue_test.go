package actors_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// ran is a fake whose Run reports on a channel when it is called.
type ran struct {
	*fake
	owner messages.AgentID
	n     int // its number within its owner
}

// queuedSpec is a fake's spec whose Run sends the fake on started when it is called.
func queuedSpec(f *ran, started chan<- *ran) messages.Spec {
	s := f.spec("bash", f.owner, true)
	run := s.Run
	s.Run = func() (messages.Hooks, error) {
		started <- f
		return run()
	}
	return s
}

func TestQueue(t *testing.T) {
	t.Run("without a queue a start at the cap fails, naming the cap", func(t *testing.T) {
		tests := []struct {
			name string
			opts []actors.Option
			want string
		}{
			{"owner cap", []actors.Option{actors.WithOwnerLimit(1)}, "background task limit reached for this owner (limit: 1)"},
			{"global limit", []actors.Option{actors.WithGlobalLimit(1)}, "background task limit reached across all owners (limit: 1)"},
			{"owner cap and full queue", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, "background task limit reached for this owner (limit: 1); the queue is full (queue: 1)"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				rt := newRT(t, tc.opts...)
				register(t, rt, "a1", "a2")
				first, second := newFake(), newFake()
				start(t, rt, first.spec("bash", "a1", true))
				if len(tc.opts) == 2 {
					start(t, rt, second.spec("bash", "a1", true)) // fills the queue of one
				}
				over := newFake()
				_, err := rt.Tasks().Start(bg, over.spec("bash", "a1", true))
				require.ErrorIs(t, err, messages.ErrOwnerLimit)
				assert.Equal(t, tc.want, err.Error())
				assert.Equal(t, 0, over.runs())
				first.Finish(messages.Outcome{Status: messages.Completed})
				second.Finish(messages.Outcome{Status: messages.Completed})
			})
		}
	})
	t.Run("a start at the cap is queued: its id at once, listed and gettable, Run not called; it runs when a slot frees", func(t *testing.T) {
		rt := newRT(t, actors.WithOwnerLimit(1), actors.WithQueue(3))
		register(t, rt, "a1")
		sub, err := rt.Subscribe(bg)
		require.NoError(t, err)
		defer sub.Close()
		started := make(chan *ran, 8)
		first := &ran{fake: newFake(), owner: "a1"}
		start(t, rt, queuedSpec(first, started))
		<-started
		second, third := &ran{fake: newFake(), owner: "a1"}, &ran{fake: newFake(), owner: "a1"}
		id2 := start(t, rt, queuedSpec(second, started))
		id3 := start(t, rt, queuedSpec(third, started))
		assert.Equal(t, []messages.TaskID{"bash-2", "bash-3"}, []messages.TaskID{id2, id3})
		s, err := rt.Tasks().Get(bg, id2, "a1")
		require.NoError(t, err)
		assert.Equal(t, messages.Queued, s.Status)
		assert.Equal(t, 0, second.runs()+third.runs(), "a queued start's Run waits for a slot")
		list, err := rt.Tasks().List(bg, "a1")
		require.NoError(t, err)
		assert.Equal(t, []messages.Status{messages.Running, messages.Queued, messages.Queued}, statuses(list))
		pos, total, err := rt.Tasks().QueuePosition(bg, id3, "a1")
		require.NoError(t, err)
		assert.Equal(t, [2]int{2, 2}, [2]int{pos, total})
		r, err := rt.Tasks().Read(bg, id2, "a1")
		require.NoError(t, err)
		assert.Equal(t, "", r.Output, "a queued task has no output")

		first.Finish(messages.Outcome{Status: messages.Completed})
		assert.Same(t, second, <-started, "first queued, first started")
		second.Finish(messages.Outcome{Status: messages.Completed})
		assert.Same(t, third, <-started)
		third.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id3, "a1")
		var kinds []string
		for ev := range sub.Events() {
			if ev.Task.ID == id2 {
				kinds = append(kinds, string(ev.Kind)+" "+string(ev.Task.Status))
			}
			if ev.Task.ID == id3 && ev.Kind == messages.EventTaskSettled {
				break
			}
		}
		assert.Equal(t, []string{"task-queued queued", "task-started running", "task-settled completed"}, kinds)
	})
	t.Run("a kill of a queued task settles it killed without running anything", func(t *testing.T) {
		rt := newRT(t, actors.WithOwnerLimit(1), actors.WithQueue(1))
		register(t, rt, "a1")
		rec := record(rt)
		busy := newFake()
		start(t, rt, busy.spec("bash", "a1", true))
		q := newFake()
		id := start(t, rt, q.spec("bash", "a1", true))
		waited := make(chan messages.Snapshot, 1)
		go func() { s, err := rt.Tasks().Wait(bg, id, "a1", time.Minute); assert.NoError(t, err); waited <- s }()
		res, _, err := rt.Tasks().Kill(bg, id, "a1", "not needed")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, res)
		s := <-waited
		assert.Equal(t, messages.Killed, s.Status)
		assert.Equal(t, "never started: killed while queued", s.Detail)
		assert.True(t, rec.next(t).Reported, "killed by the model: no notice")
		assert.Equal(t, 0, q.runs(), "Run is never called")
		// Its queue place is free again.
		again := newFake()
		_, err = rt.Tasks().Start(bg, again.spec("bash", "a1", true))
		require.NoError(t, err)
		busy.Finish(messages.Outcome{Status: messages.Completed})
		again.Finish(messages.Outcome{Status: messages.Completed})
		assert.Equal(t, messages.Completed, settleWait(t, rt, "bash-3", "a1").Status, "it got the freed slot")
	})
	t.Run("disposal drops queued tasks without running them", func(t *testing.T) {
		rt := newRT(t, actors.WithGlobalLimit(1), actors.WithQueue(2))
		register(t, rt, "a1", "a2")
		busy := newFake()
		start(t, rt, busy.spec("bash", "a2", true))
		q1, q2 := newFake(), newFake()
		start(t, rt, q1.spec("bash", "a1", true))
		start(t, rt, q2.spec("bash", "a1", true))
		require.NoError(t, rt.Agents().Dispose(bg, "a1"))
		assert.Equal(t, 0, q1.runs()+q2.runs())
		busy.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, "bash-1", "a2")
	})
	t.Run("a queued task whose Run fails settles failed and passes its slot on", func(t *testing.T) {
		rt := newRT(t, actors.WithGlobalLimit(1), actors.WithQueue(2))
		register(t, rt, "a1")
		busy := newFake()
		start(t, rt, busy.spec("bash", "a1", true))
		idBad := start(t, rt, messages.Spec{Kind: "bash", Label: "bad", Owner: "a1",
			Run: func() (messages.Hooks, error) { return messages.Hooks{}, errBoom }})
		next := newFake()
		idNext := start(t, rt, next.spec("bash", "a1", true))
		busy.Finish(messages.Outcome{Status: messages.Completed})
		s := settleWait(t, rt, idBad, "a1")
		assert.Equal(t, messages.Failed, s.Status)
		assert.Equal(t, "start failed: "+errBoom.Error(), s.Detail)
		next.Finish(messages.Outcome{Status: messages.Completed})
		assert.Equal(t, messages.Completed, settleWait(t, rt, idNext, "a1").Status, "the slot passed on")
	})
}

func statuses(l []messages.Snapshot) []messages.Status {
	out := make([]messages.Status, len(l))
	for i, s := range l {
		out[i] = s.Status
	}
	return out
}

// TestGlobalLimitIsFairAcrossOwners: with one slot for many owners, each queuing
// several tasks, slots go round robin — every owner waiting gets one before any gets
// a second — and within an owner first queued first. Run with -race.
func TestGlobalLimitIsFairAcrossOwners(t *testing.T) {
	const owners, each = 12, 4
	rt := newRT(t, actors.WithGlobalLimit(1), actors.WithQueue(each), actors.WithoutOwnerLimit())
	started := make(chan *ran, owners*each)
	var all []*ran
	for o := range owners {
		id := messages.AgentID(fmt.Sprintf("o%02d", o))
		register(t, rt, id)
		for n := range each {
			f := &ran{fake: newFake(), owner: id, n: n}
			all = append(all, f)
		}
	}
	// Each owner's tasks, started in turn from concurrent goroutines would race for
	// the queue order; start them in a known order: o00#0..3, o01#0..3, …
	for _, f := range all {
		start(t, rt, queuedSpec(f, started))
	}
	var got []string
	for range all {
		f := <-started
		got = append(got, fmt.Sprintf("%s#%d", f.owner, f.n))
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
	// o00#0 took the free slot; then the round robin goes on from o00.
	want := []string{"o00#0"}
	for n := range each {
		for o := range owners {
			if o == 0 && n == 0 {
				continue
			}
			if o == 0 {
				continue
			}
			want = append(want, fmt.Sprintf("o%02d#%d", o, n))
		}
		if n+1 < each {
			want = append(want, fmt.Sprintf("o00#%d", n+1))
		}
	}
	assert.Equal(t, want, got)
}

// The turn goes on after the owner served last, even when that owner queued after
// the others: a1 runs one task directly, a2, a3 and then a1 queue one each, and the
// freed slot goes to a2, a3, then a1 — not to a2's predecessor in the queue order.
func TestRoundRobinStartsAfterTheOwnerServedLast(t *testing.T) {
	rt := newRT(t, actors.WithGlobalLimit(1), actors.WithQueue(1))
	register(t, rt, "a1", "a2", "a3")
	started := make(chan *ran, 4)
	first := &ran{fake: newFake(), owner: "a1"}
	start(t, rt, queuedSpec(first, started))
	<-started
	for _, o := range []messages.AgentID{"a2", "a3", "a1"} {
		start(t, rt, queuedSpec(&ran{fake: newFake(), owner: o}, started))
	}
	first.Finish(messages.Outcome{Status: messages.Completed})
	var got []messages.AgentID
	for range 3 {
		f := <-started
		got = append(got, f.owner)
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
	assert.Equal(t, []messages.AgentID{"a2", "a3", "a1"}, got)
}
