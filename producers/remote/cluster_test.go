//go:build linux

package remote

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// replicated is a three-server JetStream cluster in the test process (R3 lease
// bucket), each server storing under the test's temporary directory.
type replicated struct {
	*Cluster
	t *testing.T
}

func newReplicated(t *testing.T) *replicated {
	t.Helper()
	c, err := StartCluster(t.TempDir(), 3)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	r := &replicated{Cluster: c, t: t}
	// StartCluster returns once every server takes connections; the JetStream
	// meta group may not place an R3 stream yet, and nodes fail at once then.
	replicatedBucket(t, r.conn(0), defaultPrefix)
	return r
}

// conn connects to server i first (and fails over to the others).
func (r *replicated) conn(i int) *nats.Conn {
	r.t.Helper()
	nc, err := Connect(r.Servers()[i].URL() + "," + r.URL())
	require.NoError(r.t, err)
	r.t.Cleanup(nc.Close)
	return nc
}

// on is the tests' harness (owners, workers) on server i; their connections learn
// the other servers from it and fail over to them.
func (r *replicated) on(i int) *cluster {
	return &cluster{t: r.t, srv: r.Servers()[i]}
}

// leaseWatch follows the lease bucket from the test: every put, with when it was
// seen.
type leaseWatch struct {
	puts chan leasePut
	kw   jetstream.KeyWatcher
}

type leasePut struct {
	key   string
	rev   uint64
	epoch uint64
	op    jetstream.KeyValueOp
	at    time.Time
}

// testJetStream is jetstream.New for a test's own look at the cluster, with API
// calls that wait up to settleLimit rather than the default 5 s: on a loaded
// machine an R3 stream's answer can take longer.
func testJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc, jetstream.WithDefaultTimeout(settleLimit))
}

func watchLeases(t *testing.T, nc *nats.Conn, prefix string) *leaseWatch {
	t.Helper()
	js, err := testJetStream(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), subjects{prefix}.bucket())
	require.NoError(t, err)
	bound, cancel := context.WithTimeout(context.Background(), settleLimit)
	defer cancel()
	kw, err := watchAll(context.Background(), bound, kv, jetstream.UpdatesOnly())
	require.NoError(t, err)
	lw := &leaseWatch{puts: make(chan leasePut, 1024), kw: kw}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range kw.Updates() {
			if e == nil {
				continue
			}
			var v leaseValue
			_ = json.Unmarshal(e.Value(), &v)
			select {
			case lw.puts <- leasePut{key: e.Key(), rev: e.Revision(), epoch: v.Epoch, op: e.Operation(), at: time.Now()}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = kw.Stop()
		<-done
	})
	return lw
}

// renewedAfter waits until every key in keys was renewed (a put of the same
// epoch) after rev, and returns when the last of them was.
func (lw *leaseWatch) renewedAfter(t *testing.T, rev uint64, epochs map[string]uint64) time.Time {
	t.Helper()
	left := len(epochs)
	seen := map[string]bool{}
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	var last time.Time
	for left > 0 {
		select {
		case p := <-lw.puts:
			want, ok := epochs[p.key]
			if !ok || p.rev <= rev || seen[p.key] {
				continue
			}
			require.Equal(t, jetstream.KeyValuePut, p.op, "lease %s ended", p.key)
			require.Equal(t, want, p.epoch, "lease %s renewed under its epoch", p.key)
			seen[p.key] = true
			last = p.at
			left--
		case <-limit.C:
			t.Fatalf("leases %v not renewed within %s", epochs, settleLimit)
		}
	}
	return last
}

func TestReplicatedStore(t *testing.T) {
	ctx := context.Background()
	r := newReplicated(t)
	// Joining takes a write to the R3 lease bucket, which a loaded machine can keep
	// past the default bound of twice the lease (a make flake did, once in 6).
	r.on(2).worker("w1", WithReplicas(3), WithStartTimeout(settleLimit))
	o := r.on(0).owner(WithReplicas(3), WithStartTimeout(settleLimit))
	lw := watchLeases(t, r.conn(0), defaultPrefix)

	t.Run("the lease bucket has three replicas, current on every server", func(t *testing.T) {
		js, err := testJetStream(r.conn(1))
		require.NoError(t, err)
		kv, err := js.KeyValue(ctx, subjects{defaultPrefix}.bucket())
		require.NoError(t, err)
		st, err := kv.Status(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas)
		si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		require.NotNil(t, si.Cluster)
		assert.Len(t, si.Cluster.Replicas, 2, "a leader and two followers")
	})

	t.Run("a command runs with its owner and its worker on different servers", func(t *testing.T) {
		// The worker joined on another server: until its subscription reaches the
		// owner's, a start finds no worker (a loaded make flake did, once in 30).
		id := o.startOnceTaken(t, lw, "", bash.Command{Command: `echo "on=$TASKRT_WORKER"`})
		assert.Equal(t, "on=w1\n", o.until(t, id, "", `on=\w+`).Output)
		s := o.settled(t, id, "")
		assert.Equal(t, "exit code: 0", s.Detail)
	})

	t.Run("shutting down the stream leader: leases survive and nothing is declared lost", func(t *testing.T) {
		// A lease well above the failover time (and the scheduling delays of a
		// loaded machine): its own bucket, its own stream, its own nodes.
		const lease = 8 * time.Second
		opts := []Option{WithPrefix("long"), WithLease(lease), WithReplicas(3)}
		replicatedBucket(t, r.conn(0), "long") // nodes fail at once when the cluster cannot place it yet
		w := workerOn(t, r.conn(2), "w1", opts...)
		o := ownerOn(t, r.conn(0), opts...)
		stream := "KV_" + subjects{"long"}.bucket()
		leader := r.StreamLeader(stream)
		require.GreaterOrEqual(t, leader, 0, "the lease stream has a leader")
		watcher := r.conn((leader + 1) % 3)
		lw := watchLeases(t, watcher, "long")
		// The worker joined on another server than the owner's (see the subtest above).
		id := o.startOnceTaken(t, nil, "", bash.Command{Command: `echo up; sleep 60`})
		o.until(t, id, "", "up")
		oe, err := o.p.Epoch()
		require.NoError(t, err)
		we, err := w.lease.current()
		require.NoError(t, err)
		js, err := testJetStream(watcher)
		require.NoError(t, err)
		si, err := js.Stream(ctx, stream)
		require.NoError(t, err)
		info, err := si.Info(ctx)
		require.NoError(t, err)
		before := info.State.LastSeq

		down := time.Now()
		r.Servers()[leader].Close()
		renewed := lw.renewedAfter(t, before, map[string]uint64{ownerKey(o.p.Node()): oe, workerKey("w1"): we})
		t.Logf("stream leader %s shut down → every lease seen renewed under its epoch by a watcher (an upper bound: the watch recovers too): %s (lease %s)", r.Servers()[leader].Name(), renewed.Sub(down).Round(time.Millisecond), lease)
		newLeader := r.StreamLeader(stream)
		assert.NotEqual(t, leader, newLeader)
		assert.GreaterOrEqual(t, newLeader, 0)

		got, err := o.rt.Tasks().Get(ctx, id, "")
		require.NoError(t, err)
		assert.Equal(t, messages.Running, got.Status, "the task was not declared lost")
		oe2, err := o.p.Epoch()
		require.NoError(t, err)
		assert.Equal(t, oe, oe2, "the owner node kept its lease")
		_, _, err = o.rt.Tasks().Kill(ctx, id, "", "done")
		require.NoError(t, err)
		s := o.settled(t, id, "")
		assert.Equal(t, messages.Killed, s.Status, "killed, not lost: %s", s.Detail)
		<-w.Drained()
	})
}

// until waits until ok holds, checking again on each put of key (renewals come
// every quarter lease).
func (lw *leaseWatch) until(t *testing.T, key string, ok func() bool) {
	t.Helper()
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	for !ok() {
		select {
		case <-lw.puts:
		case <-limit.C:
			t.Fatalf("lease %s: condition not met within %s", key, settleLimit)
		}
	}
}
