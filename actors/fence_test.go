package actors_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

// A task owned by another agent, or owned at all when the caller is "", fails exactly
// as an unknown id does, on every operation, and the attempt has no effect.
func TestOwnerFence(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1", "a2")
	f := newFake()
	owned := start(t, rt, f.spec("bash", "a1", true))
	f.Emit("secret output")

	ops := map[string]func(id messages.TaskID, caller messages.AgentID) error{
		"get": func(id messages.TaskID, c messages.AgentID) error { _, err := rt.Tasks().Get(bg, id, c); return err },
		"read": func(id messages.TaskID, c messages.AgentID) error {
			_, err := rt.Tasks().Read(bg, id, c)
			return err
		},
		"kill": func(id messages.TaskID, c messages.AgentID) error {
			_, _, err := rt.Tasks().Kill(bg, id, c, "x")
			return err
		},
		"wait": func(id messages.TaskID, c messages.AgentID) error {
			_, err := rt.Tasks().Wait(bg, id, c, time.Millisecond)
			return err
		},
	}
	for name, op := range ops {
		unknownErr := op("bash-99", "a2")
		require.ErrorIs(t, unknownErr, messages.ErrTaskNotFound, name)
		for _, caller := range []messages.AgentID{"a2", ""} {
			t.Run(name+" by "+string(caller)+" gets not-found, same text as unknown", func(t *testing.T) {
				err := op(owned, caller)
				require.ErrorIs(t, err, messages.ErrTaskNotFound)
				want := "task not found: " + string(owned)
				assert.Equal(t, want, err.Error())
				assert.Equal(t, "task not found: bash-99", unknownErr.Error())
			})
		}
	}
	t.Run("foreign attempts had no effect", func(t *testing.T) {
		assert.Empty(t, f.Cancels, "no cancel")
		r, err := rt.Tasks().Read(bg, owned, "a1")
		require.NoError(t, err)
		assert.Equal(t, "secret output", r.Output, "nothing consumed")
		assert.Equal(t, messages.Running, r.Snapshot.Status)
		assert.False(t, r.Snapshot.Reported)
	})
	f.Finish(messages.Outcome{Status: messages.Completed})
}

func TestUnownedTasksAreOpen(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1")
	f := newFake()
	id := start(t, rt, f.spec("bash", "", false))
	for _, caller := range []messages.AgentID{"", "a1", "stranger"} {
		s, err := rt.Tasks().Get(bg, id, caller)
		require.NoError(t, err, "caller %q", caller)
		assert.Equal(t, id, s.ID)
	}
	f.Finish(messages.Outcome{Status: messages.Completed})
}

func TestListShowsOwnAndUnownedInStartOrder(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1", "a2")
	var fakes []*fake
	mk := func(kind string, owner messages.AgentID) messages.TaskID {
		f := newFake()
		fakes = append(fakes, f)
		return start(t, rt, f.spec(kind, owner, false))
	}
	a1x := mk("bash", "a1")
	u1 := mk("bash", "")
	a2x := mk("subagent", "a2")
	a1y := mk("subagent", "a1")
	tests := []struct {
		caller messages.AgentID
		want   []messages.TaskID
	}{
		{"a1", []messages.TaskID{a1x, u1, a1y}},
		{"a2", []messages.TaskID{u1, a2x}},
		{"", []messages.TaskID{u1}},
		{"stranger", []messages.TaskID{u1}},
	}
	for _, tc := range tests {
		t.Run("caller "+string(tc.caller)+" sees only its own and unowned tasks", func(t *testing.T) {
			list, err := rt.Tasks().List(bg, tc.caller)
			require.NoError(t, err)
			var got []messages.TaskID
			for _, s := range list {
				got = append(got, s.ID)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	for _, f := range fakes {
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
}
