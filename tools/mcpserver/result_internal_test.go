//go:build linux

package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/taskrt/taskrt/tools"
)

// Every result with structured data carries the text and the notices in it too, for
// clients that show structuredContent instead of content; its own fields stay.
func TestStructuredCarriesWhatTheModelMustRead(t *testing.T) {
	tests := []struct {
		name    string
		r       tools.Result
		notices []string
		want    string
	}{
		{"a handle: kind and task_id first, then message", tools.Result{Text: "started", Data: tools.Handle{Kind: "background", TaskID: "bash-1"}},
			nil, `{"kind":"background","task_id":"bash-1","message":"started"}`},
		{"a handle with notices", tools.Result{Text: "started", Data: tools.Handle{Kind: "background", TaskID: "bash-2"}},
			[]string{"n1", "n2"}, `{"kind":"background","task_id":"bash-2","message":"started","notices":["n1","n2"]}`},
		{"other data keeps its fields", tools.Result{Text: "t", Data: map[string]any{"scope": "s-1"}},
			[]string{"n1"}, `{"message":"t","notices":["n1"],"scope":"s-1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := toResult(tc.r, tc.notices)
			b, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("structuredContent = %s, want %s", b, tc.want)
			}
			if got := len(res.Content); got != 1+len(tc.notices) {
				t.Errorf("%d content items, want the text and one per notice", got)
			}
		})
	}
	t.Run("a result without data has no structuredContent", func(t *testing.T) {
		if res := toResult(tools.Result{Text: "x"}, []string{"n"}); res.StructuredContent != nil {
			t.Errorf("structuredContent = %v", res.StructuredContent)
		}
	})
}

// Notices added to a result built earlier (a protocol-level task's stored result)
// go into its content and its structuredContent alike, and leave the stored result
// as it was.
func TestAppendNoticesReachesEveryPart(t *testing.T) {
	handle := tools.Handle{Kind: "background", TaskID: "bash-1"}
	tests := []struct {
		name string
		sc   any
		want string // structuredContent after, "" for none
	}{
		{"no structured content", nil, ""},
		{"a handle", handleResult{Handle: handle, Message: "m"},
			`{"kind":"background","task_id":"bash-1","message":"m","notices":["n1"]}`},
		{"a handle that carries notices already", handleResult{Handle: handle, Message: "m", Notices: []string{"n0"}},
			`{"kind":"background","task_id":"bash-1","message":"m","notices":["n0","n1"]}`},
		{"a scoped handle", scopedHandle{Handle: handle, Scope: "s", Message: "m"},
			`{"kind":"background","task_id":"bash-1","scope":"s","message":"m","notices":["n1"]}`},
		{"other data", map[string]any{"x": 1.0}, `{"notices":["n1"],"x":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stored := toResult(tools.Result{Text: "t"}, nil)
			stored.StructuredContent = tc.sc
			res := *stored
			appendNotices(&res, []string{"n1"})
			if len(res.Content) != 2 || len(stored.Content) != 1 {
				t.Errorf("content: %d items after, stored %d; want 2 and 1", len(res.Content), len(stored.Content))
			}
			got := ""
			if res.StructuredContent != nil {
				b, err := json.Marshal(res.StructuredContent)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if got != tc.want {
				t.Errorf("structuredContent = %s, want %s", got, tc.want)
			}
			if h, ok := tc.sc.(handleResult); ok && len(h.Notices) > 1 {
				t.Errorf("the stored handle's notices changed: %v", h.Notices)
			}
		})
	}
}
