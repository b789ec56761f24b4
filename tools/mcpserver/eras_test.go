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
)

// meta2026 is the per-request _meta a 2026-07-28 (sessionless, SEP-2575) client
// puts on every request.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// probes2026 are the first requests a 2026-07-28 client may send a server it does
// not know: server/discover, or straight away an ordinary request with the
// per-request _meta.
var probes2026 = []struct{ name, method, tool, body string }{
	{"server/discover", "server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`},
	{"tools/list with 2026-07-28 _meta", "tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`},
	{"tools/call with 2026-07-28 _meta", "tools/call", "task_list", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"task_list","arguments":{},` + meta2026 + `}}`},
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
// 2026-07-28 client fall back: it names 2025-11-25 and no sessionless version.
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
	if data.Requested != "2026-07-28" {
		t.Errorf("requested = %q, want 2026-07-28", data.Requested)
	}
	if !slices.Contains(data.Supported, "2025-11-25") {
		t.Errorf("supported = %q, want it to name 2025-11-25, the version to fall back to", data.Supported)
	}
	for _, v := range data.Supported {
		if v >= "2026-07-28" {
			t.Errorf("supported = %q names sessionless %s", data.Supported, v)
		}
	}
}

// TestFallbackFrom2026Stdio pins what a client that tries 2026-07-28 first (Claude
// Code does) meets on a stream transport: -32022 with a supported list, and, on the
// same connection, a 2025-11-25 session that works.
func TestFallbackFrom2026Stdio(t *testing.T) {
	for _, p := range probes2026 {
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

// TestFallbackFrom2026HTTP pins the same over streamable HTTP: a sessionless probe
// POST gets -32022 with a supported list (and no session), and a 2025-11-25
// session opened after it works.
func TestFallbackFrom2026HTTP(t *testing.T) {
	for _, p := range probes2026 {
		t.Run(p.name+" gets -32022, then the fallback session works", func(t *testing.T) {
			srv := newServer(t)
			hs := httpServer(t, srv, "", nil)
			r := newRaw(t, hs, "")
			code, resp, err := r.post(bg, p.body, func(req *http.Request) {
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
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
