package remote

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is n NATS servers with JetStream embedded in this process and clustered
// on loopback: a replicated lease bucket (WithReplicas(3)) in tests and demos.
// Production runs a nats-server cluster instead (docs/remote-faults.md). The
// tests' own: the package exports the one-server StartServer only.
type Cluster struct {
	servers []*Server
}

// clusterReady bounds how long StartCluster waits for the JetStream meta group to
// form.
const clusterReady = 30 * time.Second

// StartCluster starts n servers (n ≥ 1) named s0…s(n-1), each storing under
// dir/sI, on free loopback ports, routed to s0, and returns once every server
// sees a JetStream meta leader with all n peers and is current with it. With n
// = 1 it is one server, unclustered, as StartServer. Like StartServer's, its
// servers ping their clients every 2 s and drop one after two unanswered pings.
func StartCluster(dir string, n int) (*Cluster, error) {
	if dir == "" || n < 1 {
		return nil, errors.New("remote: StartCluster needs a store directory and at least one server")
	}
	// Every server routes to every other, on cluster ports chosen up front: a
	// clustered server is not ready for connections until its routes are up.
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var opts []*server.Options
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("s%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("s%d", i)),
			NoSigs:     true,
			NoLog:      true,
			// Drop a silent client (cut off, paused) within about 6 s, and with it its
			// subscriptions: a worker's place in the start queue group among them.
			PingInterval: clientPing,
			MaxPingsOut:  2,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "taskrt", Host: "127.0.0.1", Port: ports[i]}
			for j, p := range ports {
				if j != i {
					o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
				}
			}
		}
		opts = append(opts, o)
	}
	c := &Cluster{}
	for _, o := range opts {
		s, err := server.NewServer(o)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("remote: embedded NATS server: %w", err)
		}
		go s.Start()
		c.servers = append(c.servers, &Server{s: s})
	}
	for _, s := range c.servers {
		if !s.s.ReadyForConnections(clusterReady) {
			c.Close()
			return nil, fmt.Errorf("remote: embedded NATS server %s did not become ready within %s", s.Name(), clusterReady)
		}
	}
	if n == 1 {
		return c, nil
	}
	if err := c.waitReady(clusterReady); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// freePorts finds n free loopback ports (listening, then closing).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
	}
	return ports, nil
}

// waitReady polls the servers until the meta group has formed (there is no event
// to wait on from outside the server).
func (c *Cluster) waitReady(limit time.Duration) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for {
		ready := true
		leaders := 0
		for _, s := range c.servers {
			if s.s.JetStreamIsLeader() {
				leaders++
				if len(s.s.JetStreamClusterPeers()) != len(c.servers) {
					ready = false
				}
			}
			if !s.s.JetStreamIsCurrent() {
				ready = false
			}
		}
		if ready && leaders == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remote: the JetStream cluster of %d servers did not form within %s", len(c.servers), limit)
		}
		<-tick.C
	}
}

// Servers are the cluster's servers, s0 first. A server that was closed stays in
// the list (Running reports false).
func (c *Cluster) Servers() []*Server { return c.servers }

// URL is every running server's client URL, comma-separated: what Connect takes
// to fail over between them.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.servers {
		if s.Running() {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// StreamLeader is the index of the server that leads the stream named stream (a
// KV bucket B is the stream KV_B), or -1 while none does.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.servers {
		if s.Running() && s.s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Close shuts every running server down and waits until each has.
func (c *Cluster) Close() {
	for _, s := range c.servers {
		if s.Running() {
			s.Close()
		}
	}
}

// Running reports whether the server has not been shut down.
func (s *Server) Running() bool { return s.s.Running() }

// Name is the server's name (s0, s1, … in a Cluster).
func (s *Server) Name() string { return s.s.Name() }
