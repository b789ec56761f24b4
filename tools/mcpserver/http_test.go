//go:build linux

package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

var transcriptDir = flag.String("transcript", "", "write the HTTP transcripts of the tests that record one into `DIR`")

const testToken = "s3cret-token"

// httpServer serves srv's HTTP handler at /mcp on a loopback test server, behind
// RequireToken when token is set, recorded when rec is not nil.
func httpServer(t *testing.T, srv *mcpserver.Server, token string, rec *recorder) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, srv.HTTPHandler())
	var h http.Handler = mux
	if token != "" {
		h = mcpserver.RequireToken(token, h)
	}
	if rec != nil {
		h = rec.wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

// httpClient is an HTTP client of its own (its idle connections are closed at the
// end of the test) that sends token as a bearer token when it is set.
func httpClient(t *testing.T, token string) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: bearer{token: token, base: tr}}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// connectHTTP connects an SDK client to hs; it is closed (DELETE) at the end of the
// test.
func connectHTTP(t *testing.T, hs *httptest.Server, token string) *client {
	t.Helper()
	mc, c := newClient()
	cs, err := mc.Connect(bg, &mcp.StreamableClientTransport{Endpoint: hs.URL + mcpserver.Path, HTTPClient: httpClient(t, token)}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return c
}

// ---- raw HTTP, for what the SDK client cannot do (disconnect mid-call, send
// oversized or forged requests) ----

// raw is a hand-driven streamable HTTP session.
type raw struct {
	t   *testing.T
	url string
	hc  *http.Client
	sid string
}

func newRaw(t *testing.T, hs *httptest.Server, token string) *raw {
	return &raw{t: t, url: hs.URL + mcpserver.Path, hc: httpClient(t, token)}
}

// post sends one JSON-RPC message and returns the status and the body.
func (r *raw) post(ctx context.Context, body string, edit ...func(*http.Request)) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.sid != "" {
		req.Header.Set("Mcp-Session-Id", r.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for _, e := range edit {
		e(req)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		r.sid = sid
	}
	return resp.StatusCode, string(b), err
}

// mustPost is post that fails the test on a transport error or an unexpected status.
func (r *raw) mustPost(body string, want int) string {
	r.t.Helper()
	code, resp, err := r.post(bg, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if code != want {
		r.t.Fatalf("POST %s: status %d (%s), want %d", body, code, strings.TrimSpace(resp), want)
	}
	return resp
}

// initialize opens the session.
func (r *raw) initialize() {
	r.t.Helper()
	r.mustPost(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, http.StatusOK)
	if r.sid == "" {
		r.t.Fatal("initialize returned no session id")
	}
	r.mustPost(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted)
}

// callTool calls a tool and returns its result's text items.
func (r *raw) callTool(id int, name, args string) []string {
	r.t.Helper()
	body := r.mustPost(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args), http.StatusOK)
	var msg struct {
		Result mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(sseData(body)), &msg); err != nil {
		r.t.Fatalf("%v in %q", err, body)
	}
	return texts(r.t, &msg.Result)
}

// delete ends the session and returns the status.
func (r *raw) delete() int {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodDelete, r.url, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", r.sid)
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sseData returns the data of the last event of an SSE body (or the body itself
// when it is plain JSON).
func sseData(body string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = d
		}
	}
	if last == "" {
		return body
	}
	return last
}

// ---- the recorder ----

// recorder keeps a transcript of the HTTP exchanges: each request when it arrives,
// each response (status and body, an SSE stream whole) when it ends.
type recorder struct {
	mu    sync.Mutex // protects lines
	lines []string
	start time.Time
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (rec *recorder) add(format string, a ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.lines = append(rec.lines, fmt.Sprintf("%6.3fs ", time.Since(rec.start).Seconds())+fmt.Sprintf(format, a...))
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sid := r.Header.Get("Mcp-Session-Id")
		who := "session " + short(sid)
		if sid == "" {
			who = "new session"
		}
		rec.add("→ %s %s (%s) %s", r.Method, r.URL.Path, who, strings.TrimSpace(string(body)))
		cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
		cw.emit = func(chunk string) {
			if sid == "" {
				sid = cw.Header().Get("Mcp-Session-Id")
			}
			rec.add("← %d %s (session %s) %s", cw.status, r.Method, short(sid), chunk)
		}
		h.ServeHTTP(cw, r)
		cw.Flush()
		if !cw.emitted {
			cw.emit("")
		}
	})
}

// captureWriter records a response: each event of an event stream as it is
// flushed (its data payloads), any other body once whole.
type captureWriter struct {
	http.ResponseWriter
	status  int
	emit    func(string)
	emitted bool
	mu      sync.Mutex // protects body
	body    bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.body.Write(b)
	c.mu.Unlock()
	return c.ResponseWriter.Write(b)
}

func (c *captureWriter) Flush() {
	c.mu.Lock()
	chunk := c.body.String()
	c.body.Reset()
	c.mu.Unlock()
	if strings.HasPrefix(c.Header().Get("Content-Type"), "text/event-stream") {
		var data []string
		for _, line := range strings.Split(chunk, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
		chunk = strings.Join(data, " ")
	}
	if chunk = strings.TrimSpace(chunk); chunk != "" {
		c.emit(chunk)
		c.emitted = true
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// short abbreviates a session id for the transcript.
func short(sid string) string {
	if sid == "" {
		return "none"
	}
	if len(sid) > 8 {
		return sid[:8]
	}
	return sid
}

// save writes the transcript to -transcript DIR/name, or logs it.
func (rec *recorder) save(t *testing.T, name string) {
	rec.mu.Lock()
	text := strings.Join(rec.lines, "\n") + "\n"
	rec.mu.Unlock()
	if *transcriptDir == "" {
		t.Logf("transcript:\n%s", text)
		return
	}
	if err := os.WriteFile(filepath.Join(*transcriptDir, name), []byte(text), 0o644); err != nil {
		t.Error(err)
	}
}

// ---- the tests ----

func TestHTTPSessionsIsolated(t *testing.T) {
	srv := newServer(t)
	rec := newRecorder()
	hs := httpServer(t, srv, testToken, rec)
	a := connectHTTP(t, hs, testToken)
	b := connectHTTP(t, hs, testToken)
	a.setLogLevel(t)
	gate := fifo(t)
	a.call(t, "bash", map[string]any{"command": "echo compiling; cat " + gate, "run_in_background": true})

	for _, tc := range []struct {
		name, tool string
		args       map[string]any
	}{
		{"another session's task reads like an unknown id", "task_output", map[string]any{"task_id": "bash-1"}},
		{"another session's task cannot be killed", "task_kill", map[string]any{"task_id": "bash-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.call(t, tc.tool, tc.args)
			if got, want := texts(t, res), []string{"task not found: bash-1"}; !slices.Equal(got, want) || !res.IsError {
				t.Errorf("got %q (isError %v), want %q as a tool error", got, res.IsError, want)
			}
		})
	}
	t.Run("each session lists its own tasks", func(t *testing.T) {
		if got, want := texts(t, b.call(t, "task_list", map[string]any{})), []string{"(no background tasks)"}; !slices.Equal(got, want) {
			t.Errorf("b's list = %q, want %q", got, want)
		}
		if got, want := texts(t, a.call(t, "task_list", map[string]any{})), []string{"bash-1 [bash] running — echo compiling; cat " + gate}; !slices.Equal(got, want) {
			t.Errorf("a's list = %q, want %q", got, want)
		}
	})
	t.Run("the notice goes to the owning session only", func(t *testing.T) {
		release(t, gate, "done")
		notice := a.nextLog(t).Data
		if got := texts(t, b.call(t, "task_list", map[string]any{})); len(got) != 1 {
			t.Errorf("b's next result = %q, want no notice", got)
		}
		got := texts(t, a.call(t, "task_output", map[string]any{"task_id": "bash-9"}))
		if len(got) != 2 || got[1] != notice {
			t.Errorf("a's next result = %q, want the notice %q appended", got, notice)
		}
		if got, want := texts(t, a.call(t, "task_output", map[string]any{"task_id": "bash-1"})), []string{"compiling\ndone\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
			t.Errorf("a collects %q, want %q", got, want)
		}
	})
	_ = a.cs.Close()
	_ = b.cs.Close()
	rec.save(t, "http-isolation.txt")
}

func TestHTTPDelete(t *testing.T) {
	srv := newServer(t)
	hs := httpServer(t, srv, "", nil)
	c := connectHTTP(t, hs, "")
	mark := newMark(t)
	for range 2 {
		c.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
	}
	fg := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marked(mark, "sleep 300")}})
		fg <- err
	}()
	awaitMarked(t, mark, 3)

	// A poller of its own notes when the last process is gone, to the millisecond.
	goneAt := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if len(markedPIDs(mark)) == 0 {
				goneAt <- time.Now()
				return
			}
		}
	}()
	r := &raw{t: t, url: hs.URL + mcpserver.Path, hc: httpClient(t, ""), sid: c.cs.ID()}
	start := time.Now()
	if code := r.delete(); code != http.StatusNoContent {
		t.Fatalf("DELETE: status %d, want 204", code)
	}
	answered := time.Since(start)
	t.Run("DELETE answers once every process of the session is gone", func(t *testing.T) {
		assertNoMarked(t, mark)
	})
	gone := (<-goneAt).Sub(start)
	t.Logf("DELETE → last process gone: %v (DELETE answered after %v)", gone.Round(time.Millisecond), answered.Round(time.Millisecond))
	t.Run("the call in flight fails", func(t *testing.T) {
		if err := <-fg; err == nil {
			t.Error("the foreground call succeeded after its session was deleted")
		}
	})
	t.Run("a request after the session ended is refused", func(t *testing.T) {
		code, body, err := r.post(bg, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"task_list","arguments":{}}}`)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("POST after DELETE: %d %q %v, want 404", code, body, err)
		}
	})
}

func TestHTTPIdleTimeout(t *testing.T) {
	// Long enough that a loaded machine does not time the session out between
	// the requests that set it up.
	srv := newServer(t, mcpserver.WithSessionTimeout(time.Second))
	hs := httpServer(t, srv, "", nil)
	r := newRaw(t, hs, "")
	r.initialize()
	mark := newMark(t)
	for i := range 2 {
		r.callTool(2+i, "bash", fmt.Sprintf(`{"command":%q,"run_in_background":true}`, marked(mark, "sleep 300")))
	}
	awaitMarked(t, mark, 2)
	t.Run("an idle session's processes are killed", func(t *testing.T) {
		awaitGone(t, mark)
	})
	t.Run("a request after the session timed out is refused", func(t *testing.T) {
		// The owner is disposed once the session's connection is closed, so the
		// SDK answers 404 by now (session closing, or session not found).
		code, body, err := r.post(bg, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("status %d (%q, %v), want 404", code, body, err)
		}
	})
}

func TestHTTPDisconnectMidCall(t *testing.T) {
	srv := newServer(t)
	hs := httpServer(t, srv, "", nil)
	r := newRaw(t, hs, "")
	r.initialize()
	mark := newMark(t)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := r.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":%q}}}`, marked(mark, "sleep 300")))
		done <- err
	}()
	awaitMarked(t, mark, 1)
	cancel()
	<-done
	t.Run("the foreground command of a call whose request was closed is killed", func(t *testing.T) {
		awaitGone(t, mark)
	})
	t.Run("the session lives on", func(t *testing.T) {
		if got, want := r.callTool(3, "task_list", `{}`), []string{"(no background tasks)"}; !slices.Equal(got, want) {
			t.Errorf("task_list = %q, want %q", got, want)
		}
	})
	if code := r.delete(); code != http.StatusNoContent {
		t.Errorf("DELETE: status %d", code)
	}
}

func TestHTTPToken(t *testing.T) {
	srv := newServer(t)
	hs := httpServer(t, srv, testToken, nil)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	tests := []struct {
		name, auth string
		want       int
	}{
		{"a missing token is refused", "", http.StatusUnauthorized},
		{"a wrong token is refused", "Bearer not-the-token", http.StatusUnauthorized},
		{"a token that is a prefix of the right one is refused", "Bearer " + testToken[:4], http.StatusUnauthorized},
		{"a token without the Bearer scheme is refused", testToken, http.StatusUnauthorized},
		{"another scheme is refused", "Basic " + testToken, http.StatusUnauthorized},
		{"the right token is accepted", "Bearer " + testToken, http.StatusOK},
		{"the scheme is case-insensitive", "bearer " + testToken, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRaw(t, hs, "")
			agents := srv.Runtime().Stats().Agents
			code, body, err := r.post(bg, init, func(req *http.Request) {
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("status %d (%s), want %d", code, strings.TrimSpace(body), tc.want)
			}
			if code == http.StatusUnauthorized {
				if got := srv.Runtime().Stats().Agents; got != agents {
					t.Errorf("agents %d → %d: a refused request began a session", agents, got)
				}
			}
			if r.sid != "" {
				r.hc.Transport = bearer{token: testToken, base: r.hc.Transport}
				r.delete()
			}
		})
	}
	t.Run("the SDK client with a wrong token cannot connect", func(t *testing.T) {
		mc, _ := newClient()
		_, err := mc.Connect(bg, &mcp.StreamableClientTransport{Endpoint: hs.URL + mcpserver.Path, HTTPClient: httpClient(t, "wrong")}, sessionOpts)
		if err == nil {
			t.Error("Connect succeeded")
		}
	})
}

func TestHTTPRefusals(t *testing.T) {
	srv := newServer(t, mcpserver.WithMaxRequestBytes(2048))
	hs := httpServer(t, srv, "", nil)
	r := newRaw(t, hs, "")
	r.initialize()
	t.Run("an oversized body is refused and changes nothing", func(t *testing.T) {
		big := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo %s","run_in_background":true}}}`, strings.Repeat("x", 4096))
		code, body, err := r.post(bg, big)
		if err != nil || code != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d (%q, %v), want 413", code, body, err)
		}
		if got, want := r.callTool(3, "task_list", `{}`), []string{"(no background tasks)"}; !slices.Equal(got, want) {
			t.Errorf("task_list = %q, want %q", got, want)
		}
	})
	t.Run("a Host that is not loopback is refused on a loopback address (DNS rebinding)", func(t *testing.T) {
		agents := srv.Runtime().Stats().Agents
		other := newRaw(t, hs, "")
		code, body, err := other.post(bg, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			func(req *http.Request) { req.Host = "attacker.example" })
		if err != nil || code != http.StatusForbidden {
			t.Errorf("status %d (%q, %v), want 403", code, body, err)
		}
		if got := srv.Runtime().Stats().Agents; got != agents {
			t.Errorf("agents %d → %d", agents, got)
		}
	})
	t.Run("a DELETE with a foreign Host does not end the session", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodDelete, r.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "attacker.example"
		req.Header.Set("Mcp-Session-Id", r.sid)
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d, want 403", resp.StatusCode)
		}
		if got := r.callTool(4, "task_list", `{}`); len(got) != 1 {
			t.Errorf("task_list after the refused DELETE = %q", got)
		}
	})
	t.Run("requests are refused once the server is closing", func(t *testing.T) {
		if err := srv.Close(bg); err != nil {
			t.Fatal(err)
		}
		code, _, err := r.post(bg, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"task_list","arguments":{}}}`)
		if err != nil || code != http.StatusServiceUnavailable {
			t.Errorf("status %d (%v), want 503", code, err)
		}
	})
}
