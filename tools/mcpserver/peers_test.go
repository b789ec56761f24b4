package mcpserver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

// A client that retries a background start with the same key gets the first
// start's handle, as structuredContent, and no second task.
func TestStartKeysOverMCP(t *testing.T) {
	srv := newServer(t, mcpserver.WithBashToolOptions(tools.WithStartKeys()))
	c, _ := serve(t, srv)
	gate := fifo(t)
	args := map[string]any{"command": "cat " + gate, "run_in_background": true, "key": "build-42"}
	first := c.call(t, "bash", args)
	retry := c.call(t, "bash", args)
	for _, res := range []*mcp.CallToolResult{first, retry} {
		if got := handleOf(t, res); got != (handle{Kind: "background", TaskID: "bash-1", Message: texts(t, res)[0]}) {
			t.Errorf("structuredContent = %+v, want the handle of bash-1 with the text as message", got)
		}
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

// A watch's notices reach an MCP session as completion notices do: a log message at
// once, and appended to the session's next tool result, once; the completion notice
// comes after the watch's last one.
func TestWatchOverMCP(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	c.setLogLevel(t)
	gate1, gate2 := fifo(t), fifo(t)
	cmd := "cat " + gate1 + "; echo 'ERROR db down'; cat " + gate2 + "; echo 'ERROR disk full'; exit 3"
	c.call(t, "bash", map[string]any{"command": cmd, "run_in_background": true})
	want := "watching task bash-1 for lines matching ERROR: up to 20 notices in this session, until the task finishes. Keep working; do not poll."
	if got := texts(t, c.call(t, "task_watch", map[string]any{"task_id": "bash-1", "pattern": "ERROR"})); !slices.Equal(got, []string{want}) {
		t.Fatalf("task_watch = %q, want %q", got, want)
	}
	release(t, gate1, "x")
	first := "task bash-1 output matched ERROR: ERROR db down"
	if l := c.nextLog(t); l.Data != first {
		t.Fatalf("log message %v, want %q", l.Data, first)
	}
	list := "bash-1 [bash] running — " + cmd
	if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{list, first}; !slices.Equal(got, want) {
		t.Errorf("next result = %q, want %q", got, want)
	}
	release(t, gate2, "y")
	second := "task bash-1 output matched ERROR: ERROR disk full"
	done := "background task bash-1 (bash: " + cmd + ") finished [status: completed, exit code: 3]. Read its output with task_output."
	for _, want := range []string{second, done} {
		if l := c.nextLog(t); l.Data != want {
			t.Fatalf("log message %v, want %q", l.Data, want)
		}
	}
	list = "bash-1 [bash] completed — " + cmd
	if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{list, second, done}; !slices.Equal(got, want) {
		t.Errorf("next result = %q, want %q (the watch's notice, then the completion notice)", got, want)
	}
	if got, want := texts(t, c.call(t, "task_output", map[string]any{"task_id": "bash-1"})), []string{"x\nERROR db down\ny\nERROR disk full\n[status: completed, exit code: 3]"}; !slices.Equal(got, want) {
		t.Errorf("task_output = %q, want %q (the watch read nothing away)", got, want)
	}
}

// A foreground bash call with background_after_ms that runs long returns, over MCP,
// the structuredContent a run_in_background start returns; the command runs on as
// that task, and its early output is still read.
func TestBackgroundAfterOverMCP(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	gate := fifo(t)
	res := c.call(t, "bash", map[string]any{"command": "echo early; cat " + gate + "; echo late", "background_after_ms": 200})
	text := texts(t, res)
	if got := handleOf(t, res); got != (handle{Kind: "background", TaskID: "bash-1", Message: text[0]}) {
		t.Errorf("structuredContent = %+v, want the handle of bash-1 (as a run_in_background start) with the text as message", got)
	}
	if len(text) != 1 || !strings.Contains(text[0], "(still running after 200 ms: moved to the background as task bash-1 (bash: echo early; cat ") ||
		!strings.HasSuffix(text[0], "[status: running]") || res.IsError {
		t.Errorf("result = %q (isError %v), want the move's text", text, res.IsError)
	}
	release(t, gate, "x")
	got := texts(t, c.call(t, "task_output", map[string]any{"task_id": "bash-1", "wait": true}))
	if want := []string{"early\nx\nlate\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
		t.Errorf("task_output = %q, want %q", got, want)
	}
}

// handle is a background handle as structuredContent carries it.
type handle struct {
	Kind    string `json:"kind"`
	TaskID  string `json:"task_id"`
	Message string `json:"message"`
}

func handleOf(t *testing.T, res *mcp.CallToolResult) handle {
	t.Helper()
	var h handle
	if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil {
		t.Fatalf("structuredContent %s: %v", structured(t, res), err)
	}
	return h
}

// Three sessions share a global limit of 2 with a queue: starts over the limit are
// queued (the start's handle, "queued background task …"), and freed slots go to the
// sessions in turn.
func TestQueueAcrossSessionsOverMCP(t *testing.T) {
	srv := newServer(t, mcpserver.WithRuntimeOptions(actors.WithGlobalLimit(2), actors.WithQueue(2)))
	c1, _ := serve(t, srv)
	c2, _ := serve(t, srv)
	c3, _ := serve(t, srv)
	hold1, hold2 := fifo(t), fifo(t)
	order := t.TempDir() + "/order"
	c1.call(t, "bash", map[string]any{"command": "cat " + hold1, "run_in_background": true})
	c1.call(t, "bash", map[string]any{"command": "cat " + hold2, "run_in_background": true})
	queued := func(c *client, name, id string) {
		t.Helper()
		res := c.call(t, "bash", map[string]any{"command": "echo " + name + " >> " + order, "run_in_background": true})
		want := "queued background task " + id + " (position 1 of 1); it starts when a slot frees."
		if text := texts(t, res); !strings.HasPrefix(text[0], want) || res.IsError {
			t.Errorf("%s: %q, want it to begin %q", name, text, want)
		}
		if h := handleOf(t, res); h.Kind != "background" || h.TaskID != id {
			t.Errorf("%s: handle %+v, want the background handle of %s", name, h, id)
		}
	}
	queued(c1, "session1", "bash-3")
	queued(c2, "session2", "bash-4")
	queued(c3, "session3", "bash-5")
	if got := texts(t, c2.call(t, "task_list", map[string]any{})); !slices.Equal(got, []string{"bash-4 [bash] queued — echo session2 >> " + order}) {
		t.Errorf("session 2's task_list = %q", got)
	}
	// One slot cycles through the queue: the sessions get it in turn, from the one
	// after the session served last (session 1).
	release(t, hold1, "x")
	for _, c := range []*client{c2, c3, c1} {
		id := map[*client]string{c1: "bash-3", c2: "bash-4", c3: "bash-5"}[c]
		if got := texts(t, c.call(t, "task_output", map[string]any{"task_id": id, "wait": true})); len(got) == 0 || got[0] != "[status: completed, exit code: 0]" {
			t.Errorf("%s: %q", id, got)
		}
	}
	release(t, hold2, "y")
	got := texts(t, c1.call(t, "bash", map[string]any{"command": "cat " + order}))
	if want := []string{"session2\nsession3\nsession1\n[status: completed, exit code: 0]"}; !slices.Equal(got[:1], want) {
		t.Errorf("start order %q, want %q (round robin from the session after the one served last)", got, want)
	}
}
