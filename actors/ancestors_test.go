package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// family registers top → mid → low (three levels) and a sibling of mid, and starts
// one task for each, returning the ids by agent.
func family(t *testing.T, rt *actors.Runtime) (map[messages.AgentID]messages.TaskID, map[messages.AgentID]*fake) {
	t.Helper()
	register(t, rt, "top", "stranger")
	require.NoError(t, rt.Agents().Register(bg, "mid", actors.WithParent("top")))
	require.NoError(t, rt.Agents().Register(bg, "sib", actors.WithParent("top")))
	require.NoError(t, rt.Agents().Register(bg, "low", actors.WithParent("mid")))
	ids := map[messages.AgentID]messages.TaskID{}
	fakes := map[messages.AgentID]*fake{}
	for _, a := range []messages.AgentID{"top", "mid", "sib", "low", "stranger"} {
		f := newFake()
		f.Emit("output of " + string(a))
		ids[a] = start(t, rt, f.spec("bash", a, true))
		fakes[a] = f
	}
	t.Cleanup(func() {
		for _, f := range fakes {
			f.Finish(messages.Outcome{Status: messages.Completed})
		}
	})
	return ids, fakes
}

func TestAncestorsReachTheirDescendantsTasks(t *testing.T) {
	tests := []struct {
		caller messages.AgentID
		sees   []messages.AgentID // whose tasks the caller reaches
	}{
		{"top", []messages.AgentID{"top", "mid", "sib", "low"}},
		{"mid", []messages.AgentID{"mid", "low"}},
		{"low", []messages.AgentID{"low"}},
		{"sib", []messages.AgentID{"sib"}},
		{"stranger", []messages.AgentID{"stranger"}},
		{"", nil},
	}
	rt := newRT(t)
	ids, _ := family(t, rt)
	for _, tc := range tests {
		t.Run(string(tc.caller)+" reaches exactly its own and its descendants' tasks", func(t *testing.T) {
			reaches := map[messages.AgentID]bool{}
			for _, a := range tc.sees {
				reaches[a] = true
			}
			for owner, id := range ids {
				_, err := rt.Tasks().Get(bg, id, tc.caller)
				if reaches[owner] {
					assert.NoError(t, err, "%s gets %s's task", tc.caller, owner)
				} else {
					assert.EqualError(t, err, "task not found: "+string(id), "%s is fenced from %s's task, exactly as from an unknown id", tc.caller, owner)
				}
			}
			list, err := rt.Tasks().List(bg, tc.caller)
			require.NoError(t, err)
			var want []messages.TaskID
			for _, a := range []messages.AgentID{"top", "mid", "sib", "low", "stranger"} { // start order
				if reaches[a] {
					want = append(want, ids[a])
				}
			}
			if len(want) == 0 {
				assert.Empty(t, list)
			} else {
				assert.Equal(t, want, idsOf(list), "list in start order")
			}
		})
	}
}

func TestAnAncestorReadsWaitsAndKillsThreeLevelsDown(t *testing.T) {
	rt := newRT(t)
	ids, fakes := family(t, rt)
	low := ids["low"]
	r, err := rt.Tasks().Read(bg, low, "top")
	require.NoError(t, err)
	assert.Equal(t, "output of low", r.Output)
	s, err := rt.Tasks().Wait(bg, low, "top", time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status)
	res, _, err := rt.Tasks().Kill(bg, low, "top", "the parent stops what its sub-agent left running")
	require.NoError(t, err)
	assert.Equal(t, messages.KillRequested, res)
	assert.Equal(t, "the parent stops what its sub-agent left running", <-fakes["low"].Cancels)
	s = settleWait(t, rt, low, "mid")
	assert.Equal(t, messages.Killed, s.Status)
	assert.Equal(t, messages.AgentID("low"), s.Owner, "the task keeps its own owner")
}

// A notice goes only to the task's own owner, never to an ancestor.
func TestNoticesGoOnlyToTheOwnOwner(t *testing.T) {
	rt := newRT(t)
	inject := func(ch chan string) actors.AgentOption {
		return actors.WithInjector(func(_ context.Context, s string) error { ch <- s; return nil })
	}
	parent, child := make(chan string, 4), make(chan string, 4)
	require.NoError(t, rt.Agents().Register(bg, "p", inject(parent)))
	require.NoError(t, rt.Agents().Register(bg, "c", actors.WithParent("p"), inject(child)))
	stop := rt.Tasks().OnDone(func(s messages.Snapshot) { _, _ = rt.Tasks().Notify(bg, s.ID, "done "+string(s.ID)) })
	defer stop()
	f := newFake()
	id := start(t, rt, f.spec("bash", "c", true))
	f.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, "done "+string(id), <-child)
	assert.Empty(t, parent)
}

func TestWithoutAncestorAccessEveryOwnerIsFenced(t *testing.T) {
	rt := newRT(t, actors.WithoutAncestorAccess())
	ids, _ := family(t, rt)
	_, err := rt.Tasks().Get(bg, ids["mid"], "top")
	assert.ErrorIs(t, err, messages.ErrTaskNotFound)
	list, err := rt.Tasks().List(bg, "top")
	require.NoError(t, err)
	assert.Equal(t, []messages.TaskID{ids["top"]}, idsOf(list))
}
