//go:build linux

package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// harness is what a client hands its model from a tool result.
type harness struct {
	name string
	show func(t *testing.T, res *mcp.CallToolResult) []string
}

// harnesses are the two views a notice and the guidance must survive: a
// structured-only client shows the model a result's structuredContent instead of
// its content whenever it has one (as Claude Code and Codex do); a content-only
// client shows only content.
var harnesses = []harness{
	{"structured-only client", func(t *testing.T, res *mcp.CallToolResult) []string {
		if res.StructuredContent != nil {
			// The model reads the JSON; what it can read are its strings.
			var v any
			if err := json.Unmarshal([]byte(structured(t, res)), &v); err != nil {
				t.Fatal(err)
			}
			return leaves(v)
		}
		return texts(t, res)
	}},
	{"content-only client", texts},
}

// leaves are the strings of a decoded JSON value.
func leaves(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, leaves(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		}) {
			out = append(out, leaves(v[k])...)
		}
		return out
	}
	return nil
}

// transports connect a client to a Server the two ways a harness does: stdio (the
// newline-delimited JSON framing of StdioTransport, over pipes) and streamable HTTP.
var transports = []struct {
	name    string
	connect func(t *testing.T, srv *mcpserver.Server) *client
}{
	{"stdio", connectStdio},
	{"HTTP", func(t *testing.T, srv *mcpserver.Server) *client {
		return connectHTTP(t, httpServer(t, srv, "", nil), "")
	}},
}

// connectStdio serves one session of srv over a pair of pipes with the stdio
// framing and connects a client to it; the client is closed, and Serve awaited, at
// the end of the test.
func connectStdio(t *testing.T, srv *mcpserver.Server) *client {
	t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	sv := &serving{done: make(chan struct{})}
	go func() {
		defer close(sv.done)
		sv.err = srv.Serve(bg, &mcp.IOTransport{Reader: toServer, Writer: fromServer})
	}()
	mc, c := newClient()
	cs, err := mc.Connect(bg, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		_ = sv.wait(t)
	})
	return c
}

// guidance is the part of a background start's text that tells the model what
// comes next.
const guidance = "You will be notified when it finishes; read its output with task_output."

// In both views, over both transports, every notice reaches the model exactly once
// — whether it rides on a background start (which has structuredContent), on a tool
// error or on a foreground result — and every background start's guidance reaches
// it too.
func TestWhatTheModelSees(t *testing.T) {
	for _, tr := range transports {
		for _, h := range harnesses {
			t.Run(tr.name+"/"+h.name, func(t *testing.T) {
				srv := newServer(t)
				c := tr.connect(t, srv)
				c.setLogLevel(t)
				var seen []string // everything the model was shown, in order
				show := func(res *mcp.CallToolResult) []string {
					v := h.show(t, res)
					seen = append(seen, v...)
					return v
				}
				// finish releases a task held on gate and returns its notice once it
				// is queued for the next result (it reached the client as a log
				// message first).
				finish := func(gate string) string {
					t.Helper()
					release(t, gate, "x")
					return fmt.Sprint(c.nextLog(t).Data)
				}
				gates := []string{fifo(t), fifo(t), fifo(t)}

				// 1. A background start: the guidance reaches the model.
				first := show(c.call(t, "bash", map[string]any{"command": "cat " + gates[0] + "; echo quick", "run_in_background": true}))
				if !containsIn(first, guidance) {
					t.Errorf("the first start showed %q: no guidance", first)
				}
				notices := []string{finish(gates[0])}

				// 2. Another background start: the first task's notice rides on it.
				res := c.call(t, "bash", map[string]any{"command": "cat " + gates[1], "run_in_background": true})
				second := show(res)
				if !containsIn(second, guidance) || !containsIn(second, notices[0]) {
					t.Errorf("the second start showed %q: want its guidance and the notice %q", second, notices[0])
				}
				t.Run("the handle keeps kind and task_id and adds message and notices", func(t *testing.T) {
					var got map[string]any
					if err := json.Unmarshal([]byte(structured(t, res)), &got); err != nil {
						t.Fatal(err)
					}
					want := map[string]any{"kind": "background", "task_id": "bash-2", "message": texts(t, res)[0], "notices": []any{notices[0]}}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("structuredContent = %v, want %v", got, want)
					}
				})
				notices = append(notices, finish(gates[1]))

				// 3. A tool error: the second task's notice rides on it.
				res = c.call(t, "task_output", map[string]any{"task_id": "bash-99"})
				if errShown := show(res); !res.IsError || !containsIn(errShown, notices[1]) {
					t.Errorf("the tool error showed %q (isError %v): want the notice %q", errShown, res.IsError, notices[1])
				}

				// 4. A foreground result: the third task's notice rides on it.
				if third := show(c.call(t, "bash", map[string]any{"command": "cat " + gates[2], "run_in_background": true})); !containsIn(third, guidance) {
					t.Errorf("the third start showed %q: no guidance", third)
				}
				notices = append(notices, finish(gates[2]))
				if fg := show(c.call(t, "bash", map[string]any{"command": "echo foreground"})); !containsIn(fg, notices[2]) {
					t.Errorf("the foreground result showed %q: want the notice %q", fg, notices[2])
				}
				show(c.call(t, "task_list", map[string]any{}))

				for i, n := range notices {
					if want := fmt.Sprintf("background task bash-%d ", i+1); !strings.HasPrefix(n, want) {
						t.Errorf("notice %d = %q, want it to begin %q", i+1, n, want)
					}
					if got := countIn(seen, n); got != 1 {
						t.Errorf("the model saw notice %q %d times, want once", n, got)
					}
				}
				if got := countIn(seen, guidance); got != 3 {
					t.Errorf("the model saw the guidance %d times, want 3 (one per background start)", got)
				}
			})
		}
	}
}

// containsIn reports whether one of the shown strings contains s.
func containsIn(shown []string, s string) bool { return countIn(shown, s) > 0 }

// countIn counts the occurrences of s in the shown strings.
func countIn(shown []string, s string) int {
	n := 0
	for _, v := range shown {
		n += strings.Count(v, s)
	}
	return n
}

// No tool declares an outputSchema: one would oblige every result of the tool to
// carry structuredContent, and the clients that show structuredContent instead of
// content would then hide the text of plain results too.
func TestNoOutputSchema(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	res, err := c.cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.OutputSchema != nil {
			t.Errorf("%s declares an outputSchema: %v", tool.Name, tool.OutputSchema)
		}
	}
	t.Run("a plain result has no structuredContent", func(t *testing.T) {
		for _, name := range []string{"task_list", "bash"} {
			args := map[string]any{}
			if name == "bash" {
				args["command"] = "true"
			}
			if got := structured(t, c.call(t, name, args)); got != "" {
				t.Errorf("%s: structuredContent = %s, want none", name, got)
			}
		}
	})
}

// recording is a client transport that hands every message the server sends to
// received, including responses to requests the client has already given up on
// (which the SDK client drops).
type recording struct {
	mcp.Transport
	received chan jsonrpc.Message
}

func (r *recording) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := r.Transport.Connect(ctx)
	return &recordingConn{Connection: conn, received: r.received}, err
}

type recordingConn struct {
	mcp.Connection
	received chan jsonrpc.Message
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		select {
		case c.received <- m:
		default:
		}
	}
	return m, err
}

// A task_output wait whose MCP request the client cancels answers in the tools'
// words — the wait was interrupted, the task's status — never with a Go error
// string; and a notice due then does not ride on that answer (the client drops it):
// it reaches the next result.
func TestCancelledRequest(t *testing.T) {
	srv := newServer(t)
	calls := make(chan string, 16)
	mcpserver.OnToolCall(srv, func(name string) { calls <- name })
	ct, st := mcp.NewInMemoryTransports()
	sv := &serving{done: make(chan struct{})}
	go func() {
		defer close(sv.done)
		sv.err = srv.Serve(bg, st)
	}()
	mc, c := newClient()
	rec := &recording{Transport: ct, received: make(chan jsonrpc.Message, 256)}
	cs, err := mc.Connect(bg, rec, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		_ = sv.wait(t)
	})
	c.setLogLevel(t)

	held, quick := fifo(t), fifo(t)
	c.call(t, "bash", map[string]any{"command": "cat " + held, "run_in_background": true})
	c.call(t, "bash", map[string]any{"command": "cat " + quick, "run_in_background": true})
	release(t, quick, "x")
	notice := fmt.Sprint(c.nextLog(t).Data) // bash-2's, queued for the next result
	for range 2 {
		<-calls
	}

	ctx, cancel := context.WithCancel(bg)
	errs := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{"task_id": "bash-1", "wait": true, "timeout_ms": 600000}})
		errs <- err
	}()
	if name := <-calls; name != "task_output" {
		t.Fatalf("call = %s", name)
	}
	cancel()
	if err := <-errs; err == nil {
		t.Fatal("the cancelled call returned no error to its client")
	}
	// The server still answers the cancelled request; the SDK client dropped it.
	want := "(wait interrupted before the task finished)\n[status: running]"
	deadline := time.After(time.Minute)
	for answered := false; !answered; {
		select {
		case m := <-rec.received:
			resp, ok := m.(*jsonrpc.Response)
			if !ok || resp.Result == nil {
				continue
			}
			for _, s := range goErrors {
				if strings.Contains(string(resp.Result), s) {
					t.Errorf("a response carries %q: %s", s, resp.Result)
				}
			}
			var r mcp.CallToolResult
			if err := json.Unmarshal(resp.Result, &r); err != nil || len(r.Content) == 0 {
				continue // not a tool result
			}
			if got := texts(t, &r); strings.Contains(got[0], "wait interrupted") {
				answered = true
				if !slices.Equal(got, []string{want}) {
					t.Errorf("the cancelled call's answer = %q, want %q (no notice)", got, want)
				}
			}
		case <-deadline:
			t.Fatal("no answer to the cancelled call within a minute")
		}
	}
	if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{
		"bash-1 [bash] running — cat " + held + "\nbash-2 [bash] completed — cat " + quick, notice,
	}; !slices.Equal(got, want) {
		t.Errorf("the next result = %q, want %q (the notice)", got, want)
	}
	release(t, held, "x")
}

// goErrors are the strings no tool result may carry: Go's, not the tools'.
var goErrors = []string{"context canceled", "context deadline exceeded"}
