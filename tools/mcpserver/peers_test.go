package mcpserver_test

import (
	"slices"
	"testing"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// A client that retries a background start with the same key gets the first
// start's handle, as structuredContent, and no second task.
func TestStartKeysOverMCP(t *testing.T) {
	srv := newServer(t, mcpserver.WithStartKeys())
	c, _ := serve(t, srv)
	gate := fifo(t)
	args := map[string]any{"command": "cat " + gate, "run_in_background": true, "key": "build-42"}
	first := c.call(t, "bash", args)
	retry := c.call(t, "bash", args)
	if got, want := structured(t, first), `{"kind":"background","task_id":"bash-1"}`; got != want {
		t.Errorf("first structuredContent = %s, want %s", got, want)
	}
	if got, want := structured(t, retry), `{"kind":"background","task_id":"bash-1"}`; got != want {
		t.Errorf("retry structuredContent = %s, want %s", got, want)
	}
	want := `background task bash-1 was already started with key "build-42" (status: running); no new task was started. Read its output with task_output.`
	if got := texts(t, retry); !slices.Equal(got, []string{want}) || retry.IsError {
		t.Errorf("retry = %q, want %q", got, want)
	}
	if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{"bash-1 [bash] running — cat " + gate}; !slices.Equal(got, want) {
		t.Errorf("task_list = %q, want %q", got, want)
	}
	release(t, gate, "done")
}
