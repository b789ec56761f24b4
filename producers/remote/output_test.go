//go:build linux

package remote

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/outputtest"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// Output through a worker: every byte the command wrote reaches the owner node
// once and in order (a sha256 of what `seq` writes, computed here, against what
// the owner holds or read), in the default mode, in block mode read slowly,
// across lost frames and a cut; a worker's output in flight stays within its
// budget; a blocked task still ends at a kill or a disposal within the grace.

// blockLines is how many lines the block-mode flood through a worker writes:
// `seq -w 1 4000000` is 30.5 MiB, a few seconds under -race on two loaded cores;
// `make stress` runs it with 23301689 lines, 200 MiB.
var blockLines = flag.Int("block-lines", 4_000_000, "lines of `seq -w` the block-mode flood through a worker writes (23301689: 200 MiB)")

// held is the sha256 and size of every byte the owner node holds of id's output
// (observer reads by offset: the spill file keeps them), and whether any was
// missed.
func held(t *testing.T, rt *actors.Runtime, id messages.TaskID) (sum [32]byte, size, missed int64) {
	t.Helper()
	h := sha256.New()
	for off := int64(0); ; {
		pk, err := rt.Tasks().Peek(context.Background(), id, "", off, 1<<20)
		require.NoError(t, err)
		missed += pk.Missed
		h.Write(pk.Data)
		size += int64(len(pk.Data))
		if pk.Next >= pk.Written && len(pk.Data) == 0 {
			break
		}
		off = pk.Next
	}
	copy(sum[:], h.Sum(nil))
	return sum, size, missed
}

// readAll reads id to its end as a slow owner does: only once the task says its
// output is full (or it settled). It returns the digest and size of everything
// read, how many times the task was seen full, and the last snapshot.
func readAll(t *testing.T, rt *actors.Runtime, id messages.TaskID) (sum [32]byte, size int64, fulls int, last messages.Snapshot) {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	for {
		s, err := rt.Tasks().Wait(ctx, id, "", settleLimit)
		require.NoError(t, err)
		require.True(t, s.OutputFull || s.Status.Terminal(), "a wait on a task in block mode returned neither full nor settled: %+v", s)
		if s.OutputFull {
			fulls++
		}
		for {
			r, err := rt.Tasks().Read(ctx, id, "")
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

// floodLease is the lease of the nodes in the flood tests. Their subject is the
// output; a flood under -race on one loaded CPU can keep a node from renewing a
// testLease within half of it (1 s), which fences the node, as it should. So they
// take a lease that such a machine does not lapse.
const floodLease = 10 * time.Second

// bigReads makes a block-mode buffer hold 256 KiB unread (a read's worth) instead
// of 32 KiB, so that a long flood takes fewer reads.
var bigReads = []output.Option{output.WithMaxRead(256 << 10), output.WithMemory(32<<10, 256<<10)}

func TestBlockModeThroughAWorkerDeliversEveryByteInOrder(t *testing.T) {
	n := *blockLines
	want, wantSize := outputtest.SeqDigest(n, true)
	c := newCluster(t)
	c.worker("w1", WithLease(floodLease), WithBashOptions(bash.WithOutput(bigReads...)))
	o := c.owner(WithLease(floodLease), WithOutput(bigReads...))
	id := o.start(t, "", bash.Command{Command: fmt.Sprintf("seq -w 1 %d", n), BlockOutput: true})

	start := time.Now()
	got, size, fulls, last := readAll(t, o.rt, id)
	t.Logf("%d bytes in %s, full %d times", size, time.Since(start).Round(time.Millisecond), fulls)
	assert.Equal(t, messages.Completed, last.Status, last.Detail)
	assert.Equal(t, wantSize, size, "bytes read")
	assert.Equal(t, want, got, "sha256 of what the command wrote against what the reads returned")
	assert.Positive(t, fulls, "the command outran the reader, so it waited for reads")
	assert.False(t, last.OutputFull, "a settled task is not full")
}

// A flood in the default mode, read to its end: the owner node holds every byte
// once, in order, with no marker of anything dropped.
func TestFloodThroughAWorkerArrivesWhole(t *testing.T) {
	const n = 3_000_000 // `seq 1 n`: 20.9 MB
	want, wantSize := outputtest.SeqDigest(n, false)
	c := newCluster(t)
	c.worker("w1", WithLease(floodLease))
	o := c.owner(WithLease(floodLease))
	id := o.start(t, "", bash.Command{Command: fmt.Sprintf("seq 1 %d", n)})
	s := o.settled(t, id, "")
	require.Equal(t, "exit code: 0", s.Detail)
	got, size, missed := held(t, o.rt, id)
	assert.Zero(t, missed)
	assert.Equal(t, wantSize, size)
	assert.Equal(t, want, got, "sha256 of what the command wrote against what the owner node holds")
}

// Frames and grants lost on the way (as on a reconnect, or dropped by a slow
// consumer) are sent again; bytes that arrive twice are taken once.
func TestLostFramesAndGrantsAreSentAgain(t *testing.T) {
	const n = 1_500_000 // 10.9 MB
	want, wantSize := outputtest.SeqDigest(n, false)
	c := newCluster(t)
	w, _ := c.worker("w1", WithLease(floodLease))
	o := c.owner(WithLease(floodLease), WithOutputWindow(256<<10))
	var mu sync.Mutex
	var frames, grants, lostFrames, lostGrants int
	loseFrame := func(f frame) bool {
		mu.Lock()
		defer mu.Unlock()
		if len(f.data) == 0 {
			return false
		}
		frames++
		if frames%7 == 3 && lostFrames < 3 {
			lostFrames++
			return true
		}
		return false
	}
	loseGrant := func(grant) bool {
		mu.Lock()
		defer mu.Unlock()
		grants++
		if grants%5 == 2 && lostGrants < 3 {
			lostGrants++
			return true
		}
		return false
	}
	o.p.lose.Store(&loseFrame)
	w.loseGrant.Store(&loseGrant)
	id := o.start(t, "", bash.Command{Command: fmt.Sprintf("seq 1 %d", n)})
	s := o.settled(t, id, "")
	require.Equal(t, "exit code: 0", s.Detail)
	got, size, missed := held(t, o.rt, id)
	assert.Zero(t, missed)
	assert.Equal(t, wantSize, size)
	assert.Equal(t, want, got, "sha256 of what the command wrote against what the owner node holds")
	mu.Lock()
	defer mu.Unlock()
	assert.Positive(t, lostFrames, "frames lost")
	assert.Positive(t, lostGrants, "grants lost")
	assert.Positive(t, w.goBacks.Load(), "the worker sent again from what its owner held")
	t.Logf("%d frames (%d lost), %d grants (%d lost), %d go-backs, %d bytes arrived twice", frames, lostFrames, grants, lostGrants, w.goBacks.Load(), o.p.dups.Load())
}

// A worker cut off from NATS in the middle of a flood (silently: a blackhole
// proxy) sends again what its owner did not acknowledge; after the heal the owner
// holds every byte once: nothing acknowledged is lost, nothing is taken twice.
func TestWorkerCutOffMidFloodLosesNothingAndDuplicatesNothing(t *testing.T) {
	const half = 1_000_000
	want, wantSize := outputtest.SeqDigest(2*half, false)
	p := newPartitioned(t)
	// A lease long enough that the cut fences nobody; a window small enough that
	// what the worker sends into the cut socket fits in the kernel's buffers.
	const lease = 8 * time.Second
	w := workerOn(t, p.behind(), "w1", WithLease(lease))
	o := ownerOn(t, p.conn(), WithLease(lease), WithOutputWindow(256<<10))
	goOn := filepath.Join(t.TempDir(), "go-on")
	id := o.start(t, "", bash.Command{Command: fmt.Sprintf(`seq 1 %d; while [ ! -e %s ]; do sleep 0.01; done; seq %d %d`, half, goOn, half+1, 2*half)})
	_, firstSize := outputtest.SeqDigest(half, false)
	require.Eventually(t, func() bool {
		pk, err := o.rt.Tasks().Peek(context.Background(), id, "", 0, 1)
		return err == nil && pk.Written == firstSize
	}, settleLimit, time.Millisecond, "the first half reached the owner node")

	p.proxy.Cut()
	require.NoError(t, os.WriteFile(goOn, nil, 0o600)) // the second half goes into the cut
	require.Eventually(t, func() bool { return w.goBacks.Load() > 0 }, settleLimit, time.Millisecond,
		"the worker sends again what was not acknowledged")
	p.proxy.Heal()

	s := o.settled(t, id, "")
	require.Equal(t, "exit code: 0", s.Detail)
	got, size, missed := held(t, o.rt, id)
	assert.Zero(t, missed)
	assert.Equal(t, wantSize, size)
	assert.Equal(t, want, got, "sha256 of what the command wrote against what the owner node holds")
	assert.Positive(t, o.p.dups.Load(), "what arrived twice was taken once")
	t.Logf("%d go-backs, %d bytes arrived twice", w.goBacks.Load(), o.p.dups.Load())
}

// Many tasks flooding at once share the worker's output budget: its output in
// flight (sent and not acknowledged, over every task) never exceeds it, and every
// flood arrives whole.
func TestWorkerOutputBudgetBoundsManyFloods(t *testing.T) {
	const tasks, size, budget = 20, 4_000_000, 2 << 20
	c := newCluster(t)
	w, _ := c.worker("w1", WithLease(floodLease), WithMaxTasks(tasks), WithOutputBudget(budget))
	o := c.owner(WithLease(floodLease))
	var hooks []messages.Hooks
	for range tasks {
		h, err := o.p.Start(bash.Command{Command: fmt.Sprintf("head -c %d /dev/zero", size)})
		require.NoError(t, err)
		hooks = append(hooks, h)
	}
	for i, h := range hooks {
		assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}, <-h.Done)
		assert.Equal(t, int64(size), h.Output.Written(), "task %d", i)
		h.Release()
	}
	<-w.Drained()
	used, peak := w.out.inUse()
	assert.Zero(t, used, "nothing in flight once every task is gone")
	assert.LessOrEqual(t, peak, int64(budget), "output in flight stays within the budget")
	assert.Positive(t, peak)
	t.Logf("peak in flight %d of a budget of %d, %d tasks", peak, budget, tasks)
}

// A kill ends a command that waits for its owner to read — even one that
// ignores SIGTERM, within the worker's grace — and so does its owner's
// disposal; no process stays on the worker.
func TestBlockModeKillAndDisposeEndABlockedRemoteTask(t *testing.T) {
	ctx := context.Background()
	const grace = 500 * time.Millisecond
	const margin = 5 * time.Second // what a loaded machine may add: a failure bound, not a figure
	cmd := bash.Command{Command: "trap '' TERM; seq 1 100000000", BlockOutput: true}
	c := newCluster(t)
	w, _ := c.worker("w1", WithGrace(grace))
	o := c.owner()
	full := func(t *testing.T, id messages.TaskID, caller messages.AgentID) {
		t.Helper()
		s, err := o.rt.Tasks().Wait(ctx, id, caller, settleLimit)
		require.NoError(t, err)
		require.True(t, s.OutputFull, "the command filled its output: %+v", s)
	}

	t.Run("kill", func(t *testing.T) {
		id := o.start(t, "", cmd)
		full(t, id, "")
		start := time.Now()
		res, _, err := o.rt.Tasks().Kill(ctx, id, "", "blocked")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, res)
		s := o.settled(t, id, "")
		assert.Equal(t, messages.Killed, s.Status)
		assert.Less(t, time.Since(start), grace+margin, "a blocked task ends within the grace")
		<-w.Drained()
		assert.Zero(t, w.Processes(), "no process of the task is left")
	})
	t.Run("dispose", func(t *testing.T) {
		require.NoError(t, o.rt.Agents().Register(ctx, "a1"))
		id := o.start(t, "a1", cmd)
		full(t, id, "a1")
		start := time.Now()
		require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
		assert.Less(t, time.Since(start), grace+margin, "disposal ends a blocked task within the grace")
		<-w.Drained()
		assert.Zero(t, w.Processes(), "no process of the task is left")
	})
}

// A foreground command cannot wait for a reader: nobody reads before it ends.
func TestRunRefusesBlockOutput(t *testing.T) {
	c := newCluster(t)
	o := c.owner()
	_, err := o.p.Run(context.Background(), bash.Command{Command: "echo x", BlockOutput: true}, time.Second)
	require.ErrorIs(t, err, bash.ErrInvalidCommand)
	assert.Zero(t, o.p.Live(), "nothing was started")
}

// A worker that shuts down does not wait for its owners to read what its
// blocked commands wrote: it kills them, sends the rest past the grant, and the
// owner node takes it (leaving block mode, as a kill does) and settles the task
// with the kill's outcome.
func TestWorkerShutdownEndsABlockedRemoteTask(t *testing.T) {
	ctx := context.Background()
	const grace = 500 * time.Millisecond
	const margin = 5 * time.Second // what a loaded machine may add: a failure bound, not a figure
	c := newCluster(t)
	w, _ := c.worker("w1", WithGrace(grace))
	o := c.owner()
	id := o.start(t, "", bash.Command{Command: "trap '' TERM; seq 1 100000000", BlockOutput: true})
	s, err := o.rt.Tasks().Wait(ctx, id, "", settleLimit)
	require.NoError(t, err)
	require.True(t, s.OutputFull, "the command filled its output: %+v", s)

	start := time.Now()
	require.NoError(t, w.Close(ctx))
	assert.Less(t, time.Since(start), grace+margin, "the worker's Close did not wait for a read")
	s = o.settled(t, id, "")
	assert.Equal(t, messages.Killed, s.Status, s.Detail)
	assert.Zero(t, w.Processes())
}
