package remote

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is a NATS server with JetStream embedded in this process, listening on
// loopback: for one-binary use (an owner node and its workers in one program) and
// for tests. A production deployment runs nats-server (a cluster of three for a
// replicated lease bucket) and points every node at it.
type Server struct {
	s *server.Server
}

// clientPing is how often an embedded server pings its clients; after two
// unanswered pings it closes the connection.
const clientPing = 2 * time.Second

// StartServer starts an embedded server that stores JetStream data under dir
// (t.TempDir() in tests), on a free loopback port (or port, when positive). It
// returns once the server accepts connections. It pings its clients every 2 s and
// drops one after two unanswered pings, so a client cut off or paused loses its
// subscriptions (a worker's place in the start queue group among them) within
// about 6 s instead of nats-server's default of minutes.
func StartServer(dir string, port int) (*Server, error) {
	if dir == "" {
		return nil, errors.New("remote: StartServer needs a store directory")
	}
	if port <= 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoSigs:    true,
		NoLog:     true,
		// Drop a silent client (cut off, paused) within about 6 s.
		PingInterval: clientPing,
		MaxPingsOut:  2,
	})
	if err != nil {
		return nil, fmt.Errorf("remote: embedded NATS server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("remote: embedded NATS server did not become ready within 10s")
	}
	return &Server{s: s}, nil
}

// URL is the server's client URL (nats://127.0.0.1:PORT).
func (s *Server) URL() string { return s.s.ClientURL() }

// Close shuts the server down and waits until it has.
func (s *Server) Close() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// Connect dials a NATS server with the settings the protocol relies on, before
// opts (which may override them):
//
//   - no reconnect buffer (nats.ReconnectBufSize(-1)): a request or publication
//     made while the connection is down fails at once instead of being replayed
//     after the reconnect, when it may be stale (a kill for a task that was
//     failed meanwhile, an input the caller was told had failed);
//   - reconnect forever, every 250 ms: a node that was cut off comes back by
//     itself, and its lease decides what it may still do;
//   - a ping every 5 s, two outstanding at most: a dead connection is noticed in
//     about 10 s even when nothing is sent.
func Connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	base := []nats.Option{
		nats.ReconnectBufSize(-1),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
	}
	return nats.Connect(url, append(base, opts...)...)
}
