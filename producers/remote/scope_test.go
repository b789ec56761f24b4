//go:build linux

package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// scopeAgent is the owner agent that the tests' scope mapping makes a scope: its
// commands belong to testScope under the epoch given.
const (
	scopeAgent = messages.AgentID("scope-agent")
	testScope  = "K3JQ9X2A"
)

// scoped maps scopeAgent to testScope under epoch; every other owner is no scope.
func scoped(epoch uint64) Option {
	return WithScopes(func(owner messages.AgentID) (string, uint64, bool) {
		return testScope, epoch, owner == scopeAgent
	})
}

// soleKey is the key of the one command w holds. It is read from the worker, not
// the owner: the owner forgets a command once it settles, which a short one may
// do before the test looks, while the worker keeps it until the owner releases it.
func (w *Worker) soleKey(t *testing.T) string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.tasks, 1)
	for k := range w.tasks {
		return k
	}
	return ""
}

// wtaskOf is the worker's task key, or nil.
func (w *Worker) wtaskOf(key string) *wtask {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tasks[key]
}

// cursorOf is the read cursor the worker holds for key (-1: no such task).
func (w *Worker) cursorOf(key string) int64 {
	t := w.wtaskOf(key)
	if t == nil {
		return -1
	}
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	return t.flow.cursor
}

// ownerEnded returns a channel that receives the epoch of each ended lease of
// node, as o's watch sees it (OnOwnerEnded).
func (o *owner) ownerEnded(node string) <-chan uint64 {
	ch := make(chan uint64, 4)
	o.p.OnOwnerEnded(func(n string, epoch uint64) {
		if n == node {
			ch <- epoch
		}
	})
	return ch
}

// recv waits for a value on ch within settleLimit.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	select {
	case v := <-ch:
		return v
	case <-limit.C:
		t.Fatalf("%s: not within %s", what, settleLimit)
		panic("unreachable")
	}
}

// reader reads an adopted task's output as it grows, without a runtime.
type reader struct {
	out  messages.Output
	grew chan struct{}
	got  strings.Builder
}

func newReader(out messages.Output) *reader {
	r := &reader{out: out, grew: make(chan struct{}, 1)}
	out.OnGrow(func() {
		select {
		case r.grew <- struct{}{}:
		default:
		}
	})
	return r
}

// until reads until what was read since the last call contains s, and returns it.
func (r *reader) until(t *testing.T, s string) string {
	t.Helper()
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	for {
		r.got.WriteString(r.out.Read())
		if strings.Contains(r.got.String(), s) {
			got := r.got.String()
			r.got.Reset()
			return got
		}
		select {
		case <-r.grew:
		case <-limit.C:
			t.Fatalf("output %q: no %q within %s", r.got.String(), s, settleLimit)
		}
	}
}

// bounded is a context that ends at settleLimit (an Adopt never waits longer in the tests).
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
	t.Cleanup(cancel)
	return ctx
}

// ask sends a request of a stale home (or anyone) straight to a worker subject.
func ask[T any](t *testing.T, nc *nats.Conn, subj string, req any) T {
	t.Helper()
	msg, err := nc.Request(subj, encode(req), settleLimit)
	require.NoError(t, err)
	var rep T
	require.NoError(t, json.Unmarshal(msg.Data, &rep))
	return rep
}

// adoption is the cluster of the adoption tests: one worker keeping orphans
// long enough, owner A (scope epoch 1) with the scope's agent registered, owner B
// (epoch 2), and what B sees of A's lease ending.
func adoption(t *testing.T) (c *cluster, w *Worker, a, b *owner, aEnded <-chan uint64) {
	t.Helper()
	c = newCluster(t)
	w, _ = c.worker("w1", WithOrphanGrace(settleLimit))
	a = c.owner(scoped(1))
	b = c.owner(scoped(2))
	require.NoError(t, a.rt.Agents().Register(context.Background(), scopeAgent))
	return c, w, a, b, b.ownerEnded(a.p.Node())
}

// killAdopted kills an adopted command, releases it and waits until the worker
// holds nothing and runs no process.
func killAdopted(t *testing.T, w *Worker, a Adopted) {
	t.Helper()
	require.NoError(t, a.Hooks.Cancel("done"))
	assert.Equal(t, messages.Killed, recv(t, a.Hooks.Done, "the adopter's outcome").Status)
	a.Hooks.Release()
	<-w.Drained()
	assert.Zero(t, w.Processes())
}

func TestScopeOwnedCommandIsAdoptedByAnotherNode(t *testing.T) {
	ctx := context.Background()
	c, w, a, b, aEnded := adoption(t)
	fenced := make(chan uint64, 1)
	a.p.OnFence(func(epoch uint64) { fenced <- epoch })

	// The scope's command, and one of another agent of the same node: the node's.
	id := a.start(t, scopeAgent, bash.Command{Command: `echo one; echo two; read x; echo "three $x"; exec sleep 60`, Stdin: bash.StdinPipe})
	key := w.soleKey(t)
	s, err := a.rt.Tasks().Get(ctx, id, scopeAgent)
	require.NoError(t, err)
	assert.Equal(t, key, s.Ref, "Snapshot.Ref is the command's key")
	wt := w.wtaskOf(key)
	require.NotNil(t, wt)
	assert.Equal(t, testScope, wt.scope, "the start carried the scope")
	assert.Equal(t, uint64(1), wt.scopeEpoch)
	nodeTask := a.start(t, "", bash.Command{Command: `echo node; exec sleep 60`})
	a.until(t, nodeTask, "", "node")

	assert.Equal(t, "one\n", a.until(t, id, scopeAgent, "one").Output, "a consuming read on A")
	require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len("one\n")) }, settleLimit, time.Millisecond,
		"the read cursor reached the worker")
	aEpoch, err := a.p.Epoch()
	require.NoError(t, err)
	require.True(t, a.p.Valid())

	// A dies (its connection closed: it can neither renew nor be heard).
	a.nc.Close()
	require.Equal(t, aEpoch, recv(t, fenced, "A's fence"))
	assert.False(t, a.p.Valid(), "a fenced node's lease is not valid")
	ns := a.settled(t, nodeTask, "")
	assert.True(t, strings.HasPrefix(ns.Detail, "owner lease lost: "), "the node's own command failed as before: %s", ns.Detail)
	s, err = a.rt.Tasks().Get(ctx, id, scopeAgent)
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status, "the scope's command is detached, not failed")
	require.Equal(t, aEpoch, recv(t, aEnded, "A's lease ending, as B sees it"))
	assert.True(t, b.p.OwnerEnded(a.p.Node(), aEpoch))
	ep, live, known := b.p.OwnerKnown(a.p.Node())
	assert.Equal(t, []any{aEpoch, false, true}, []any{ep, live, known})

	adopted, err := b.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	ad := adopted[0]
	assert.Equal(t, key, ad.Key)
	assert.Equal(t, "w1", ad.Worker)
	assert.Equal(t, `echo one; echo two; read x; echo "three $x"; exec sleep 60`, ad.Label)
	assert.False(t, ad.Exited)
	assert.Equal(t, key, ad.Hooks.Ref)
	require.NotNil(t, ad.Hooks.Input)

	t.Run("the stale home is refused: kill, input, release", func(t *testing.T) {
		nc := c.conn()
		sj := subjects{defaultPrefix}
		assert.True(t, ask[reply](t, nc, sj.kill("w1"), killReq{Task: key, Owner: a.p.Node(), Epoch: aEpoch, Reason: "stale"}).Unknown)
		assert.True(t, ask[reply](t, nc, sj.input("w1"), inputReq{Task: key, Owner: a.p.Node(), Epoch: aEpoch, Data: []byte("stale\n")}).Unknown)
		assert.True(t, ask[reply](t, nc, sj.release("w1"), releaseReq{Task: key, Owner: a.p.Node(), Epoch: aEpoch}).Unknown)
		_, _, err := a.rt.Tasks().Kill(ctx, id, scopeAgent, "from the stale home")
		require.NoError(t, err)
		s := a.settled(t, id, scopeAgent)
		assert.Equal(t, messages.Failed, s.Status)
		assert.Equal(t, detachedOutcome.Detail, s.Detail, "a detached command settles at once on its stale home")
		// The node's own command may still be dying on the worker (its owner's lease
		// ended), so the scope's command is looked at itself, not counted.
		select {
		case <-wt.exited:
			t.Error("the command ended on the worker; it should keep running there")
		default:
		}
	})

	t.Run("the adopter reads the rest from the cursor, writes, kills and waits", func(t *testing.T) {
		r := newReader(ad.Hooks.Output)
		assert.Equal(t, "two\n", r.until(t, "two\n"), "what A had read is not returned again")
		require.NoError(t, ad.Hooks.Input([]byte("from B\n"), false))
		assert.Equal(t, "three from B\n", r.until(t, "three"))
		require.NoError(t, ad.Hooks.Cancel("done with it"))
		o := recv(t, ad.Hooks.Done, "the adopted command's outcome")
		assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}, o)
		ad.Hooks.Release()
		<-w.Drained()
		assert.Zero(t, w.Processes())
	})
}

func TestACommandThatEndedBeforeTheAdoptionIsAdoptedWithItsOutcome(t *testing.T) {
	_, w, a, b, aEnded := adoption(t)

	id := a.start(t, scopeAgent, bash.Command{Command: `echo one; echo two; exit 3`})
	key := w.soleKey(t)
	s := a.settled(t, id, scopeAgent)
	assert.Equal(t, "exit code: 3", s.Detail)
	assert.Equal(t, "one\n", a.until(t, id, scopeAgent, "one").Output)
	require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len("one\n")) }, settleLimit, time.Millisecond,
		"a read after the settlement moved the cursor too")
	assert.Equal(t, 1, w.Live(), "the worker keeps the ended command until its owner releases it")
	assert.Zero(t, w.Processes())

	a.nc.Close()
	recv(t, aEnded, "A's lease ending")
	adopted, err := b.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	ad := adopted[0]
	assert.True(t, ad.Exited)
	o := recv(t, ad.Hooks.Done, "the outcome")
	assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 3"}, o)
	assert.Equal(t, "two\n", ad.Hooks.Output.Read(), "the unread output, and only it")
	ad.Hooks.Release()
	<-w.Drained()
}

func TestAnOrphanNobodyAdoptsIsKilledAndDropped(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	const grace = 3 * time.Second
	w, _ := c.worker("w1", WithOrphanGrace(grace))
	a := c.owner(scoped(1))
	require.NoError(t, a.rt.Agents().Register(ctx, scopeAgent))
	scopeTask := a.start(t, scopeAgent, bash.Command{Command: `echo up; exec sleep 60`})
	a.until(t, scopeTask, scopeAgent, "up")
	scopeKey := w.soleKey(t)
	nodeTask := a.start(t, "", bash.Command{Command: `echo up; exec sleep 60`})
	a.until(t, nodeTask, "", "up")
	var nodeKey string
	a.p.mu.Lock()
	for k := range a.p.tasks {
		if k != scopeKey {
			nodeKey = k
		}
	}
	a.p.mu.Unlock()
	scopeExited, nodeExited := w.wtaskOf(scopeKey).exited, w.wtaskOf(nodeKey).exited

	a.nc.Close()
	recv[struct{}](t, nodeExited, "the node's command killed")
	ended := time.Now()
	assert.False(t, isClosed(scopeExited), "the scope's command outlives its node's lease")
	assert.Equal(t, 1, w.Processes())
	recv[struct{}](t, scopeExited, "the orphan killed")
	assert.GreaterOrEqual(t, time.Since(ended), grace-grace/4, "killed at the orphan grace, not before")
	<-w.Drained()
	assert.Zero(t, w.Processes(), "no process survives")
}

func TestAdoptionFencing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	w, _ := c.worker("w1", WithOrphanGrace(settleLimit))
	a := c.owner(scoped(5))
	b := c.owner(scoped(0))
	require.NoError(t, a.rt.Agents().Register(ctx, scopeAgent))
	id := a.start(t, scopeAgent, bash.Command{Command: `echo up; exec sleep 60`})
	a.until(t, id, scopeAgent, "up")

	for _, epoch := range []uint64{4, 5} {
		got, err := b.p.Adopt(bounded(t), testScope, epoch)
		require.NoError(t, err)
		assert.Empty(t, got, "an adoption under scope epoch %d (the command's is 5) is refused", epoch)
	}
	got, err := b.p.Adopt(bounded(t), "another-scope", 9)
	require.NoError(t, err)
	assert.Empty(t, got, "another scope's adoption moves nothing")

	t.Run("a worker that does not answer is named", func(t *testing.T) {
		js, err := testJetStream(c.conn())
		require.NoError(t, err)
		kv, err := js.KeyValue(ctx, subjects{defaultPrefix}.bucket())
		require.NoError(t, err)
		rev, err := kv.Create(ctx, workerKey("ghost"), encode(leaseValue{Kind: "worker", Name: "ghost", DurationMS: testLease.Milliseconds()}))
		require.NoError(t, err)
		ghost := func(live bool) func() bool {
			return func() bool { _, gone, known := b.p.watch.state(workerKey("ghost")); return known && gone != live }
		}
		defer func() {
			require.NoError(t, kv.Delete(ctx, workerKey("ghost"), jetstream.LastRevision(rev)))
			require.Eventually(t, ghost(false), settleLimit, time.Millisecond, "the adopter saw the ghost go")
		}()
		require.Eventually(t, ghost(true), settleLimit, time.Millisecond, "the adopter sees the ghost")
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		got, err := b.p.Adopt(actx, testScope, 4)
		assert.Empty(t, got)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "workers ghost did not answer")
	})

	// A newer epoch moves it, though A lives: A is a stale home from then on.
	got, err = b.p.Adopt(bounded(t), testScope, 6)
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, _, err = a.rt.Tasks().Kill(ctx, id, scopeAgent, "from the stale home")
	require.NoError(t, err)
	s := a.settled(t, id, scopeAgent)
	assert.Equal(t, movedOutcome.Detail, s.Detail, "the stale home's kill was refused: it settles its record")
	assert.Equal(t, 1, w.Processes(), "A's kill did not reach the command")
	killAdopted(t, w, got[0])
}

func TestAFencedNodeDetachesItsScopeAndAdoptsItAgain(t *testing.T) {
	ctx := context.Background()
	p := newPartitioned(t)
	w := workerOn(t, p.conn(), "w1", WithOrphanGrace(settleLimit))
	a := ownerOn(t, p.behind(), scoped(1))
	require.NoError(t, a.rt.Agents().Register(ctx, scopeAgent))
	fenced := make(chan uint64, 1)
	a.p.OnFence(func(epoch uint64) { fenced <- epoch })
	id := a.start(t, scopeAgent, bash.Command{Command: `echo one; echo two; read x; echo "three $x"; exec sleep 60`, Stdin: bash.StdinPipe})
	key := w.soleKey(t)
	nodeTask := a.start(t, "", bash.Command{Command: `echo node; exec sleep 60`})
	a.until(t, nodeTask, "", "node")
	assert.Equal(t, "one\n", a.until(t, id, scopeAgent, "one").Output)
	require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len("one\n")) }, settleLimit, time.Millisecond)
	oldEpoch, err := a.p.Epoch()
	require.NoError(t, err)
	lw := watchLeases(t, p.conn(), defaultPrefix)

	p.proxy.Cut()
	require.Equal(t, oldEpoch, recv(t, fenced, "the fence"))
	assert.False(t, a.p.Valid())
	ns := a.settled(t, nodeTask, "")
	assert.True(t, strings.HasPrefix(ns.Detail, "owner lease lost: "), ns.Detail)
	s, err := a.rt.Tasks().Get(ctx, id, scopeAgent)
	require.NoError(t, err)
	assert.Equal(t, messages.Running, s.Status, "detached: neither failed nor killed")
	assert.Error(t, a.rt.Tasks().Input(ctx, id, scopeAgent, []byte("lost\n"), false), "a detached command takes no input")
	require.NotNil(t, w.wtaskOf(key), "the worker keeps the scope's command")

	p.proxy.Heal()
	lw.until(t, ownerKey(a.p.Node()), func() bool { e, err := a.p.Epoch(); return err == nil && e > oldEpoch })
	require.True(t, a.p.Valid())
	adopted, err := a.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1, "the node adopts its own scope again under a new epoch")
	s = a.settled(t, id, scopeAgent)
	assert.Equal(t, detachedOutcome.Detail, s.Detail, "the detached record settles")
	ad := adopted[0]
	r := newReader(ad.Hooks.Output)
	assert.Equal(t, "two\n", r.until(t, "two\n"))
	require.NoError(t, ad.Hooks.Input([]byte("again\n"), false))
	assert.Equal(t, "three again\n", r.until(t, "three"))
	require.NoError(t, ad.Hooks.Cancel("done"))
	assert.Equal(t, messages.Killed, recv(t, ad.Hooks.Done, "the outcome").Status)
	ad.Hooks.Release()
	<-w.Drained()
	assert.Zero(t, w.Processes())
}

func TestACommandThatEndsWhileOrphanedIsAdoptedWithItsOutput(t *testing.T) {
	_, w, a, b, aEnded := adoption(t)
	fifo := filepath.Join(t.TempDir(), "go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	id := a.start(t, scopeAgent, bash.Command{Command: fmt.Sprintf(`echo one; cat %s; echo end; exit 7`, fifo)})
	key := w.soleKey(t)
	a.until(t, id, scopeAgent, "one")
	require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len("one\n")) }, settleLimit, time.Millisecond)

	a.nc.Close()
	recv(t, aEnded, "A's lease ending")
	exited := w.wtaskOf(key).exited
	require.NoError(t, os.WriteFile(fifo, []byte("two\n"), 0o600)) // the command goes on and ends, orphaned
	recv[struct{}](t, exited, "the orphan's exit")
	assert.Equal(t, 1, w.Live(), "kept, with its outcome and output")

	adopted, err := b.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	ad := adopted[0]
	assert.True(t, ad.Exited)
	assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 7"}, recv(t, ad.Hooks.Done, "the outcome"))
	assert.Equal(t, "two\nend\n", ad.Hooks.Output.Read())
	ad.Hooks.Release()
	<-w.Drained()
}

func TestABlockModeCommandIsAdoptedWithoutLosingOrRepeatingOutput(t *testing.T) {
	ctx := context.Background()
	_, w, a, b, aEnded := adoption(t)
	const lines = 100_000 // 588,895 bytes: many reads' worth, so the command waits for them
	id := a.start(t, scopeAgent, bash.Command{Command: fmt.Sprintf(`seq 1 %d`, lines), BlockOutput: true})
	key := w.soleKey(t)
	// Up to the first line (or none, when the output filled A's buffer first: then
	// the wait returns at once), then a whole read's worth.
	u, err := a.rt.Tasks().ReadUntil(ctx, id, scopeAgent, `^1$`, settleLimit)
	require.NoError(t, err)
	require.Contains(t, []messages.UntilReason{messages.UntilMatched, messages.UntilFull}, u.Reason)
	rr, err := a.rt.Tasks().Read(ctx, id, scopeAgent)
	require.NoError(t, err)
	first := u.Output + rr.Output
	require.NotEmpty(t, first)
	require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len(first)) }, settleLimit, time.Millisecond)

	a.nc.Close()
	recv(t, aEnded, "A's lease ending")
	adopted, err := b.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	ad := adopted[0]
	r := newReader(ad.Hooks.Output)
	rest := r.until(t, fmt.Sprintf("\n%d\n", lines))
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	assert.Equal(t, want.String(), first+rest, "A's reads and B's are the output, whole, each byte once")
	assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}, recv(t, ad.Hooks.Done, "the outcome"))
	ad.Hooks.Release()
	<-w.Drained()
}

func TestAWorkerClosesPromptlyWithKeptCommands(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	nc := c.conn()
	w, err := NewWorker(nc, WithName("w1"), WithLease(testLease), WithDir(t.TempDir()))
	require.NoError(t, err)
	a := c.owner(scoped(1))
	require.NoError(t, a.rt.Agents().Register(ctx, scopeAgent))
	id := a.start(t, scopeAgent, bash.Command{Command: `echo kept`})
	a.settled(t, id, scopeAgent)
	require.Equal(t, 1, w.Live(), "kept after its outcome was taken")
	start := time.Now()
	require.NoError(t, w.Close(ctx))
	assert.Less(t, time.Since(start), testLease/2, "a kept command does not hold up Close")
	assert.Zero(t, w.Live())
}

func TestTheReadCursorMapsPastMarkers(t *testing.T) {
	p := &Producer{cfg: defaultConfig()}
	rt := p.newTask("k", 1, bash.StdinNone, false, testScope, 1, 100)
	rt.wmu.Lock()
	defer rt.wmu.Unlock()
	rt.next = 100
	_, _ = rt.out.WriteString("abcd") // worker [100, 104)
	rt.next = 104
	_, _ = rt.out.WriteString("[marker]") // the worker's buffer dropped [104, 200)
	rt.markLocked(200)
	_, _ = rt.out.WriteString("xyz") // worker [200, 203)
	rt.next = 203
	for local, want := range map[int64]int64{0: 100, 2: 102, 4: 104, 12: 200, 14: 202, 15: 203} {
		assert.Equal(t, want, rt.workerOffLocked(local), "local offset %d", local)
	}
	rt.rc = 14
	assert.Equal(t, int64(202), rt.cursorLocked())
}

func TestReleaseAndCloseOfTheOwnerNode(t *testing.T) {
	ctx := context.Background()
	_, w, a, b, aEnded := adoption(t)

	t.Run("the runtime dropping an ended command's record releases it on the worker", func(t *testing.T) {
		id := a.start(t, scopeAgent, bash.Command{Command: `echo done`})
		a.settled(t, id, scopeAgent)
		require.Equal(t, 1, w.Live(), "kept until released")
		require.NoError(t, a.rt.Agents().Dispose(ctx, scopeAgent))
		<-w.Drained()
		require.NoError(t, a.rt.Agents().Register(ctx, scopeAgent))
	})

	t.Run("a node that closes leaves its scope's commands for adoption", func(t *testing.T) {
		id := a.start(t, scopeAgent, bash.Command{Command: `echo one; echo two; exec sleep 60`})
		assert.Equal(t, "one\n", a.until(t, id, scopeAgent, "one").Output)
		key := w.soleKey(t)
		require.Eventually(t, func() bool { return w.cursorOf(key) == int64(len("one\n")) }, settleLimit, time.Millisecond)
		require.NoError(t, a.p.Close(ctx))
		s := a.settled(t, id, scopeAgent)
		assert.Equal(t, "remote producer closed", s.Detail)
		recv(t, aEnded, "A's lease released")
		adopted, err := b.p.Adopt(bounded(t), testScope, 2)
		require.NoError(t, err)
		require.Len(t, adopted, 1)
		assert.Equal(t, "two\n", newReader(adopted[0].Hooks.Output).until(t, "two\n"))
		killAdopted(t, w, adopted[0])
	})
}

func TestValidIsCheckedWhenAsked(t *testing.T) {
	c := newCluster(t)
	o := c.owner()
	require.True(t, o.p.Valid())
	assert.Equal(t, testLease, o.p.Lease())
	// As for a process resumed after a pause past half its lease, before the lease's
	// goroutine has run: the last renewal is too old, and Valid says so at once.
	o.p.lease.mu.Lock()
	o.p.lease.validTo = time.Now().Add(-time.Nanosecond)
	o.p.lease.mu.Unlock()
	assert.False(t, o.p.Valid())
}

// TestHandoffLeavesScopeCommandsForAdoption: a node that detaches a scope's
// commands (all of them with Handoff, at a frontend's graceful shutdown; one
// scope's with DetachScope) before its runtime disposes the scope's owner and it
// closes kills none of them; another node adopts them. OwnerLive follows both
// nodes' leases throughout.
func TestHandoffLeavesScopeCommandsForAdoption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		detach func(*Producer)
	}{
		{"Handoff detaches every scope's commands", (*Producer).Handoff},
		{"DetachScope detaches one scope's commands", func(p *Producer) { p.DetachScope(testScope) }},
	} {
		t.Run(tc.name, func(t *testing.T) { handoffThenAdopt(t, tc.detach) })
	}
}

func handoffThenAdopt(t *testing.T, detach func(*Producer)) {
	ctx := context.Background()
	_, w, a, b, aEnded := adoption(t)
	aEpoch, err := a.p.Epoch()
	require.NoError(t, err)
	bEpoch, err := b.p.Epoch()
	require.NoError(t, err)
	for _, tc := range []struct {
		p     *Producer
		node  string
		epoch uint64
		want  bool
	}{
		{b.p, a.p.Node(), aEpoch, true},
		{b.p, a.p.Node(), aEpoch + 1000, false},
		{b.p, "no-such-node", 1, false},
		{b.p, b.p.Node(), bEpoch, true},
		{a.p, b.p.Node(), bEpoch, true},
	} {
		got, err := tc.p.OwnerLive(bounded(t), tc.node, tc.epoch)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "OwnerLive(%s, %d) from %s", tc.node, tc.epoch, tc.p.Node())
	}

	id := a.start(t, scopeAgent, bash.Command{Command: `echo up; exec sleep 60`})
	assert.Equal(t, "up\n", a.until(t, id, scopeAgent, "up").Output)
	detach(a.p)
	require.NoError(t, a.rt.Agents().Dispose(ctx, scopeAgent))
	assert.Equal(t, 1, w.Processes(), "the disposal killed nothing on the worker")
	require.NoError(t, a.p.Close(ctx))
	recv(t, aEnded, "A's lease released")
	live, err := b.p.OwnerLive(bounded(t), a.p.Node(), aEpoch)
	require.NoError(t, err)
	assert.False(t, live, "A's lease ended")
	adopted, err := b.p.Adopt(bounded(t), testScope, 2)
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	assert.False(t, adopted[0].Exited)
	assert.Equal(t, 1, w.Processes())
	killAdopted(t, w, adopted[0])
}
