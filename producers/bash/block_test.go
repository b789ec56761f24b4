//go:build linux

package bash

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/outputtest"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// Block mode through the runtime (Command.BlockOutput): the command waits for its
// owner to read instead of losing output, shows as full while it waits, and a
// kill or its owner's disposal still ends it within the grace.

// settleMargin is what a loaded machine may add to a grace before a blocked task
// is gone: a failure bound, not a figure.
const settleMargin = 5 * time.Second

// readAll reads id to its end as a slow owner would: it reads only once the
// task says its output is full (or the task settled), and returns the digest of
// everything read, its size, how many times the task was seen full, and the
// final snapshot.
func readAll(t *testing.T, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID) (sum [32]byte, size int64, fulls int, last messages.Snapshot) {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	for {
		s, err := rt.Tasks().Wait(ctx, id, caller, settleLimit)
		require.NoError(t, err)
		require.True(t, s.OutputFull || s.Status.Terminal(), "a wait on a task in block mode returned neither full nor settled: %+v", s)
		if s.OutputFull {
			fulls++
		}
		for {
			r, err := rt.Tasks().Read(ctx, id, caller)
			require.NoError(t, err)
			h.Write([]byte(r.Output))
			size += int64(len(r.Output))
			last = r.Snapshot
			if r.Output == "" || !r.Snapshot.Status.Terminal() {
				break
			}
		}
		if last.Status.Terminal() {
			copy(sum[:], h.Sum(nil))
			return sum, size, fulls, last
		}
	}
}

// The command's whole output arrives in order however slowly the owner reads:
// the checksum of what `seq` wrote against what the reads returned.
func TestBlockModeDeliversEveryByteInOrder(t *testing.T) {
	n := 23_301_689 // `seq -w` writes 9 bytes a line: 200 MiB
	if testing.Short() {
		n = 200_000
	}
	want, wantSize := outputtest.SeqDigest(n, true)
	p := newTestProducer(t, WithOutput(output.WithMaxRead(256<<10), output.WithMemory(32<<10, 256<<10)))
	rt := newRuntime(t)
	id, err := rt.Tasks().Start(context.Background(), p.Spec("", Command{Command: fmt.Sprintf("seq -w 1 %d", n), BlockOutput: true}))
	require.NoError(t, err)

	got, size, fulls, last := readAll(t, rt, id, "")
	assert.Equal(t, messages.Completed, last.Status, last.Detail)
	assert.Equal(t, wantSize, size, "bytes read")
	assert.Equal(t, want, got, "sha256 of what the command wrote against what the reads returned")
	assert.Positive(t, fulls, "the command outran the reader, so it waited for reads")
	assert.False(t, last.OutputFull, "a settled task is not full")
}

// A full task says so in its snapshot and its events, and stops saying so once a
// read makes room; a ReadUntil whose pattern the unread output does not match
// answers at once with UntilFull instead of waiting through a pause only a read
// can end.
func TestBlockModeShowsFullAndEndsWaits(t *testing.T) {
	ctx := context.Background()
	p := newTestProducer(t)
	rt := newRuntime(t)
	sub, err := rt.Subscribe(ctx)
	require.NoError(t, err)
	defer sub.Close()
	id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: "seq 1 1000000", BlockOutput: true}))
	require.NoError(t, err)

	t.Run("a wait returns at once when full", func(t *testing.T) {
		s, err := rt.Tasks().Wait(ctx, id, "", settleLimit)
		require.NoError(t, err)
		assert.Equal(t, messages.Running, s.Status)
		assert.True(t, s.OutputFull)
		g, err := rt.Tasks().Get(ctx, id, "")
		require.NoError(t, err)
		assert.True(t, g.OutputFull, "Get shows the task full until a read")
	})
	t.Run("the event says full", func(t *testing.T) {
		for ev := range sub.Events() {
			if ev.Kind == messages.EventTaskOutputFull && ev.Task.ID == id {
				assert.True(t, ev.Task.OutputFull)
				return
			}
		}
		t.Fatal("the subscription ended without an output-full event")
	})
	t.Run("a read makes room", func(t *testing.T) {
		r, err := rt.Tasks().Read(ctx, id, "")
		require.NoError(t, err)
		assert.True(t, len(r.Output) > 0 && r.Output[:2] == "1\n", "the read starts at the output's start: %.20q", r.Output)
		assert.NotContains(t, r.Output, "left out")
		// The writer may have filled the room the read made before the snapshot
		// was taken, so OutputFull is either; TestOutputFull (actors) pins that a
		// read clears it.
	})
	t.Run("ReadUntil answers UntilFull", func(t *testing.T) {
		r, err := rt.Tasks().ReadUntil(ctx, id, "", "no such line", settleLimit)
		require.NoError(t, err)
		assert.Equal(t, messages.UntilFull, r.Reason)
		assert.NotEmpty(t, r.Output, "the read up to a pattern took the unread output")
		assert.Equal(t, messages.Running, r.Snapshot.Status)
	})
	t.Run("an observer never holds the task", func(t *testing.T) {
		// Peek leaves the owner's cursor; the owner reads on to the end, and the
		// observer that read the start and came back finds what followed gone,
		// counted.
		pk, err := rt.Tasks().Peek(ctx, id, "", 0, 1<<20)
		require.NoError(t, err)
		assert.NotEmpty(t, pk.Data)
		_, size, _, last := readAll(t, rt, id, "")
		assert.Equal(t, messages.Completed, last.Status, last.Detail)
		assert.Positive(t, size)
		pk, err = rt.Tasks().Peek(ctx, id, "", pk.Next, 1<<20)
		require.NoError(t, err)
		assert.Positive(t, pk.Missed, "block mode keeps no spill: an observer that fell behind is told what it missed")
	})
}

// A kill ends a command that waits for a read at once — even one that ignores
// SIGTERM, within the grace — and so does its owner's disposal; no process stays.
func TestBlockModeKillAndDisposeEndABlockedTask(t *testing.T) {
	ctx := context.Background()
	const grace = 500 * time.Millisecond
	cmd := Command{Command: "trap '' TERM; seq 1 100000000", BlockOutput: true}
	t.Run("kill", func(t *testing.T) {
		p := newTestProducer(t, WithGrace(grace))
		rt := newRuntime(t)
		id, err := rt.Tasks().Start(ctx, p.Spec("", cmd))
		require.NoError(t, err)
		s, err := rt.Tasks().Wait(ctx, id, "", settleLimit)
		require.NoError(t, err)
		require.True(t, s.OutputFull, "the command filled its output")

		start := time.Now()
		res, _, err := rt.Tasks().Kill(ctx, id, "", "blocked")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, res)
		s = settled(t, rt, id, "")
		took := time.Since(start)
		assert.Equal(t, messages.Killed, s.Status)
		assert.Less(t, took, grace+settleMargin, "a blocked task ends within the grace")
		assert.Zero(t, p.Live(), "no process of the task is left")
	})
	t.Run("dispose", func(t *testing.T) {
		p := newTestProducer(t, WithGrace(grace))
		rt := newRuntime(t)
		require.NoError(t, rt.Agents().Register(ctx, "a1"))
		id, err := rt.Tasks().Start(ctx, p.Spec("a1", cmd))
		require.NoError(t, err)
		s, err := rt.Tasks().Wait(ctx, id, "a1", settleLimit)
		require.NoError(t, err)
		require.True(t, s.OutputFull, "the command filled its output")

		start := time.Now()
		require.NoError(t, rt.Agents().Dispose(ctx, "a1"))
		assert.Less(t, time.Since(start), grace+settleMargin, "disposal ends a blocked task within the grace")
		assert.Zero(t, p.Live(), "no process of the task is left")
	})
}
