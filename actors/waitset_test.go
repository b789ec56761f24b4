package actors_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// permutations of [0, n).
func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// WaitAll returns once every task settled, whatever the order; WaitAny returns at the
// first settlement. Each returned terminal snapshot is reported.
func TestWaitAllAndAnyInEveryOrder(t *testing.T) {
	for _, order := range permutations(3) {
		t.Run(fmt.Sprintf("all, settling in order %v", order), func(t *testing.T) {
			rt := newRT(t)
			register(t, rt, "a1")
			var ids []messages.TaskID
			var fakes []*fake
			for range 3 {
				f := newFake()
				ids = append(ids, start(t, rt, f.spec("bash", "a1", true)))
				fakes = append(fakes, f)
			}
			done := make(chan []messages.Snapshot, 1)
			go func() {
				snaps, err := rt.Tasks().WaitAll(bg, ids, "a1", time.Minute)
				assert.NoError(t, err)
				done <- snaps
			}()
			for _, i := range order {
				fakes[i].Finish(messages.Outcome{Status: messages.Completed, Detail: fmt.Sprint(i)})
			}
			snaps := <-done
			require.Len(t, snaps, 3)
			for i, s := range snaps {
				assert.Equal(t, ids[i], s.ID, "in the order of the ids")
				assert.Equal(t, messages.Completed, s.Status)
				assert.True(t, s.Reported)
			}
		})
		t.Run(fmt.Sprintf("any, first to settle is %d", order[0]), func(t *testing.T) {
			rt := newRT(t)
			register(t, rt, "a1")
			var ids []messages.TaskID
			var fakes []*fake
			for range 3 {
				f := newFake()
				ids = append(ids, start(t, rt, f.spec("bash", "a1", true)))
				fakes = append(fakes, f)
			}
			first := order[0]
			fakes[first].Finish(messages.Outcome{Status: messages.Completed})
			snaps, err := rt.Tasks().WaitAny(bg, ids, "a1", time.Minute)
			require.NoError(t, err)
			for i, s := range snaps {
				if i == first {
					assert.Equal(t, messages.Completed, s.Status)
					assert.True(t, s.Reported)
					continue
				}
				// The others may have settled meanwhile only if we settled them: we
				// did not, so they are running and not reported.
				assert.Equal(t, messages.Running, s.Status)
				assert.False(t, get(t, rt, ids[i], "a1").Reported)
			}
			for _, f := range fakes {
				f.Finish(messages.Outcome{Status: messages.Completed})
			}
		})
	}
}

func TestWaitSetArguments(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1", "a2")
	f := newFake()
	own := start(t, rt, f.spec("bash", "a1", true))
	g := newFake()
	foreign := start(t, rt, g.spec("bash", "a2", true))
	defer f.Finish(messages.Outcome{Status: messages.Completed})
	defer g.Finish(messages.Outcome{Status: messages.Completed})
	many := make([]messages.TaskID, messages.MaxWaitSet+1)
	for i := range many {
		many[i] = messages.TaskID(fmt.Sprintf("bash-%d", i+100))
	}
	tests := []struct {
		name    string
		ids     []messages.TaskID
		timeout time.Duration
		want    string
	}{
		{"a foreign id fails the whole call, naming it", []messages.TaskID{own, foreign}, time.Minute, "task not found: " + string(foreign)},
		{"an unknown id fails the whole call, naming it", []messages.TaskID{"bash-99", own}, time.Minute, "task not found: bash-99"},
		{"no ids", nil, time.Minute, "invalid argument: a wait names 1 to 32 task ids, not 0"},
		{"more than 32 ids", many, time.Minute, "invalid argument: a wait names 1 to 32 task ids, not 33"},
		{"a timeout of zero", []messages.TaskID{own}, 0, "invalid argument: invalid wait timeout 0s: it must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Tasks().WaitAny(bg, tc.ids, "a1", tc.timeout)
			assert.EqualError(t, err, tc.want)
		})
	}
	assert.Empty(t, g.Cancels)
	t.Run("duplicates count once", func(t *testing.T) {
		h := newFake()
		id := start(t, rt, h.spec("bash", "a1", true))
		h.Finish(messages.Outcome{Status: messages.Completed})
		snaps, err := rt.Tasks().WaitAll(bg, []messages.TaskID{id, id, id}, "a1", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, []messages.TaskID{id}, idsOf(snaps))
	})
}

func TestWaitSetTimeoutAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f, g := newFake(), newFake()
		ids := []messages.TaskID{start(t, rt, f.spec("bash", "a1", true)), start(t, rt, g.spec("bash", "a1", true))}
		before := time.Now()
		snaps, err := rt.Tasks().WaitAll(bg, ids, "a1", 30*time.Second)
		require.NoError(t, err, "a timed-out wait is a success")
		assert.Equal(t, 30*time.Second, time.Since(before))
		for _, s := range snaps {
			assert.Equal(t, messages.Running, s.Status)
		}
		f.Finish(messages.Outcome{Status: messages.Completed})
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		snaps, err = rt.Tasks().WaitAll(ctx, ids, "a1", time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded, "ctx ends only the wait")
		assert.Equal(t, messages.Completed, snaps[0].Status)
		assert.Equal(t, messages.Running, snaps[1].Status)
		assert.Empty(t, g.Cancels, "the tasks are untouched")
		g.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, ids[1], "a1")
		_, err = rt.Tasks().List(bg, "a1") // the registry has taken in the settlement
		require.NoError(t, err)
		assert.Equal(t, actors.Stats{Tasks: 2, Retained: 2, Agents: 1, Actors: 4}, rt.Stats(), "no set waiter is left")
	})
}

// An abandoned or timed-out set wait leaves nothing behind that would later report a
// task: the notice of a task that settles afterwards is still owed.
func TestAnAbandonedSetWaitDoesNotReport(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1")
	rec := record(rt)
	f := newFake()
	id := start(t, rt, f.spec("bash", "a1", true))
	snaps, err := rt.Tasks().WaitAny(bg, []messages.TaskID{id}, "a1", time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, messages.Running, snaps[0].Status)
	f.Finish(messages.Outcome{Status: messages.Completed})
	assert.False(t, rec.next(t).Reported)
}

func TestWaitSetActorNative(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	f.Finish(messages.Outcome{Status: messages.Completed})
	r := request(t, rt, &messages.WaitTasks{IDs: []messages.TaskID{id}, Mode: messages.WaitAll, Timeout: time.Minute}).(*messages.WaitTasksReply)
	require.NoError(t, r.Err)
	assert.Equal(t, messages.Completed, r.Snapshots[0].Status)
	r = request(t, rt, &messages.WaitTasks{IDs: []messages.TaskID{id}, Mode: "first", Timeout: time.Minute}).(*messages.WaitTasksReply)
	assert.ErrorIs(t, r.Err, messages.ErrInvalidArgument)
	r = request(t, rt, messages.WaitTasks{IDs: []messages.TaskID{id}}).(*messages.WaitTasksReply)
	assert.ErrorIs(t, r.Err, messages.ErrInvalidArgument, "by value")
}
