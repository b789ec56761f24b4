package actors_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// buffered starts a stream task whose output is an output.Buffer (Hooks.Output).
func buffered(t *testing.T, rt *actors.Runtime, owner messages.AgentID) (messages.TaskID, *fake) {
	t.Helper()
	f := newFake()
	f.Buffered()
	id := start(t, rt, f.spec("bash", owner, true))
	t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Completed}) })
	return id, f
}

func TestReadUntil(t *testing.T) {
	const pattern = `listening on :\d+`
	t.Run("a match already in the output returns at once, through its line", func(t *testing.T) {
		rt := newRT(t)
		id, f := buffered(t, rt, "")
		f.Emit("booting\nlistening on :8080\nGET /\n")
		r, err := rt.Tasks().ReadUntil(bg, id, "", pattern, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, messages.UntilMatched, r.Reason)
		assert.Equal(t, "listening on :8080", r.Match)
		assert.Equal(t, "booting\nlistening on :8080\n", r.Output)
		assert.Equal(t, messages.Running, r.Snapshot.Status)
		next, err := rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, "GET /\n", next.Output, "what follows stays for the next read")
	})
	t.Run("a match that arrives later, on a line split between two writes", func(t *testing.T) {
		rt := newRT(t)
		id, f := buffered(t, rt, "")
		f.Emit("old line listening on :1\n")
		_, err := rt.Tasks().Read(bg, id, "") // consumed: not searched again
		require.NoError(t, err)
		got := make(chan messages.UntilResult, 1)
		go func() {
			r, err := rt.Tasks().ReadUntil(bg, id, "", pattern, time.Minute)
			assert.NoError(t, err)
			got <- r
		}()
		f.Emit("compiling\nlisten")
		f.Emit("ing on :9090\nready\n")
		r := <-got
		assert.Equal(t, messages.UntilMatched, r.Reason)
		assert.Equal(t, "listening on :9090", r.Match)
		assert.Contains(t, r.Output, "listening on :9090\n")
		assert.NotContains(t, r.Output, "ready")
	})
	t.Run("a task that ends first returns the rest, reported", func(t *testing.T) {
		rt := newRT(t)
		id, f := buffered(t, rt, "")
		got := make(chan messages.UntilResult, 1)
		go func() {
			r, err := rt.Tasks().ReadUntil(bg, id, "", pattern, time.Minute)
			assert.NoError(t, err)
			got <- r
		}()
		f.Emit("error: port in use\n")
		f.Finish(messages.Outcome{Status: messages.Failed, Detail: "exit code: 1"})
		r := <-got
		assert.Equal(t, messages.UntilEnded, r.Reason)
		assert.Equal(t, "error: port in use\n", r.Output)
		assert.Equal(t, messages.Failed, r.Snapshot.Status)
		assert.True(t, get(t, rt, id, "").Reported)
	})
	t.Run("errors start nothing and consume nothing", func(t *testing.T) {
		rt := newRT(t)
		id, f := buffered(t, rt, "")
		f.Emit("kept\n")
		_, err := rt.Tasks().ReadUntil(bg, id, "", "(unclosed", time.Minute)
		assert.ErrorIs(t, err, messages.ErrInvalidArgument)
		_, err = rt.Tasks().ReadUntil(bg, id, "", pattern, 0)
		assert.ErrorIs(t, err, messages.ErrInvalidArgument)
		final := newFake()
		fid := start(t, rt, final.spec("subagent", "", false))
		defer final.Finish(messages.Outcome{Status: messages.Completed})
		_, err = rt.Tasks().ReadUntil(bg, fid, "", pattern, time.Minute)
		assert.ErrorIs(t, err, messages.ErrNoOutputStream, "a final-output kind has nothing to match")
		r, err := rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, "kept\n", r.Output)
	})
	t.Run("the fence applies", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		id, _ := buffered(t, rt, "a1")
		_, err := rt.Tasks().ReadUntil(bg, id, "a2", pattern, time.Minute)
		assert.EqualError(t, err, "task not found: "+string(id))
	})
}

func TestReadUntilTimeoutAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		id, f := buffered(t, rt, "")
		f.Emit("still compiling\n")
		before := time.Now()
		r, err := rt.Tasks().ReadUntil(bg, id, "", "never", 30*time.Second)
		require.NoError(t, err, "a timed-out wait is a success")
		assert.Equal(t, 30*time.Second, time.Since(before))
		assert.Equal(t, messages.UntilTimedOut, r.Reason)
		assert.Equal(t, "still compiling\n", r.Output, "what is new is shown: why nothing matched")

		f.Emit("more\n")
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		_, err = rt.Tasks().ReadUntil(ctx, id, "", "never", time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rr, err := rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, "more\n", rr.Output, "a wait its caller gave up on consumed nothing")
	})
}

func TestPeek(t *testing.T) {
	rt := newRT(t, actors.WithRetention(1))
	register(t, rt, "a1")
	id, f := buffered(t, rt, "a1")
	f.Emit("0123456789")
	t.Run("observer reads never move the model's cursor", func(t *testing.T) {
		p, err := rt.Tasks().Peek(bg, id, "a1", 2, 4)
		require.NoError(t, err)
		assert.Equal(t, "2345", string(p.Data))
		assert.Equal(t, int64(6), p.Next)
		assert.Zero(t, p.Missed)
		p, err = rt.Tasks().Peek(bg, id, "a1", 20, 4)
		require.NoError(t, err)
		assert.Empty(t, p.Data, "past the end")
		assert.Equal(t, int64(20), p.Next)
		r, err := rt.Tasks().Read(bg, id, "a1")
		require.NoError(t, err)
		assert.Equal(t, "0123456789", r.Output, "the model's read is whole")
		p, err = rt.Tasks().Peek(bg, id, "a1", 0, 0)
		require.NoError(t, err)
		assert.Equal(t, "0123456789", string(p.Data), "and can still be observed after it")
	})
	t.Run("the fence applies", func(t *testing.T) {
		_, err := rt.Tasks().Peek(bg, id, "a2", 0, 4)
		assert.EqualError(t, err, "task not found: "+string(id))
	})
	t.Run("kinds without an output stream say so", func(t *testing.T) {
		g := newFake()
		gid := start(t, rt, g.spec("bash", "a1", true)) // ReadOutput only
		defer g.Finish(messages.Outcome{Status: messages.Completed})
		_, err := rt.Tasks().Peek(bg, gid, "a1", 0, 4)
		assert.ErrorIs(t, err, messages.ErrNoOutputStream)
	})
	t.Run("after eviction: no bytes, the tombstone's snapshot", func(t *testing.T) {
		f.Finish(messages.Outcome{Status: messages.Completed})
		waitSettled(t, rt, id, "a1")
		settleInOrder(t, rt, "a1", "bash") // evicts id
		p, err := rt.Tasks().Peek(bg, id, "a1", 0, 4)
		require.NoError(t, err)
		assert.Empty(t, p.Data)
		assert.True(t, p.Snapshot.Evicted)
	})
}

// A final-output kind with a progress stream (a sub-agent): while it runs, a read
// shows the progress since the previous read; once settled, the final answer,
// idempotently. Peek and ReadUntil use the progress.
func TestProgressOfAFinalOutputKind(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	progress := f.WithProgress()
	id := start(t, rt, f.spec("subagent", "", false))
	progress.WriteString("→ bash {\"command\":\"go test ./...\"}\n")
	r, err := rt.Tasks().Read(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, "→ bash {\"command\":\"go test ./...\"}\n", r.Output)
	progress.WriteString("← bash ok\nsays: the tests pass\n")
	u, err := rt.Tasks().ReadUntil(bg, id, "", "^← bash", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, messages.UntilMatched, u.Reason)
	assert.Equal(t, "← bash ok\n", u.Output)
	p, err := rt.Tasks().Peek(bg, id, "", 0, 1024)
	require.NoError(t, err)
	assert.Contains(t, string(p.Data), "says: the tests pass")
	f.Finish(messages.Outcome{Status: messages.Completed, Output: "The tests pass."})
	settleWait(t, rt, id, "")
	for range 2 {
		r, err = rt.Tasks().Read(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, "The tests pass.", r.Output, "the final answer, idempotently")
	}
}

// An observer read of a tombstone does not report the task: a model's pending notice
// is not lost to a UI looking at it.
func TestPeekOnATombstoneDoesNotReport(t *testing.T) {
	rt := newRT(t, actors.WithNoRetention())
	register(t, rt, "a1")
	ids, _ := settleInOrder(t, rt, "a1", "bash")
	p, err := rt.Tasks().Peek(bg, ids[0], "a1", 0, 10)
	require.NoError(t, err)
	require.True(t, p.Snapshot.Evicted)
	assert.False(t, get(t, rt, ids[0], "a1").Reported)
	err = rt.Tasks().Input(bg, ids[0], "a1", []byte("x"), false)
	assert.ErrorIs(t, err, messages.ErrTaskEnded)
	assert.False(t, get(t, rt, ids[0], "a1").Reported, "nor does a refused input")
}
