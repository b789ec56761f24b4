//go:build linux

package remote

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/leakcheck"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(survivorCheck{m}) }

// survivorCheck fails a passing run when a process of a bash task of this test
// process (the in-process workers') still runs at the end.
type survivorCheck struct{ m *testing.M }

func (s survivorCheck) Run() int {
	code := s.m.Run()
	if code == 0 {
		if n := leakcheck.Live(); n > 0 {
			fmt.Fprintf(os.Stderr, "survivors: %d processes of workers' commands still run\n", n)
			return 1
		}
	}
	return code
}

// testLease is the lease of every node in the tests: short, so that lapses come
// within about a second and a half.
const testLease = 2 * time.Second

// settleLimit bounds every wait of the tests (it is never waited out when they pass).
const settleLimit = 20 * time.Second

// cluster is an embedded NATS server with JetStream in the test process.
type cluster struct {
	t   *testing.T
	srv *Server
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv, err := StartServer(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return &cluster{t: t, srv: srv}
}

// conn is a connection with Connect's settings, closed at the end of the test.
func (c *cluster) conn() *nats.Conn {
	c.t.Helper()
	nc, err := Connect(c.srv.URL())
	require.NoError(c.t, err)
	c.t.Cleanup(nc.Close)
	return nc
}

// worker starts a worker named name on a connection of its own.
func (c *cluster) worker(name string, opts ...Option) (*Worker, *nats.Conn) {
	c.t.Helper()
	nc := c.conn()
	w, err := NewWorker(nc, append([]Option{WithName(name), WithLease(testLease), WithDir(c.t.TempDir())}, opts...)...)
	require.NoError(c.t, err)
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		defer cancel()
		require.NoError(c.t, w.Close(ctx))
		require.Zero(c.t, w.Processes(), "worker %s: processes left after Close", name)
	})
	return w, nc
}

// owner is an owner node: a remote producer and a runtime using it.
type owner struct {
	p  *Producer
	rt *actors.Runtime
	nc *nats.Conn
}

func (c *cluster) owner(opts ...Option) *owner {
	c.t.Helper()
	nc := c.conn()
	p, err := New(nc, append([]Option{WithLease(testLease), WithStartTimeout(5 * time.Second)}, opts...)...)
	require.NoError(c.t, err)
	rt, err := actors.NewRuntime()
	require.NoError(c.t, err)
	detach := rt.Tasks().AttachSurface("remote test")
	// The notice path of a surface (package tools does the same): on each
	// settlement, claim the task's one notice and inject it.
	unsubscribe := rt.Tasks().OnDone(func(s messages.Snapshot) {
		_, _ = rt.Tasks().Notify(context.Background(), s.ID, fmt.Sprintf("background task %s (%s: %s) finished [status: %s, %s]", s.ID, s.Kind, s.Label, s.Status, s.Detail))
	})
	c.t.Cleanup(func() {
		unsubscribe()
		detach()
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		defer cancel()
		require.NoError(c.t, rt.Close(ctx))
		require.NoError(c.t, p.Close(ctx))
		require.Zero(c.t, p.Live(), "remote tasks left after Close")
	})
	return &owner{p: p, rt: rt, nc: nc}
}

// start starts command as a background task of agent.
func (o *owner) start(t *testing.T, agent messages.AgentID, c bash.Command) messages.TaskID {
	t.Helper()
	id, err := o.rt.Tasks().Start(context.Background(), o.p.Spec(agent, c))
	require.NoError(t, err)
	return id
}

// settled waits for id to settle. Wait alone does not do: it returns at once
// while the task's output is full (nothing happens before a read), and a task
// whose worker shut down stays full until the owner hears the end. So the
// settlement is taken from OnDone, subscribed before Wait looks: an end before
// the subscription shows in Wait's snapshot, one after it comes on done.
func (o *owner) settled(t *testing.T, id messages.TaskID, caller messages.AgentID) messages.Snapshot {
	t.Helper()
	done := make(chan messages.Snapshot, 1)
	unsubscribe := o.rt.Tasks().OnDone(func(s messages.Snapshot) {
		if s.ID == id {
			select {
			case done <- s:
			default:
			}
		}
	})
	defer unsubscribe()
	s, err := o.rt.Tasks().Wait(context.Background(), id, caller, settleLimit)
	require.NoError(t, err)
	if s.Status.Terminal() {
		return s
	}
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	select {
	case s = <-done:
	case <-limit.C:
		t.Fatalf("task %s did not settle within %s: %+v", id, settleLimit, s)
	}
	return s
}

// until reads id up to pattern.
func (o *owner) until(t *testing.T, id messages.TaskID, caller messages.AgentID, pattern string) messages.UntilResult {
	t.Helper()
	r, err := o.rt.Tasks().ReadUntil(context.Background(), id, caller, pattern, settleLimit)
	require.NoError(t, err)
	require.Equal(t, messages.UntilMatched, r.Reason, "ReadUntil %q: got %q, status %s", pattern, r.Output, r.Snapshot.Status)
	return r
}

// notices collects the notices injected into agents.
type notices struct {
	mu   sync.Mutex
	got  map[messages.AgentID][]string
	more chan struct{}
}

func newNotices() *notices {
	return &notices{got: map[messages.AgentID][]string{}, more: make(chan struct{}, 100)}
}

func (n *notices) injector(agent messages.AgentID) actors.AgentOption {
	return actors.WithInjector(func(_ context.Context, text string) error {
		n.mu.Lock()
		n.got[agent] = append(n.got[agent], text)
		n.mu.Unlock()
		n.more <- struct{}{}
		return nil
	})
}

func (n *notices) of(agent messages.AgentID) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got[agent]...)
}
