package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// metaFor is the per-request _meta a sessionless (SEP-2575) client of version
// puts on every request.
func metaFor(version string) string { return metaWith(version, `{}`) }

// metaWith is metaFor with the client capabilities caps (a JSON object).
func metaWith(version, caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// newerRevision is a revision after the newest one served.
const newerRevision = "2099-01-01"

// probesNewer are the first requests a client of a revision newer than the
// server's may send: server/discover, or straight away an ordinary request with
// the per-request _meta. (A 2026-07-28 client is served directly: see
// sessionless_test.go.)
var probesNewer = []struct{ name, method, tool, body string }{
	{"server/discover", "server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + metaFor(newerRevision) + `}}`},
	{"tools/list with newer _meta", "tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + metaFor(newerRevision) + `}}`},
	{"tools/call with newer _meta", "tools/call", "task_list", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"task_list","arguments":{},` + metaFor(newerRevision) + `}}`},
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	ID    int `json:"id"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// checkFallback checks that resp is the -32022 error whose supported list lets a
// newer client fall back: it names the sessionless 2026-07-28 and the session
// revision 2025-11-25, and nothing newer.
func checkFallback(t *testing.T, resp string) {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal([]byte(resp), &e); err != nil || e.Error == nil {
		t.Fatalf("response %q: want a JSON-RPC error (%v)", resp, err)
	}
	if got, want := e.Error.Code, mcp.CodeUnsupportedProtocolVersion; got != want {
		t.Fatalf("error code = %d (%s), want %d", got, e.Error.Message, want)
	}
	var data mcp.UnsupportedProtocolVersionData
	if err := json.Unmarshal(e.Error.Data, &data); err != nil {
		t.Fatalf("error data %s: %v", e.Error.Data, err)
	}
	if data.Requested != newerRevision {
		t.Errorf("requested = %q, want %s", data.Requested, newerRevision)
	}
	for _, want := range []string{"2026-07-28", "2025-11-25"} {
		if !slices.Contains(data.Supported, want) {
			t.Errorf("supported = %q, want it to name %s, a revision to fall back to", data.Supported, want)
		}
	}
	for _, v := range data.Supported {
		if v > "2026-07-28" {
			t.Errorf("supported = %q names %s, which is not served", data.Supported, v)
		}
	}
}

// TestFallbackFromNewerStdio pins what a client that tries a revision newer than
// the server's first meets on a stream transport: -32022 with a supported list,
// and, on the same connection, a 2025-11-25 session that works. (Before the
// sessionless revision was served, this was what a 2026-07-28 client met: Claude
// Code 2.1.328 probes it first and fell back so.)
func TestFallbackFromNewerStdio(t *testing.T) {
	for _, p := range probesNewer {
		t.Run(p.name+" gets -32022, then the fallback session works", func(t *testing.T) {
			srv := newServer(t)
			cr, sw := io.Pipe()
			sr, cw := io.Pipe()
			sv := &serving{done: make(chan struct{})}
			go func() {
				defer close(sv.done)
				sv.err = srv.Serve(bg, &mcp.IOTransport{Reader: cr, Writer: cw})
			}()
			lines := bufio.NewScanner(sr)
			lines.Buffer(nil, 1<<20)
			exchange := func(req string) string {
				t.Helper()
				if _, err := io.WriteString(sw, req+"\n"); err != nil {
					t.Fatal(err)
				}
				if req != "" && !strings.Contains(req, `"id"`) {
					return ""
				}
				if !lines.Scan() {
					t.Fatalf("no response to %s: %v", req, lines.Err())
				}
				return lines.Text()
			}
			checkFallback(t, exchange(p.body))

			resp := exchange(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fallback","version":"1"}}}`)
			var init struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(resp), &init); err != nil || init.Result.ProtocolVersion != "2025-11-25" {
				t.Fatalf("initialize after the probe: %s (%v), want protocolVersion 2025-11-25", resp, err)
			}
			exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			resp = exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo fell back"}}}`)
			var call struct {
				Result mcp.CallToolResult `json:"result"`
			}
			if err := json.Unmarshal([]byte(resp), &call); err != nil {
				t.Fatalf("tools/call: %s: %v", resp, err)
			}
			if got, want := texts(t, &call.Result), []string{"fell back\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
				t.Errorf("bash in the fallback session = %q, want %q", got, want)
			}
			sw.Close()
			if err := sv.wait(t); err != nil {
				t.Errorf("Serve: %v", err)
			}
			sr.Close()
		})
	}
}

// TestFallbackFromNewerHTTP pins the same over streamable HTTP: a probe POST of a
// newer revision gets -32022 with a supported list (and no session), and a
// 2025-11-25 session opened after it works.
func TestFallbackFromNewerHTTP(t *testing.T) {
	for _, p := range probesNewer {
		t.Run(p.name+" gets -32022, then the fallback session works", func(t *testing.T) {
			srv := newServer(t)
			hs := httpServer(t, srv, "", nil)
			r := newRaw(t, hs, "")
			code, resp, err := r.post(bg, p.body, func(req *http.Request) {
				req.Header.Set("Mcp-Protocol-Version", newerRevision)
				req.Header.Set("Mcp-Method", p.method)
				if p.tool != "" {
					req.Header.Set("Mcp-Name", p.tool)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			checkFallback(t, sseData(resp))
			if code != http.StatusOK && code != http.StatusBadRequest {
				t.Errorf("probe status = %d, want 200 or 400", code)
			}
			if r.sid != "" {
				t.Errorf("the probe opened a session (%s)", r.sid)
			}
			r.initialize()
			if got, want := r.callTool(2, "bash", `{"command":"echo fell back"}`), []string{"fell back\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
				t.Errorf("bash in the fallback session = %q, want %q", got, want)
			}
			if got := r.delete(); got != http.StatusNoContent && got != http.StatusOK {
				t.Errorf("DELETE = %d", got)
			}
		})
	}
}

// TestWithoutSessionless pins the option: a 2026-07-28 probe gets -32022 listing
// only the revisions with sessions, and the client falls back to a session.
func TestWithoutSessionless(t *testing.T) {
	for _, tr := range wires {
		t.Run(tr.name+"/a 2026-07-28 probe falls back to a session", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithoutSessionless())
			c := sessionlessRPC(t, srv, tr.open)
			r := c.call("server/discover", `{}`)
			if r.Error == nil || r.Error.Code != mcp.CodeUnsupportedProtocolVersion {
				t.Fatalf("server/discover = %s, want -32022", r.raw)
			}
			var data mcp.UnsupportedProtocolVersionData
			if err := json.Unmarshal(r.Error.Data, &data); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(data.Supported, "2025-11-25") || slices.ContainsFunc(data.Supported, func(v string) bool { return v >= "2026-07-28" }) {
				t.Errorf("supported = %q, want the session revisions only", data.Supported)
			}
			s := session(t, srv, tr.open)
			if got := s.tool("bash", `{"command":"echo fell back"}`).texts(); !slices.Equal(got, []string{"fell back\n[status: completed, exit code: 0]"}) {
				t.Errorf("the fallback session's bash = %q", got)
			}
		})
	}
}
