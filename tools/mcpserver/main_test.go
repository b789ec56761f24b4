package mcpserver_test

//lint:file-ignore SA1019 the tests check the notices sent as log messages, which the server keeps for the revisions that still have logging

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/proctest"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// sessionOpts make the SDK's client open a 2025-11-25 session: by default go-sdk
// v1.8.0 speaks the sessionless 2026-07-28 first, and the server serves it.
var sessionOpts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// newServer starts a Server and registers its Close and the zero-state check: no
// task, agent or actor is left in its runtime.
func newServer(t testing.TB, opts ...mcpserver.Option) *mcpserver.Server {
	t.Helper()
	srv, err := mcpserver.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got, want := srv.Runtime().Stats(), (actors.Stats{}); got != want {
			t.Errorf("runtime Stats after Close = %+v, want %+v", got, want)
		}
	})
	return srv
}

// client is one MCP client session with what the server sent it besides results.
type client struct {
	cs       *mcp.ClientSession
	conn     *cuttable
	logs     chan *mcp.LoggingMessageParams
	progress chan *mcp.ProgressNotificationParams
}

// newClient returns an unconnected SDK client whose log messages and progress
// notifications go to c's channels.
func newClient() (*mcp.Client, *client) {
	c := &client{logs: make(chan *mcp.LoggingMessageParams, 64), progress: make(chan *mcp.ProgressNotificationParams, 64)}
	mc := mcp.NewClient(&mcp.Implementation{Name: "taskrt-test", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			select {
			case c.logs <- r.Params:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case c.progress <- r.Params:
			default:
			}
		},
	})
	return mc, c
}

// serving is a Serve call running on its own goroutine.
type serving struct {
	done chan struct{}
	err  error // Serve's result, set before done is closed
}

// wait waits for Serve to return: once the session ended and its owner was
// disposed.
func (s *serving) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return within a minute")
		return nil
	}
}

// serve connects a client to srv over in-memory transports, the server side
// running in Serve. The client is closed at the end of the test.
func serve(t *testing.T, srv *mcpserver.Server) (*client, *serving) {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	sv := &serving{done: make(chan struct{})}
	go func() {
		defer close(sv.done)
		sv.err = srv.Serve(bg, st)
	}()
	mc, c := newClient()
	c.conn = &cuttable{Transport: ct}
	cs, err := mc.Connect(bg, c.conn, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		_ = sv.wait(t)
	})
	return c, sv
}

// cuttable is a client transport whose connection a test can cut the way a
// client process that dies does: no graceful close, calls in flight abandoned.
// (ClientSession.Close waits for the calls in flight.)
type cuttable struct {
	mcp.Transport
	conn mcp.Connection
}

func (c *cuttable) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	c.conn = conn
	return conn, err
}

// cut closes the connection under the client.
func (c *cuttable) cut(t *testing.T) {
	t.Helper()
	if err := c.conn.Close(); err != nil {
		t.Fatal(err)
	}
}

// call calls a tool and fails the test on a protocol error.
func (c *client) call(t *testing.T, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// setLogLevel asks for log messages (the SDK sends none before).
func (c *client) setLogLevel(t *testing.T) {
	t.Helper()
	if err := c.cs.SetLoggingLevel(bg, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
}

// nextLog receives the next log message.
func (c *client) nextLog(t *testing.T) *mcp.LoggingMessageParams {
	t.Helper()
	select {
	case l := <-c.logs:
		return l
	case <-time.After(time.Minute):
		t.Fatal("no log message within a minute")
		return nil
	}
}

// texts returns the text of every content item.
func texts(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	out := make([]string, len(res.Content))
	for i, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %d is %T, want text", i, c)
		}
		out[i] = tc.Text
	}
	return out
}

// structured returns a result's structuredContent as JSON ("" when absent).
func structured(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.StructuredContent == nil {
		return ""
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ---- processes ----

// newMark returns a marker unique to this test run, to put in commands: every
// process a marked command starts carries it in its command line or environment.
func newMark(t testing.TB) string {
	t.Helper()
	return "mcptest" + strings.ToLower(rand.Text()[:12])
}

// marked is a command that runs script with the marker exported (so that every
// process it starts carries it).
func marked(mark, script string) string { return proctest.Marked(mark, script) }

// markedPIDs lists the live processes that carry mark (see proctest.MarkedPIDs).
func markedPIDs(mark string) []int { return proctest.MarkedPIDs(mark) }

// awaitMarked polls /proc until at least n processes carry mark.
func awaitMarked(t *testing.T, mark string, n int) {
	t.Helper()
	pollProcs(t, func() bool { return len(markedPIDs(mark)) >= n }, "%d processes marked %s to run", n, mark)
}

// awaitGone polls /proc until no process carries mark, and returns how long that
// took.
func awaitGone(t *testing.T, mark string) time.Duration {
	t.Helper()
	start := time.Now()
	pollProcs(t, func() bool { return len(markedPIDs(mark)) == 0 }, "the processes marked %s to be gone", mark)
	return time.Since(start)
}

// pollProcs checks cond every few milliseconds for a minute: observing other
// processes has no event to wait on.
func pollProcs(t *testing.T, cond func() bool, format string, a ...any) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for "+format, a...)
		}
	}
}

// assertNoMarked fails the test if a process carrying mark is alive now.
func assertNoMarked(t *testing.T, mark string) {
	t.Helper()
	if pids := markedPIDs(mark); len(pids) > 0 {
		t.Errorf("processes marked %s still alive: %v", mark, pids)
		killAll(pids)
	}
}

func killAll(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// fifo makes a named pipe in a temporary directory: a command that reads it blocks
// until the test writes, which lets a test hold a task running for as long as it
// needs.
func fifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// release writes line to the fifo (blocking until the command opens it).
func release(t *testing.T, path, line string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = f.WriteString(line + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing read the fifo within a minute")
	}
}

// goldenFile reads a golden file of package tools.
func goldenFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
