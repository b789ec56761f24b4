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
