package actors_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The "keep none" options: no settled record, and no tombstone either.
func TestKeepNoneOptions(t *testing.T) {
	for _, tc := range []struct {
		rule      string
		opts      []actors.Option
		tombstone bool // the settled task is answered from a tombstone (else: not found)
	}{
		{"WithNoRetention evicts at settlement", []actors.Option{actors.WithNoRetention()}, true},
		{"WithNoTombstones forgets evicted tasks", []actors.Option{actors.WithNoRetention(), actors.WithNoTombstones()}, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			rt := newRT(t, tc.opts...)
			register(t, rt, "a1")
			r := record(rt)
			f := newFake()
			id := start(t, rt, f.spec("bash", "a1", true))
			f.Finish(messages.Outcome{Status: messages.Completed})
			r.next(t) // the registry evicts in the same step that hands the listener the settlement
			s, err := rt.Tasks().Get(bg, id, "a1")
			if !tc.tombstone {
				require.ErrorIs(t, err, messages.ErrTaskNotFound)
				return
			}
			require.NoError(t, err)
			assert.True(t, s.Evicted, "answered from its tombstone")
		})
	}
}
