//go:build linux

package mcpserver_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/internal/pagetest"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

// pageServer serves srv's MCP handler at /mcp and its live page at /, each behind
// its token guard when token is set.
func pageServer(t *testing.T, srv *mcpserver.Server, token string) *httptest.Server {
	t.Helper()
	var mcpH, pageH http.Handler = srv.HTTPHandler(), srv.PageHandler()
	if token != "" {
		mcpH = mcpserver.RequireToken(token, mcpH)
		pageH = mcpserver.RequireBrowserToken(token, pageH)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcpH)
	mux.Handle(mcpserver.PagePath, pageH)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// The page's wire format and an SSE client, as a browser reads them
// (internal/pagetest).
type (
	wireSnapshot = pagetest.Snapshot
	wireEnd      = pagetest.End
	sseMsg       = pagetest.Msg
	stream       = pagetest.Stream
)

var (
	openStream = pagetest.Open
	readTail   = pagetest.ReadTail
)

// decode reads m as event name with JSON data into a T.
func decode[T any](t *testing.T, m sseMsg, name string) T {
	t.Helper()
	return pagetest.Decode[T](t, m, name)
}

// ---- the tests: the Server as the page's source, and the embedder's entry points
// (the page itself is package livepage's, and tested there) ----

// TestPageSessions is the page fed by MCP sessions: their owners come and go as
// sessions begin and end, in the order they began, and their tasks are listed as
// theirs.
func TestPageSessions(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "")
	events := openStream(t, httpClient(t, ""), hs.URL+mcpserver.EventsPath)
	if snap := decode[wireSnapshot](t, events.Next(t), "snapshot"); len(snap.Agents) != 0 || len(snap.Tasks) != 0 {
		t.Fatalf("first snapshot = %+v, want empty", snap)
	}
	c := connectHTTP(t, hs, "")
	if ev := events.NextEvent(t); ev.Kind != "agent-registered" || ev.Agent != "mcp-1" {
		t.Fatalf("first event = %+v, want agent-registered mcp-1", ev)
	}
	connectHTTP(t, hs, "")
	if ev := events.NextEvent(t); ev.Kind != "agent-registered" || ev.Agent != "mcp-2" {
		t.Fatalf("second event = %+v, want agent-registered mcp-2", ev)
	}
	res := c.call(t, "bash", map[string]any{"command": "read l < " + fifo(t), "run_in_background": true})
	var h struct {
		ID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil || h.ID == "" {
		t.Fatalf("bash result %q: %v", structured(t, res), err)
	}
	c.call(t, "task_kill", map[string]any{"task_id": h.ID})
	// The process can die before the runtime hears that its Cancel was taken:
	// then the task settles with no stopping in between (actors/kill.go).
	if got := taskKinds(t, events, h.ID, "mcp-1"); got != "task-started task-stopping task-settled" && got != "task-started task-settled" {
		t.Errorf("events of %s = %q, want started, stopping (or not), settled", h.ID, got)
	}

	t.Run("a new page's snapshot lists the sessions in the order they began, with their tasks", func(t *testing.T) {
		snap := decode[wireSnapshot](t, openStream(t, httpClient(t, ""), hs.URL+mcpserver.EventsPath).Next(t), "snapshot")
		var agents []string
		for _, a := range snap.Agents {
			agents = append(agents, a.ID+" "+strconv.FormatBool(!a.Since.IsZero()))
		}
		if want := []string{"mcp-1 true", "mcp-2 true"}; !slices.Equal(agents, want) {
			t.Errorf("agents (with a start) = %q, want %q", agents, want)
		}
		var tasks []string
		for _, task := range snap.Tasks {
			tasks = append(tasks, task.ID+" "+task.Owner+" "+task.Status)
		}
		if want := []string{h.ID + " mcp-1 killed"}; !slices.Equal(tasks, want) {
			t.Errorf("tasks = %q, want %q", tasks, want)
		}
	})
	t.Run("a session's end comes after its tasks' events", func(t *testing.T) {
		if err := c.cs.Close(); err != nil {
			t.Fatal(err)
		}
		for {
			ev := events.NextEvent(t)
			if ev.Task != nil {
				t.Fatalf("task event %s of %s after every task settled", ev.Kind, ev.Task.ID)
			}
			if ev.Kind == "agent-disposed" && ev.Agent == "mcp-1" {
				return
			}
		}
	})
}

// taskKinds reads events until task id settled, all of them the task's and of
// owner, and returns their kinds but task-output (how many come is not in the
// contract).
func taskKinds(t *testing.T, events *stream, id, owner string) string {
	t.Helper()
	var kinds []string
	for len(kinds) == 0 || kinds[len(kinds)-1] != "task-settled" {
		ev := events.NextEvent(t)
		if ev.Task == nil || ev.Task.ID != id || ev.Agent != owner || ev.Task.Owner != owner {
			t.Fatalf("event %+v, want one of %s, owned by %s", ev, id, owner)
		}
		if ev.Kind != "task-output" {
			kinds = append(kinds, ev.Kind)
		}
	}
	return strings.Join(kinds, " ")
}

// TestPageServerClose: the page's streams end, and its requests are refused, once
// the Server closes.
func TestPageServerClose(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "")
	hc := httpClient(t, "")
	c := connectHTTP(t, hs, "")
	c.call(t, "bash", map[string]any{"command": "read l < " + fifo(t), "run_in_background": true})
	events := openStream(t, hc, hs.URL+mcpserver.EventsPath)
	decode[wireSnapshot](t, events.Next(t), "snapshot")
	tail := openStream(t, hc, hs.URL+mcpserver.TailPath+"?task=bash-1")
	if err := srv.Close(bg); err != nil {
		t.Fatal(err)
	}
	for _, m := range events.Rest(t) {
		if m.Event == "snapshot" {
			t.Errorf("a snapshot after the close: %s", m.Data)
		}
	}
	tail.Rest(t) // the kill's end, if the stream saw it before it closed
	resp, err := hc.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET / after Close: %d, want 503", resp.StatusCode)
	}
}

// tailURL is the tail of task id from offset off.
func tailURL(hs *httptest.Server, id messages.TaskID, off int64) string {
	return hs.URL + mcpserver.TailPath + "?task=" + string(id) + "&offset=" + strconv.FormatInt(off, 10)
}

func TestPageToken(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, testToken)
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, auth string
		want       int
	}{
		{"a missing token is refused, asking the browser for it", "", http.StatusUnauthorized},
		{"a wrong bearer token is refused", "Bearer nope", http.StatusUnauthorized},
		{"a wrong Basic password is refused", basic("operator", "nope"), http.StatusUnauthorized},
		{"the token as a Basic user name is refused", basic(testToken, ""), http.StatusUnauthorized},
		{"a prefix of the token is refused", basic("operator", testToken[:4]), http.StatusUnauthorized},
		{"the bearer token is accepted", "Bearer " + testToken, http.StatusOK},
		{"the token as the Basic password is accepted, whatever the user name", basic("anyone", testToken), http.StatusOK},
	}
	for _, tc := range tests {
		for _, path := range []string{"/", "/events", "/tail?task=bash-1"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				resp, err := httpClient(t, "").Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := tc.want
				if want == http.StatusOK && strings.HasPrefix(path, "/tail") {
					want = http.StatusNotFound // authorised; no such task
				}
				if resp.StatusCode != want {
					t.Errorf("status %d, want %d", resp.StatusCode, want)
				}
				if want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Basic realm="taskrt-mcp", charset="UTF-8"` {
					t.Errorf("WWW-Authenticate = %q, want a Basic challenge", resp.Header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	t.Run("the MCP endpoint still takes the bearer token only", func(t *testing.T) {
		r := newRaw(t, hs, "")
		code, _, err := r.post(bg, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			func(req *http.Request) { req.Header.Set("Authorization", basic("operator", testToken)) })
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("Basic on /mcp: %d (%v), want 401", code, err)
		}
	})
}

func TestPageNeverReports(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "")
	hc := httpClient(t, "")
	c, _ := serve(t, srv)
	c.setLogLevel(t)
	events := openStream(t, hc, hs.URL+mcpserver.EventsPath)
	decode[wireSnapshot](t, events.Next(t), "snapshot")
	// The command waits for the test, so that its notice cannot ride on the start's
	// own result.
	gate := fifo(t)
	res := c.call(t, "bash", map[string]any{"command": "read l < " + gate + "; echo done-output", "run_in_background": true})
	var h struct {
		ID messages.TaskID `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, res); len(got) != 1 {
		t.Fatalf("the start's result = %q, want its text only", got)
	}
	release(t, gate, "go")
	// The page watches the task to its end: events, then its whole tail.
	for {
		if ev := events.NextEvent(t); ev.Kind == "task-settled" && ev.Task.ID == string(h.ID) {
			break
		}
	}
	tail := openStream(t, hc, tailURL(hs, h.ID, 0))
	readTail(t, tail, 0, "done-output\n")
	if end := decode[wireEnd](t, tail.Next(t), "end"); end.Reason != "settled" || end.Status != "completed" {
		t.Fatalf("end = %+v", end)
	}
	// The notice is pending once it went out as a log message.
	if l := c.nextLog(t); !strings.Contains(fmt.Sprint(l.Data), string(h.ID)) {
		t.Fatalf("log message %v, want the notice of %s", l.Data, h.ID)
	}
	t.Run("the notice still reaches the model's next result", func(t *testing.T) {
		got := texts(t, c.call(t, "task_list", map[string]any{}))
		if len(got) != 2 || !strings.HasPrefix(got[1], "background task "+string(h.ID)+" ") {
			t.Errorf("task_list = %q, want the list and %s's notice", got, h.ID)
		}
	})
	t.Run("the model's task_output returns the whole output", func(t *testing.T) {
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": string(h.ID)}))
		if len(got) != 1 || !strings.HasPrefix(got[0], "done-output\n") {
			t.Errorf("task_output = %q, want done-output and the status", got)
		}
	})
}
