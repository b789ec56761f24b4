package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// rpc is a hand-driven JSON-RPC client of one session, over stdio (pipes into
// Serve) or streamable HTTP: what the SDK's client cannot send (params.task,
// tasks/*) goes on the wire as written.
type rpc struct {
	t    *testing.T
	next int

	// stdio
	w       io.WriteCloser
	serving *serving
	mu      sync.Mutex                   // protects next, waiting and notes
	waiting map[int]chan json.RawMessage // responses by id
	notes   map[string][]json.RawMessage // notifications by method
	noted   chan struct{}                // closed and replaced on every notification
	readErr chan error                   // the reader's end

	// HTTP
	http *raw

	// sessionless: every request carries this revision's _meta (and, over HTTP,
	// its headers) instead of belonging to a session
	sessionless string
	caps        string // its per-request client capabilities ("" for {})
}

// stdioRPC serves one session of srv over pipes, the way taskrt-mcp serves stdio.
func stdioRPC(t *testing.T, srv *mcpserver.Server) *rpc {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	c := &rpc{t: t, w: sw, serving: &serving{done: make(chan struct{})}, waiting: map[int]chan json.RawMessage{},
		notes: map[string][]json.RawMessage{}, noted: make(chan struct{}), readErr: make(chan error, 1)}
	go func() {
		defer close(c.serving.done)
		c.serving.err = srv.Serve(bg, &mcp.IOTransport{Reader: cr, Writer: cw})
	}()
	go func() {
		sc := bufio.NewScanner(sr)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			line := json.RawMessage(append([]byte(nil), sc.Bytes()...))
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			c.mu.Lock()
			switch {
			case m.Method != "" && m.ID == nil:
				c.notes[m.Method] = append(c.notes[m.Method], m.Params)
				close(c.noted)
				c.noted = make(chan struct{})
			case m.ID != nil && m.Method == "":
				if ch, ok := c.waiting[*m.ID]; ok {
					ch <- line
					delete(c.waiting, *m.ID)
				}
			}
			c.mu.Unlock()
		}
		c.readErr <- sc.Err()
	}()
	t.Cleanup(func() { c.end() })
	return c
}

// httpRPC is a session over streamable HTTP at hs; initialize opens it, and it is
// deleted at the end of the test.
func httpRPC(t *testing.T, hs *httptest.Server) *rpc {
	c := &rpc{t: t, http: newRaw(t, hs, "")}
	t.Cleanup(c.end)
	return c
}

// end closes the client's side of stdio and waits for Serve to return (every
// process of the session is gone by then).
func (c *rpc) end() {
	c.t.Helper()
	if c.w == nil {
		if c.http != nil && c.http.sid != "" {
			c.http.delete()
			c.http.sid = ""
		}
		return
	}
	_ = c.w.Close()
	if err := c.serving.wait(c.t); err != nil && err != io.EOF {
		c.t.Errorf("Serve: %v", err)
	}
}

// send sends a request and returns a channel for its response.
func (c *rpc) send(method, params string) (int, <-chan json.RawMessage) {
	c.t.Helper()
	c.mu.Lock() // a client may send from several goroutines (claudeLike's pollers)
	c.next++
	id := c.next
	c.mu.Unlock()
	var headers []func(*http.Request)
	if c.sessionless != "" {
		rest := strings.TrimPrefix(strings.TrimSpace(params), "{")
		if strings.TrimSpace(rest) != "}" {
			rest = "," + rest
		}
		caps := c.caps
		if caps == "" {
			caps = `{}`
		}
		params = "{" + metaWith(c.sessionless, caps) + rest
		var named struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(params), &named)
		headers = append(headers, func(r *http.Request) {
			r.Header.Set("Mcp-Protocol-Version", c.sessionless)
			r.Header.Set("Mcp-Method", method)
			if method == "tools/call" {
				r.Header.Set("Mcp-Name", named.Name)
			}
			var task struct {
				TaskID string `json:"taskId"`
			}
			if json.Unmarshal([]byte(params), &task) == nil && task.TaskID != "" {
				r.Header.Set("Mcp-Name", task.TaskID) // the tasks extension's routing header
			}
		})
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	ch := make(chan json.RawMessage, 1)
	if c.http != nil {
		go func() {
			code, resp, err := c.http.post(bg, body, headers...)
			var rpcErr struct {
				Error json.RawMessage `json:"error"`
			}
			if err == nil && code != http.StatusOK && json.Unmarshal([]byte(sseData(resp)), &rpcErr) == nil && rpcErr.Error != nil {
				code = http.StatusOK // a JSON-RPC error the SDK answers with a 4xx status
			}
			if err != nil || code != http.StatusOK {
				resp = fmt.Sprintf(`{"error":{"code":0,"message":"HTTP %d: %v %s"}}`, code, err, strings.TrimSpace(resp))
			}
			ch <- json.RawMessage(sseData(resp))
		}()
		return id, ch
	}
	c.mu.Lock()
	c.waiting[id] = ch
	_, err := io.WriteString(c.w, body+"\n") // one request per write, whole
	c.mu.Unlock()
	if err != nil {
		c.t.Error(err)
	}
	return id, ch
}

// await waits for a response.
func (c *rpc) await(ch <-chan json.RawMessage) response {
	c.t.Helper()
	select {
	case raw := <-ch:
		var r response
		if err := json.Unmarshal(raw, &r); err != nil {
			c.t.Fatalf("response %s: %v", raw, err)
		}
		r.raw = raw
		return r
	case <-time.After(time.Minute):
		c.t.Fatal("no response within a minute")
		return response{}
	}
}

// call sends a request and waits for its response.
func (c *rpc) call(method, params string) response {
	c.t.Helper()
	_, ch := c.send(method, params)
	return c.await(ch)
}

// ok is call that fails the test on an error response, and decodes the result
// into v.
func (c *rpc) ok(method, params string, v any) response {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error != nil {
		c.t.Fatalf("%s %s: error %d %s", method, params, r.Error.Code, r.Error.Message)
	}
	if v != nil {
		if err := json.Unmarshal(r.Result, v); err != nil {
			c.t.Fatalf("%s result %s: %v", method, r.Result, err)
		}
	}
	return r
}

func (c *rpc) notify(method string) {
	c.t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method)
	if c.http != nil {
		c.http.mustPost(body, http.StatusAccepted)
		return
	}
	if _, err := io.WriteString(c.w, body+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// initialize opens the session at version and returns the server's capabilities.
func (c *rpc) initialize(version string) map[string]json.RawMessage {
	c.t.Helper()
	var res struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	c.ok("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"rpc","version":"1"}}`, version), &res)
	if res.ProtocolVersion != version {
		c.t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, version)
	}
	c.notify("notifications/initialized")
	return res.Capabilities
}

// awaitNote waits for a notification of method whose params satisfy match.
func (c *rpc) awaitNote(method string, match func(json.RawMessage) bool) json.RawMessage {
	c.t.Helper()
	deadline := time.After(time.Minute)
	for {
		c.mu.Lock()
		for _, p := range c.notes[method] {
			if match(p) {
				c.mu.Unlock()
				return p
			}
		}
		noted := c.noted
		c.mu.Unlock()
		select {
		case <-noted:
		case <-deadline:
			c.t.Fatalf("no %s notification matched within a minute", method)
		}
	}
}

// noteCount counts the notifications of method received so far.
func (c *rpc) noteCount(method string, match func(json.RawMessage) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.notes[method] {
		if match(p) {
			n++
		}
	}
	return n
}

type response struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw json.RawMessage
}
