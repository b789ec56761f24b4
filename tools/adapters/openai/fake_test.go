package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// fakeModel is an httptest fake of the OpenAI API's Chat Completions (POST
// /v1/chat/completions) and Responses (POST /v1/responses) endpoints, answering in
// non-streaming JSON. It plays a scripted model: each request is answered by the
// first rule whose trigger the request's last message or input item contains. No
// network.
type fakeModel struct {
	srv   *httptest.Server
	rules []rule

	mu       sync.Mutex // protects requests and n
	requests []map[string]any
	n        int
}

// rule is one scripted step: when the last message contains when, reply.
type rule struct {
	when  string
	reply func() reply
}

// reply is one assistant turn: text, or function calls.
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

// BaseURL is what option.WithBaseURL takes.
func (f *fakeModel) BaseURL() string { return f.srv.URL + "/v1/" }
func (f *fakeModel) Close()          { f.srv.Close() }

// Requests are the request bodies received, decoded.
func (f *fakeModel) Requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.requests...)
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if r.Method != http.MethodPost || err != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.n++
	n := f.n
	f.mu.Unlock()
	last := lastText(req)
	var rep *reply
	for _, rl := range f.rules {
		if strings.Contains(last, rl.when) {
			r := rl.reply()
			rep = &r
			break
		}
	}
	if rep == nil {
		http.Error(w, fmt.Sprintf(`{"error":{"message":"the fake model has no rule for %q","type":"invalid_request_error"}}`, last), http.StatusBadRequest)
		return
	}
	var out any
	switch r.URL.Path {
	case "/v1/chat/completions":
		out = chatCompletion(n, *rep)
	case "/v1/responses":
		out = response(n, *rep)
	default:
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func chatCompletion(n int, r reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	if r.text != "" {
		msg["content"] = r.text
	}
	if len(r.calls) > 0 {
		finish = "tool_calls"
		var calls []any
		for i, c := range r.calls {
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 0, "model": "gpt-fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg, "logprobs": nil}}}
}

func response(n int, r reply) map[string]any {
	var output []any
	if r.text != "" {
		output = append(output, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": r.text, "annotations": []any{}}}})
	}
	for i, c := range r.calls {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", n, i), "call_id": fmt.Sprintf("call_%d_%d", n, i),
			"name": c.name, "arguments": c.args, "status": "completed"})
	}
	return map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 0, "model": "gpt-fake", "status": "completed",
		"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}}
}

// lastText is every string under a "text", "content" or "output" key in the
// request's last message (Chat Completions) or input item (Responses), or the input
// itself when it is a string.
func lastText(req map[string]any) string {
	var items []any
	switch v := req["input"].(type) {
	case string:
		return v
	case []any:
		items = v
	}
	if m, ok := req["messages"].([]any); ok {
		items = m
	}
	if len(items) == 0 {
		return ""
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "text" || k == "content" || k == "output") {
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
	walk(items[len(items)-1])
	return b.String()
}
