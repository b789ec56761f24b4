//go:build linux

package remote

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// natsProcEnv runs a clustered NATS server in this process (the test binary
// re-executed): "NAME CLIENT_PORT CLUSTER_PORT DIR ROUTE_PORT…". It prints
// "ready" and serves until killed.
const natsProcEnv = "TASKRT_TEST_NATS_SERVER"

func init() {
	spec := os.Getenv(natsProcEnv)
	if spec == "" {
		return
	}
	f := strings.Fields(spec)
	port, _ := strconv.Atoi(f[1])
	cport, _ := strconv.Atoi(f[2])
	o := &server.Options{ServerName: f[0], Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: f[3], NoSigs: true, NoLog: true,
		PingInterval: clientPing, MaxPingsOut: 2,
		Cluster: server.ClusterOpts{Name: "taskrt", Host: "127.0.0.1", Port: cport}}
	for _, r := range f[4:] {
		o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: "127.0.0.1:" + r})
	}
	s, err := server.NewServer(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// procCluster is three NATS servers, each an OS process, so that one can be
// SIGKILLed (no leadership handed over, as Shutdown does).
type procCluster struct {
	names []string
	urls  []string
	cmds  []*exec.Cmd
}

func startProcCluster(t *testing.T) *procCluster {
	t.Helper()
	ports, err := freePorts(6)
	require.NoError(t, err)
	pc := &procCluster{}
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, strconv.Itoa(ports[3+j]))
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %s %s", natsProcEnv, name, ports[i], ports[3+i], filepath.Join(t.TempDir(), name), strings.Join(routes, " ")))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		sc := bufio.NewScanner(out)
		require.True(t, sc.Scan(), "server %s ready", name)
		pc.names = append(pc.names, name)
		pc.urls = append(pc.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		pc.cmds = append(pc.cmds, cmd)
	}
	return pc
}

func (pc *procCluster) url() string { return strings.Join(pc.urls, ",") }

// bucket creates the R3 lease bucket of prefix, trying again while the cluster's
// meta group forms.
func (pc *procCluster) bucket(t *testing.T, prefix string) jetstream.KeyValue {
	t.Helper()
	nc, err := Connect(pc.url())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return replicatedBucket(t, nc, prefix)
}

// replicatedBucket creates the R3 lease bucket of prefix through nc, trying again
// while the cluster cannot place it yet (its meta group forming, a peer not yet
// seen online: "no suitable peers for placement").
func replicatedBucket(t *testing.T, nc *nats.Conn, prefix string) jetstream.KeyValue {
	t.Helper()
	js, err := testJetStream(nc)
	require.NoError(t, err)
	limit := time.Now().Add(settleLimit)
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		kv, err := ensureBucket(ctx, js, subjects{prefix}.bucket(), 3)
		cancel()
		if err == nil {
			return kv
		}
		require.True(t, time.Now().Before(limit), "the R3 bucket: %v", err)
		<-retry.C
	}
}

// leader is the index of the server that leads the stream of kv.
func (pc *procCluster) leader(t *testing.T, kv jetstream.KeyValue) int {
	t.Helper()
	// Right after a stepdown (or on a loaded machine, after the bucket's creation)
	// the stream may be between leaders: poll the cluster until it names one.
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	limit := time.Now().Add(settleLimit)
	for {
		leader := ""
		st, err := kv.Status(context.Background())
		if err == nil {
			ci := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Cluster
			require.NotNil(t, ci)
			for i, n := range pc.names {
				if n == ci.Leader {
					return i
				}
			}
			leader = ci.Leader
		}
		if leader != "" || time.Now().After(limit) {
			t.Fatalf("no leader among %v: %q (%v)", pc.names, leader, err)
		}
		<-retry.C
	}
}

func TestStreamLeaderKilled(t *testing.T) {
	ctx := context.Background()
	pc := startProcCluster(t)
	// lease is well above the failover time of an R3 stream whose leader died: up
	// to the servers' maximum election timeout (9 s) and a little.
	const lease = 48 * time.Second
	kv := pc.bucket(t, "long")
	lw := watchLeases(t, mustConn(t, pc.url()), "long")
	opts := []Option{WithPrefix("long"), WithLease(lease), WithReplicas(3)}
	w := workerOn(t, mustConn(t, pc.url()), "w1", opts...)
	o := ownerOn(t, mustConn(t, pc.url()), opts...)
	// Each connection picks one of the three servers: the worker's subscription may
	// not have reached the owner's server yet.
	id := o.startOnceTaken(t, nil, "", bash.Command{Command: `echo up; exec sleep 600`})
	o.until(t, id, "", "up")
	oe, err := o.p.Epoch()
	require.NoError(t, err)
	we, err := w.lease.current()
	require.NoError(t, err)
	leader := pc.leader(t, kv)

	// The other case: nodes whose lease (2 s) is below the failover time, on a
	// bucket led by the same server.
	skv := pc.bucket(t, "short")
	pc.moveLeader(t, skv, "short", leader)
	sopts := []Option{WithPrefix("short"), WithLease(2 * time.Second), WithReplicas(3)}
	sw := workerOn(t, mustConn(t, pc.url()), "w2", sopts...)
	so := ownerOn(t, mustConn(t, pc.url()), sopts...)
	sid := so.startOnceTaken(t, nil, "", bash.Command{Command: `echo up; exec sleep 600`})
	so.until(t, sid, "", "up")

	st, err := kv.Status(ctx)
	require.NoError(t, err)
	before := st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq

	killed := time.Now()
	require.NoError(t, pc.cmds[leader].Process.Signal(syscall.SIGKILL))
	short, shortAt := so.settledAll(t, 1)
	renewed := lw.renewedAfter(t, before, map[string]uint64{ownerKey(o.p.Node()): oe, workerKey("w1"): we})
	t.Logf("stream leader %s SIGKILLed → every lease seen renewed under its epoch by a watcher (an upper bound: the watch recovers too): %s (lease %s)", pc.names[leader], renewed.Sub(killed).Round(time.Millisecond), lease)
	got, err := o.rt.Tasks().Get(ctx, id, "")
	require.NoError(t, err)
	assert.Equal(t, messages.Running, got.Status, "not declared lost")
	_, _, err = o.rt.Tasks().Kill(ctx, id, "", "done")
	require.NoError(t, err)
	s := o.settled(t, id, "")
	assert.Equal(t, messages.Killed, s.Status, s.Detail)
	<-w.Drained()

	ss := short[sid]
	assert.Equal(t, messages.Failed, ss.Status, "below the failover time the task fails: safe, not live")
	assert.True(t, strings.HasPrefix(ss.Detail, "owner lease lost: ") || ss.Detail == "worker lost: w2", ss.Detail)
	<-sw.Drained()
	assert.Zero(t, sw.Processes(), "and its process is gone")
	t.Logf("lease 2 s, below the failover time: the task failed %q, %s after the kill", ss.Detail, shortAt.Sub(killed).Round(time.Millisecond))
}

// moveLeader asks the stream of kv to move its leader to server i, and waits
// until it has.
func (pc *procCluster) moveLeader(t *testing.T, kv jetstream.KeyValue, prefix string, i int) {
	t.Helper()
	nc := mustConn(t, pc.url())
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	limit := time.Now().Add(settleLimit)
	for pc.leader(t, kv) != i {
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+subjects{prefix}.bucket(), fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, pc.names[i]), 2*time.Second)
		require.True(t, time.Now().Before(limit), "the leader of %s did not move to %s", prefix, pc.names[i])
		<-retry.C
	}
}

func mustConn(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}
