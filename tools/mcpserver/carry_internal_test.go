package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKDropsTaskParam pins why carry exists: go-sdk v1.8.0's tools/call params
// have no task field, so its decoder drops params.task; _meta survives.
func TestSDKDropsTaskParam(t *testing.T) {
	var p mcp.CallToolParamsRaw
	if err := json.Unmarshal([]byte(`{"name":"bash","arguments":{},"task":{"ttl":5}}`), &p); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "ttl") {
		t.Fatalf("go-sdk now keeps params.task (%s): carry.go can go", b)
	}
	carried := carry([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{},"task":{"ttl":5}}}`), "")
	var msg struct {
		Params mcp.CallToolParamsRaw `json:"params"`
	}
	if err := json.Unmarshal(carried, &msg); err != nil {
		t.Fatal(err)
	}
	if got, ok := msg.Params.Meta[metaTask].(map[string]any); !ok || got["ttl"] != float64(5) {
		t.Errorf("carried _meta = %v, want %s: {ttl: 5}", msg.Params.Meta, metaTask)
	}
}

func TestCarry(t *testing.T) {
	tests := []struct{ name, in, stamp, want string }{
		{"a task param moves into _meta",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","task":{"ttl":5}}}`, "k",
			`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"taskrt/task":{"ttl":5}},"name":"bash"}}`},
		{"a client's own carried keys are dropped",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","_meta":{"taskrt/task":{},"taskrt/stream":"x","progressToken":1}}}`, "k",
			`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"progressToken":1},"name":"bash"}}`},
		{"initialize is stamped with the stream, over a forged stamp",
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","_meta":{"taskrt/stream":"forged"}}}`, "k",
			`{"id":1,"jsonrpc":"2.0","method":"initialize","params":{"_meta":{"taskrt/stream":"k"},"protocolVersion":"2025-11-25"}}`},
		{"a batch is carried message by message",
			`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","task":{}}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, "k",
			`[{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"taskrt/task":{}},"name":"bash"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
		{"other methods pass untouched",
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"task":{}}}`, "k",
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"task":{}}}`},
		{"what is not JSON passes untouched", `{"method":"tools/call", oops`, "k", `{"method":"tools/call", oops`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(carry([]byte(tc.in), tc.stamp)); got != tc.want {
				t.Errorf("carry(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestStreamReader pins the stdio reader: lines are carried, one per line; a line
// longer than maxCarriedLine passes as it came.
func TestStreamReader(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","task":{},"arguments":{"command":"` + strings.Repeat("x", maxCarriedLine) + `"}}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","task":{}}}` + "\n" + long + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	st := newStream(io.NopCloser(strings.NewReader(in)), nopCloser{io.Discard})
	got, err := io.ReadAll(streamReader{st})
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(got, []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	if want := `{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"taskrt/task":{}},"name":"bash"}}`; string(lines[0]) != want {
		t.Errorf("line 1 = %s, want %s", lines[0], want)
	}
	if string(lines[1]) != long {
		t.Errorf("the long line changed (%d bytes, want %d as sent)", len(lines[1]), len(long))
	}
	if want := `{"jsonrpc":"2.0","method":"notifications/initialized"}`; string(lines[2]) != want {
		t.Errorf("line 3 = %s, want %s", lines[2], want)
	}
}

// TestSDKVersion pins the go-sdk version whose internals carry.go, the result
// patches (patched) and the stateless HTTP routing rely on: a newer one may model
// tasks itself, or change how it decodes, marshals and routes. Re-check them, and
// this test's siblings, before moving the pin.
func TestSDKVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/modelcontextprotocol/go-sdk" {
			got = f[1]
		}
	}
	if got != "v1.8.0" {
		t.Errorf("go.mod requires go-sdk %q, want v1.8.0 (see the comment)", got)
	}
}
