package actors_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// running is fake work already running outside the runtime: its hooks, its spec.
func running(owner messages.AgentID) (*fake, messages.Spec, messages.Hooks) {
	f := newFake()
	f.Buffered()
	s := f.spec("bash", owner, true)
	h, err := s.Run()
	if err != nil {
		panic(err) // a fake's Run does not fail unless told to
	}
	s.Run = nil
	return f, s, h
}

func TestAdopt(t *testing.T) {
	t.Run("running work becomes a task; everything it printed before is readable", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f, s, h := running("a1")
		f.Emit("early line\n")
		id, err := rt.Tasks().Adopt(bg, s, h)
		require.NoError(t, err)
		assert.Equal(t, messages.TaskID("bash-1"), id, "the id is allocated at adoption")
		f.Emit("later line\n")
		f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		snap := settleWait(t, rt, id, "a1")
		assert.Equal(t, messages.Completed, snap.Status)
		r, err := rt.Tasks().Read(bg, id, "a1")
		require.NoError(t, err)
		assert.Equal(t, "early line\nlater line\n", r.Output)
	})
	t.Run("the owner's disposal cancels adopted work like any task", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		f, s, h := running("a1")
		_, err := rt.Tasks().Adopt(bg, s, h)
		require.NoError(t, err)
		require.NoError(t, rt.Agents().Dispose(bg, "a1"))
		assert.Equal(t, "owner disposed", <-f.Cancels)
	})
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	refusals := []struct {
		name  string
		ctx   context.Context
		opts  []actors.Option
		owner messages.AgentID
		hooks func(messages.Hooks) messages.Hooks
		want  error
	}{
		{"over the owner's cap", bg, []actors.Option{actors.WithOwnerLimit(1)}, "a1", nil, messages.ErrOwnerLimit},
		{"an unknown owner", bg, nil, "ghost", nil, messages.ErrOwnerUnknown},
		{"a context already done", cancelled, nil, "a1", nil, messages.ErrAborted},
		{"hooks without Done", bg, nil, "a1", func(h messages.Hooks) messages.Hooks { h.Done = nil; return h }, messages.ErrInvalidSpec},
	}
	for _, tc := range refusals {
		t.Run("refused, the work untouched and no id burned: "+tc.name, func(t *testing.T) {
			rt := newRT(t, tc.opts...)
			register(t, rt, "a1")
			busy := newFake()
			start(t, rt, busy.spec("job", "a1", true)) // holds the one slot of a cap of 1
			f, s, h := running(tc.owner)
			if tc.hooks != nil {
				h = tc.hooks(h)
			}
			_, err := rt.Tasks().Adopt(tc.ctx, s, h)
			require.ErrorIs(t, err, tc.want)
			assert.Empty(t, f.Cancels, "the work was not cancelled: the caller still owns it")
			f.Finish(messages.Outcome{Status: messages.Completed})
			busy.Finish(messages.Outcome{Status: messages.Completed})
			g := newFake()
			id := start(t, rt, g.spec("bash", "", true))
			assert.Equal(t, messages.TaskID("bash-1"), id, "the refused adoption burned no number")
			g.Finish(messages.Outcome{Status: messages.Completed})
		})
	}
	t.Run("a key that names a task returns it, the work untouched", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		first := newFake()
		id := start(t, rt, keyedSpec(first, "a1", "k"))
		f, s, h := running("a1")
		s.Key = "k"
		got, err := rt.Tasks().Adopt(bg, s, h)
		require.ErrorIs(t, err, messages.ErrDuplicate)
		assert.Equal(t, id, got)
		assert.Empty(t, f.Cancels)
		f.Finish(messages.Outcome{Status: messages.Completed})
		first.Finish(messages.Outcome{Status: messages.Completed})
	})
}
