package mcpserver

import (
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools"
)

// toResult is a tool Result, with the session's notices, as an MCP result, such
// that every part a client may show the model carries everything the model must
// read (Claude Code and Codex show structuredContent instead of content when a
// result has it):
//
//   - content: the text as one text item, then one text item per notice;
//   - structuredContent, for a result with structured data (a background Handle):
//     the data's own fields unchanged ("kind", "task_id"), plus "message", the
//     text, and "notices", the notices (absent when there are none).
//
// A tool error is isError. No tool declares an outputSchema, which would oblige
// every result of the tool to carry structuredContent — and these clients would then
// show the model the structured part of plain results too.
func toResult(r tools.Result, notices []string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
	for _, text := range notices {
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	if r.Data != nil {
		res.StructuredContent = structured(r, notices)
	}
	return res
}

// appendNotices adds notices to an MCP result built earlier (a protocol-level
// task's stored result): to its content, and to its structuredContent when it has
// one, so that they reach the model whichever part its client shows.
func appendNotices(res *mcp.CallToolResult, notices []string) {
	if len(notices) == 0 {
		return
	}
	res.Content = slices.Clone(res.Content)
	for _, text := range notices {
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	switch sc := res.StructuredContent.(type) {
	case nil:
	case handleResult:
		sc.Notices = append(slices.Clone(sc.Notices), notices...)
		res.StructuredContent = sc
	case scopedHandle:
		sc.Notices = append(slices.Clone(sc.Notices), notices...)
		res.StructuredContent = sc
	default:
		m := map[string]any{}
		if b, err := json.Marshal(sc); err == nil {
			_ = json.Unmarshal(b, &m)
		}
		prior, _ := m["notices"].([]any)
		for _, n := range notices {
			prior = append(prior, n)
		}
		m["notices"] = prior
		res.StructuredContent = m
	}
}

// handleResult is a background Handle as structuredContent: the handle's fields
// first, as programs read them, then what the model must read.
type handleResult struct {
	tools.Handle
	Message string   `json:"message"`
	Notices []string `json:"notices,omitempty"`
}

// structured is r's structured data with the text and the notices added (see
// toResult).
func structured(r tools.Result, notices []string) any {
	if h, ok := r.Data.(tools.Handle); ok {
		return handleResult{Handle: h, Message: r.Text, Notices: notices}
	}
	// Other data, as a JSON object with the same two fields added.
	m := map[string]any{}
	if b, err := json.Marshal(r.Data); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	m["message"] = r.Text
	if len(notices) > 0 {
		m["notices"] = notices
	}
	return m
}
