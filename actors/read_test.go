package actors_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

func TestStreamReadsAreConsumingDeltas(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", true))
	read := func() messages.ReadResult {
		r, err := rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		return r
	}
	f.Emit("one\n")
	assert.Equal(t, "one\n", read().Output)
	assert.Equal(t, "", read().Output, "nothing new, nothing re-delivered")
	f.Emit("two\n")
	f.Emit("three\n")
	r := read()
	assert.Equal(t, "two\nthree\n", r.Output)
	assert.Equal(t, messages.Running, r.Snapshot.Status)
	assert.False(t, r.Snapshot.Reported, "a running read does not report")

	f.Emit("tail\n")
	f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	settled := record(rt)
	_ = settled
	for {
		s, err := rt.Tasks().Get(bg, id, "")
		require.NoError(t, err)
		if s.Status.Terminal() {
			break
		}
		_, err = rt.Tasks().Wait(bg, id, "", 1e9)
		require.NoError(t, err)
	}
	r = read()
	assert.Equal(t, "tail\n", r.Output, "the rest after settlement")
	assert.Equal(t, messages.Completed, r.Snapshot.Status)
	assert.True(t, r.Snapshot.Reported)
	assert.Equal(t, "", read().Output)
}

func TestFinalReadsAreIdempotentOnceTerminal(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("subagent", "", false))
	r, err := rt.Tasks().Read(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, "", r.Output, "nothing while running")
	assert.Equal(t, messages.Running, r.Snapshot.Status)

	f.Finish(messages.Outcome{Status: messages.Completed, Output: "the answer"})
	settleWait(t, rt, id, "")
	for i := 0; i < 3; i++ {
		r, err := rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, "the answer", r.Output, "read %d", i)
		assert.Equal(t, messages.Completed, r.Snapshot.Status)
	}
}

func TestReadOutputPanicIsContained(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) {
		h := f.hooks(true)
		h.ReadOutput = func() string { panic("reader exploded") }
		return h, nil
	}})
	_, err := rt.Tasks().Read(bg, id, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reader exploded")
	s, err := rt.Tasks().Get(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status, "the task is unaffected")
	f.Finish(messages.Outcome{Status: messages.Completed})
}
