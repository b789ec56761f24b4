package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// fakeModel is an httptest fake of the Messages API (POST /v1/messages, the beta
// variant too), answering in non-streaming JSON. It plays a scripted model: each
// request is answered by the first rule whose trigger the request's last message
// contains (its text, tool results included). No network.
type fakeModel struct {
	srv   *httptest.Server
	rules []rule

	mu       sync.Mutex // protects requests and n
	requests []map[string]any
	n        int // ids handed out
}

// rule is one scripted step: when the last message contains when, reply.
type rule struct {
	when  string
	reply func() reply
}

// reply is one assistant message: text, tool calls, and its stop reason.
type reply struct {
	text  string
	calls []call
}

type call struct {
	name string
	args string // JSON
}

func newFakeModel(rules ...rule) *fakeModel {
	f := &fakeModel{rules: rules}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

func (f *fakeModel) URL() string { return f.srv.URL }
func (f *fakeModel) Close()      { f.srv.Close() }

// Requests are the request bodies received, decoded.
func (f *fakeModel) Requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.requests...)
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad body"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	last := lastMessageText(req)
	for _, rl := range f.rules {
		if strings.Contains(last, rl.when) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(f.message(rl.reply()))
			return
		}
	}
	http.Error(w, fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":"the fake model has no rule for %q"}}`, last), http.StatusBadRequest)
}

// message is r as a Messages API response.
func (f *fakeModel) message(r reply) map[string]any {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	var content []any
	if r.text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.text})
	}
	for i, c := range r.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.name, "input": json.RawMessage(c.args)})
	}
	stop := "end_turn"
	if len(r.calls) > 0 {
		stop = "tool_use"
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-fake",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	}
}

// lastMessageText is every string under a "text" key in the request's last message.
func lastMessageText(req map[string]any) string {
	msgs, _ := req["messages"].([]any)
	if len(msgs) == 0 {
		return ""
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "text" {
					b.WriteString(s)
					b.WriteByte('\n')
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(msgs[len(msgs)-1])
	if m, ok := msgs[len(msgs)-1].(map[string]any); ok {
		if s, ok := m["content"].(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}
