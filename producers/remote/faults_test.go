//go:build linux

package remote

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/blackhole"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// partitioned is one NATS server (with a Cluster's short client pings) and a
// blackhole proxy in front of it, for the node that the test cuts off.
type partitioned struct {
	*cluster
	proxy *blackhole.Proxy
}

func newPartitioned(t *testing.T) *partitioned {
	t.Helper()
	cl, err := StartCluster(t.TempDir(), 1)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	u, err := url.Parse(cl.Servers()[0].URL())
	require.NoError(t, err)
	px, err := blackhole.New(u.Host)
	require.NoError(t, err)
	t.Cleanup(px.Close)
	return &partitioned{cluster: &cluster{t: t, srv: cl.Servers()[0]}, proxy: px}
}

// behind is a connection through the proxy (and only through it: no discovered
// servers), closed at the end of the test.
func (p *partitioned) behind() *nats.Conn {
	p.t.Helper()
	nc, err := Connect(p.proxy.URL(), nats.IgnoreDiscoveredServers())
	require.NoError(p.t, err)
	p.t.Cleanup(nc.Close)
	return nc
}

// faultOwner is an owner node whose settlements the test sees as they happen.
type faultOwner struct {
	*owner
	done chan messages.Snapshot // every settlement, from the runtime's OnDone
}

// settledAll takes n settlements and returns them by id, with when the last came.
func (o *faultOwner) settledAll(t *testing.T, n int) (map[messages.TaskID]messages.Snapshot, time.Time) {
	t.Helper()
	got := map[messages.TaskID]messages.Snapshot{}
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	for len(got) < n {
		select {
		case s := <-o.done:
			got[s.ID] = s
		case <-limit.C:
			t.Fatalf("%d of %d tasks settled within %s", len(got), n, settleLimit)
		}
	}
	return got, time.Now()
}

// noticed waits for n notices to agent and checks that each of ids got exactly one.
func noticed(t *testing.T, n *notices, agent messages.AgentID, ids []messages.TaskID) {
	t.Helper()
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	for range ids {
		select {
		case <-n.more:
		case <-limit.C:
			t.Fatalf("notices: want %d, got %q", len(ids), n.of(agent))
		}
	}
	got := n.of(agent)
	require.Len(t, got, len(ids), "notices: %q", got)
	for _, id := range ids {
		c := 0
		for _, g := range got {
			if strings.Contains(g, "task "+string(id)+" ") {
				c++
			}
		}
		assert.Equal(t, 1, c, "notices of %s: %q", id, got)
	}
}

// ownerOn is an owner node (a producer and a runtime) on nc.
func ownerOn(t *testing.T, nc *nats.Conn, opts ...Option) *faultOwner {
	t.Helper()
	// The start timeout also bounds New's creation of the lease bucket, which on
	// a cluster (an R3 stream) takes the longest on a loaded machine.
	p, err := New(nc, append([]Option{WithLease(testLease), WithStartTimeout(settleLimit)}, opts...)...)
	require.NoError(t, err)
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	detach := rt.Tasks().AttachSurface("fault test")
	done := make(chan messages.Snapshot, 1024)
	unsubscribe := rt.Tasks().OnDone(func(s messages.Snapshot) {
		done <- s
		_, _ = rt.Tasks().Notify(context.Background(), s.ID, fmt.Sprintf("background task %s finished [status: %s, %s]", s.ID, s.Status, s.Detail))
	})
	t.Cleanup(func() {
		unsubscribe()
		detach()
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		defer cancel()
		require.NoError(t, rt.Close(ctx))
		require.NoError(t, p.Close(ctx))
		require.Zero(t, p.Live(), "remote tasks left after Close")
	})
	return &faultOwner{owner: &owner{p: p, rt: rt, nc: nc}, done: done}
}

// workerOn is a worker named name on nc.
func workerOn(t *testing.T, nc *nats.Conn, name string, opts ...Option) *Worker {
	t.Helper()
	w, err := NewWorker(nc, append([]Option{WithName(name), WithLease(testLease), WithDir(t.TempDir()), WithStartTimeout(settleLimit)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		defer cancel()
		require.NoError(t, w.Close(ctx))
		require.Zero(t, w.Processes(), "worker %s: processes left after Close", name)
	})
	return w
}

// startOnceTaken starts c as a task of agent once a worker takes it. Right after a
// heal a worker may fence and take a lease once more before it holds one for good
// (its first renewal after the reconnect refused): it answers starts "full" while it
// holds none; and right after a worker joined on another server of a cluster, its
// subscription may not have reached the owner's server yet (no event the owner can
// see marks its arrival). Either start fails with ErrNoWorker and leaves no trace.
// So it tries again at each write of a lease seen by lw (nil: none watched) and every
// retryEvery, within settleLimit.
func (o *owner) startOnceTaken(t *testing.T, lw *leaseWatch, agent messages.AgentID, c bash.Command) messages.TaskID {
	t.Helper()
	const retryEvery = 25 * time.Millisecond
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	retry := time.NewTicker(retryEvery)
	defer retry.Stop()
	var puts <-chan leasePut
	if lw != nil {
		puts = lw.puts
	}
	for {
		id, err := o.rt.Tasks().Start(context.Background(), o.p.Spec(agent, c))
		if err == nil {
			return id
		}
		require.ErrorIs(t, err, ErrNoWorker)
		select {
		case <-puts:
		case <-retry.C:
		case <-limit.C:
			t.Fatalf("no worker took the start within %s: %v", settleLimit, err)
		}
	}
}

// runs reads the start records of command i (one pid a line) under dir.
func runs(t *testing.T, dir string, i int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", i)))
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// recorded is a command that records its start in dir/run-i, says up and sleeps.
func recorded(dir string, i int) string {
	return fmt.Sprintf(`echo $$ >> %s/run-%d; echo up; exec sleep 60`, dir, i)
}

func TestWorkerCutOffFromNATS(t *testing.T) {
	ctx := context.Background()
	p := newPartitioned(t)
	w := workerOn(t, p.behind(), "w1")
	o := ownerOn(t, p.conn())
	n := newNotices()
	require.NoError(t, o.rt.Agents().Register(ctx, "a1", n.injector("a1")))
	dir := t.TempDir()
	var ids []messages.TaskID
	for i := range 3 {
		id := o.start(t, "a1", bash.Command{Command: recorded(dir, i)})
		o.until(t, id, "a1", "up")
		ids = append(ids, id)
	}
	oldEpoch, err := w.lease.current()
	require.NoError(t, err)
	lw := watchLeases(t, p.conn(), defaultPrefix)
	exited := w.exitedAll()

	cut := time.Now()
	p.proxy.Cut()
	fenced := make(chan time.Time, 1)
	go func() { <-exited; fenced <- time.Now() }()
	got, lost := o.settledAll(t, len(ids))
	for _, id := range ids {
		assert.Equal(t, messages.Failed, got[id].Status)
		assert.Equal(t, "worker lost: w1", got[id].Detail)
	}
	var killed time.Time
	select {
	case killed = <-fenced:
	default:
		t.Fatalf("the owner declared the worker lost (after %s) while its processes still ran", lost.Sub(cut))
	}
	assert.Zero(t, w.Processes(), "the cut-off worker killed its commands")
	margin := lost.Sub(killed)
	assert.Positive(t, margin, "the worker's processes were gone before the owner acted on the lapse")
	t.Logf("worker cut off → its processes gone (self-fence): %s; → worker lost on the owner: %s; fence margin %s",
		killed.Sub(cut).Round(time.Millisecond), lost.Sub(cut).Round(time.Millisecond), margin.Round(time.Millisecond))

	t.Run("healed, the worker takes a new lease and none of its previous work comes back", func(t *testing.T) {
		p.proxy.Heal()
		lw.until(t, workerKey("w1"), func() bool { e, err := w.lease.current(); return err == nil && e > oldEpoch })
		// The command waits for its input's end, so that the read below finds it
		// running: a read that found it settled would report it (no notice).
		id := o.startOnceTaken(t, lw, "a1", bash.Command{Command: `echo "on=$TASKRT_WORKER"; exec cat >/dev/null`, Stdin: bash.StdinPipe})
		assert.Equal(t, "on=w1\n", o.until(t, id, "a1", `on=\w+`).Output)
		require.NoError(t, o.rt.Tasks().Input(ctx, id, "a1", nil, true))
		o.settledAll(t, 1)
		newEpoch, err := w.lease.current()
		require.NoError(t, err)
		assert.Greater(t, newEpoch, oldEpoch, "a new lease, a new epoch")
		for i := range ids {
			assert.Len(t, runs(t, dir, i), 1, "command %d ran exactly once", i)
		}
		<-w.Drained()
		noticed(t, n, "a1", append(ids, id))
		require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
	})
}

func TestOwnerNodeCutOffFromNATS(t *testing.T) {
	ctx := context.Background()
	p := newPartitioned(t)
	w1 := workerOn(t, p.conn(), "w1", WithMaxTasks(2))
	w2 := workerOn(t, p.conn(), "w2", WithMaxTasks(2))
	o := ownerOn(t, p.behind())
	n := newNotices()
	require.NoError(t, o.rt.Agents().Register(ctx, "a1", n.injector("a1")))
	dir := t.TempDir()
	var ids []messages.TaskID
	for i := range 3 {
		id := o.start(t, "a1", bash.Command{Command: recorded(dir, i)})
		o.until(t, id, "a1", "up")
		ids = append(ids, id)
	}
	// The fourth reads its stdin into a file: an input sent during the cut must
	// never land, since the caller is told it failed.
	in := filepath.Join(dir, "in")
	fed := o.start(t, "a1", bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/run-3; echo up; exec cat > %s`, dir, in), Stdin: bash.StdinPipe})
	o.until(t, fed, "a1", "up")
	require.NoError(t, o.rt.Tasks().Input(ctx, fed, "a1", []byte("before\n"), false))
	ids = append(ids, fed)
	require.Equal(t, 2, w1.Live())
	require.Equal(t, 2, w2.Live())
	oldEpoch, err := o.p.Epoch()
	require.NoError(t, err)
	lw := watchLeases(t, p.conn(), defaultPrefix)

	cut := time.Now()
	p.proxy.Cut()
	inputErr := make(chan error, 1)
	go func() { inputErr <- o.rt.Tasks().Input(ctx, fed, "a1", []byte("during the cut\n"), false) }()
	_, _, err = o.rt.Tasks().Kill(ctx, ids[0], "a1", "killed during the cut")
	require.NoError(t, err)
	got, fenced := o.settledAll(t, len(ids))
	for _, id := range ids {
		assert.Equal(t, messages.Failed, got[id].Status)
		assert.True(t, strings.HasPrefix(got[id].Detail, "owner lease lost: "), got[id].Detail)
	}
	require.ErrorIs(t, <-inputErr, messages.ErrTaskEnded, "the input during the cut failed, and the caller is told so")
	<-w1.Drained()
	<-w2.Drained()
	gone := time.Now()
	assert.Zero(t, w1.Processes()+w2.Processes())
	margin := gone.Sub(fenced)
	assert.Positive(t, margin, "the owner node failed its tasks before the workers killed them")
	t.Logf("owner cut off → its tasks failed (self-fence): %s; → its processes gone on both workers: %s; fence margin ≥ %s",
		fenced.Sub(cut).Round(time.Millisecond), gone.Sub(cut).Round(time.Millisecond), margin.Round(time.Millisecond))

	t.Run("healed, what the owner sent during the cut takes no effect and nothing runs twice", func(t *testing.T) {
		p.proxy.Heal()
		lw.until(t, ownerKey(o.p.Node()), func() bool { e, err := o.p.Epoch(); return err == nil && e > oldEpoch })
		require.NoError(t, o.nc.FlushTimeout(settleLimit), "everything sent during the cut has reached the server")
		t.Logf("the owner's connection reconnected %d times (0: what it sent during the cut was delivered after the heal)", o.nc.Stats().Reconnects)
		id := o.start(t, "a1", bash.Command{Command: `echo again`})
		o.settledAll(t, 1)
		b, err := os.ReadFile(in)
		require.NoError(t, err)
		assert.Equal(t, "before\n", string(b), "the input sent during the cut never reached the command")
		for i := range ids {
			assert.Len(t, runs(t, dir, i), 1, "command %d ran exactly once", i)
		}
		<-w1.Drained()
		<-w2.Drained()
		// The task killed during the cut was reported by its kill: no notice.
		noticed(t, n, "a1", append(ids[1:], id))
		require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
	})
}

// exitedAll returns a channel closed once every command the worker holds now has
// exited (its processes are gone: the bash producer delivered its outcome).
func (w *Worker) exitedAll() <-chan struct{} {
	w.mu.Lock()
	var chs []chan struct{}
	for _, t := range w.tasks {
		chs = append(chs, t.exited)
	}
	w.mu.Unlock()
	all := make(chan struct{})
	go func() {
		for _, c := range chs {
			<-c
		}
		close(all)
	}()
	return all
}
