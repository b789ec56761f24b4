// Package sessionless is a minimal client of the MCP sessionless revision
// (2026-07-28) over streamable HTTP: one tools/call per request, its answer
// parsed from a JSON body or the last event of an SSE stream. It exists for the
// tests and figures that drive taskrt-mcp processes; it is not a general client.
package sessionless

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Version is the revision the calls name.
const Version = "2026-07-28"

// Result is one tools/call's answer: the text items and structured content of
// its result, or the JSON-RPC error's message.
type Result struct {
	Texts      []string
	IsError    bool
	Structured map[string]any
	RPCError   string
}

// Text is the text items joined by newlines.
func (r Result) Text() string { return strings.Join(r.Texts, "\n") }

var ids atomic.Int64

// Call sends one tools/call of tool with args to the MCP endpoint url with hc
// (nil: http.DefaultClient). An error is a failure of the request itself (the
// server died during the call, an answer that is not JSON-RPC); a JSON-RPC error
// is Result.RPCError.
func Call(ctx context.Context, hc *http.Client, url, tool string, args map[string]any) (Result, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    Version,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "taskrt-sessionless", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}})
	if err != nil {
		return Result{}, err
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, ids.Add(1), params)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", Version)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := hc.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{}, err
	}
	data := string(raw)
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
		}
	}
	var msg struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		return Result{}, fmt.Errorf("status %d, %v in %q", resp.StatusCode, err, raw)
	}
	if msg.Error != nil {
		return Result{RPCError: msg.Error.Message}, nil
	}
	out := Result{IsError: msg.Result.IsError, Structured: msg.Result.StructuredContent}
	for _, c := range msg.Result.Content {
		out.Texts = append(out.Texts, c.Text)
	}
	return out, nil
}
