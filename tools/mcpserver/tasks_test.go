package mcpserver_test

//lint:file-ignore SA1019 the tests check the notices sent as log messages, which the server keeps for the revisions that still have logging

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// task is an MCP Task on the wire.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
	Meta          struct {
		RuntimeID string `json:"taskrt/task_id"`
	} `json:"_meta"`
}

// toolResult is a CallToolResult on the wire, with the related-task _meta.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
	Meta    struct {
		RelatedTask *struct {
			TaskID string `json:"taskId"`
		} `json:"io.modelcontextprotocol/related-task"`
	} `json:"_meta"`
}

func (r toolResult) texts() []string {
	var out []string
	for _, c := range r.Content {
		out = append(out, c.Text)
	}
	return out
}

// wires are the two ways a raw JSON-RPC client reaches the Server.
var wires = []struct {
	name string
	open func(t *testing.T, srv *mcpserver.Server) *rpc
}{
	{"stdio", stdioRPC},
	{"http", func(t *testing.T, srv *mcpserver.Server) *rpc { return httpRPC(t, httpServer(t, srv, "", nil)) }},
}

// session opens a 2025-11-25 session.
func session(t *testing.T, srv *mcpserver.Server, open func(*testing.T, *mcpserver.Server) *rpc) *rpc {
	t.Helper()
	c := open(t, srv)
	c.initialize("2025-11-25")
	return c
}

// startTask sends a task-augmented tools/call of bash and returns the task.
func (c *rpc) startTask(args string, ttl string) task {
	c.t.Helper()
	var res struct {
		Task task `json:"task"`
		Meta struct {
			RuntimeID string `json:"taskrt/task_id"`
		} `json:"_meta"`
	}
	c.ok("tools/call", fmt.Sprintf(`{"name":"bash","arguments":%s,"task":%s}`, args, ttl), &res)
	res.Task.Meta.RuntimeID = res.Meta.RuntimeID
	return res.Task
}

func (c *rpc) getTask(id string) task {
	c.t.Helper()
	var tk task
	c.ok("tasks/get", fmt.Sprintf(`{"taskId":%q}`, id), &tk)
	return tk
}

func (c *rpc) taskResult(id string) toolResult {
	c.t.Helper()
	var res toolResult
	c.ok("tasks/result", fmt.Sprintf(`{"taskId":%q}`, id), &res)
	return res
}

func (c *rpc) tool(name, args string) toolResult {
	c.t.Helper()
	var res toolResult
	c.ok("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args), &res)
	return res
}

// errorOf sends a request that must fail and returns its code and message.
func (c *rpc) errorOf(method, params string) (int, string) {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error == nil {
		c.t.Fatalf("%s %s = %s, want an error", method, params, r.Result)
	}
	return r.Error.Code, r.Error.Message
}

func TestProtocolTasksOffered(t *testing.T) {
	for _, tr := range wires {
		t.Run(tr.name+"/2025-11-25 session gets capabilities.tasks and bash execution.taskSupport optional", func(t *testing.T) {
			srv := newServer(t)
			c := tr.open(t, srv)
			caps := c.initialize("2025-11-25")
			if got, want := string(caps["tasks"]), `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`; got != want {
				t.Errorf("capabilities.tasks = %s, want %s", got, want)
			}
			var list struct {
				Tools []struct {
					Name      string          `json:"name"`
					Execution json.RawMessage `json:"execution"`
				} `json:"tools"`
			}
			c.ok("tools/list", `{}`, &list)
			for _, tl := range list.Tools {
				want := ""
				if tl.Name == "bash" {
					want = `{"taskSupport":"optional"}`
				}
				if got := string(tl.Execution); got != want {
					t.Errorf("tool %s execution = %q, want %q", tl.Name, got, want)
				}
			}
		})
		t.Run(tr.name+"/2025-06-18 session gets no tasks and a task param is ignored", func(t *testing.T) {
			srv := newServer(t)
			c := tr.open(t, srv)
			caps := c.initialize("2025-06-18")
			if _, ok := caps["tasks"]; ok {
				t.Errorf("capabilities.tasks offered to a 2025-06-18 session: %s", caps["tasks"])
			}
			var res toolResult
			c.ok("tools/call", `{"name":"bash","arguments":{"command":"echo fg"},"task":{"ttl":60000}}`, &res)
			if got, want := res.texts(), []string{"fg\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
				t.Errorf("tools/call = %q, want the foreground result %q", got, want)
			}
			var tasks struct {
				Tasks []task `json:"tasks"`
			}
			c.ok("tasks/list", `{}`, &tasks)
			if tasks.Tasks == nil || len(tasks.Tasks) != 0 {
				t.Errorf("tasks/list of a session without tasks = %+v, want []", tasks.Tasks)
			}
		})
	}
}

func TestProtocolTaskLifecycle(t *testing.T) {
	for _, tr := range wires {
		t.Run(tr.name+"/working task maps to its runtime task, result is the foreground result", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			path := fifo(t)
			tk := c.startTask(fmt.Sprintf(`{"command":"echo before; read l < %s; echo got $l"}`, path), `{"ttl":60000}`)
			if tk.Status != "working" || tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval != mcpserver.TaskPollInterval.Milliseconds() {
				t.Errorf("created task = %+v, want working, ttl 60000, pollInterval %d", tk, mcpserver.TaskPollInterval.Milliseconds())
			}
			// The protocol id is the runtime id where the connection fences it
			// (stdio), and the runtime id with a secret of 128+ random bits over HTTP.
			if rid, secret, _ := strings.Cut(tk.TaskID, "."); rid != "bash-1" || (c.http != nil) != (len(secret) >= 26) {
				t.Errorf("task id %q: want bash-1 on stdio, bash-1.<128+ random bits> over HTTP", tk.TaskID)
			}
			for _, ts := range []string{tk.CreatedAt, tk.LastUpdatedAt} {
				if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
					t.Errorf("timestamp %q: %v", ts, err)
				}
			}
			if tk.Meta.RuntimeID != "bash-1" {
				t.Errorf("CreateTaskResult _meta taskrt/task_id = %q, want bash-1", tk.Meta.RuntimeID)
			}
			got := c.getTask(tk.TaskID)
			if got.Status != "working" || !strings.Contains(got.StatusMessage, "bash-1") || got.Meta.RuntimeID != "bash-1" {
				t.Errorf("tasks/get of a running task = %+v, want working, naming bash-1", got)
			}
			if list := c.tool("task_list", `{}`).texts(); !slices.Equal(list, []string{"bash-1 [bash] running — echo before; read l < " + path + "; echo got $l"}) {
				t.Errorf("task_list = %q, want bash-1 running", list)
			}
			var tasks struct {
				Tasks []task `json:"tasks"`
			}
			c.ok("tasks/list", `{}`, &tasks)
			if len(tasks.Tasks) != 1 || tasks.Tasks[0].TaskID != tk.TaskID {
				t.Errorf("tasks/list = %+v, want the one task", tasks.Tasks)
			}
			_, pending := c.send("tasks/result", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID))
			release(t, path, "it")
			r := c.await(pending)
			var res toolResult
			if err := json.Unmarshal(r.Result, &res); err != nil || r.Error != nil {
				t.Fatalf("tasks/result: %s", r.raw)
			}
			if got, want := res.texts(), []string{"before\ngot it\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
				t.Errorf("tasks/result = %q, want %q", got, want)
			}
			if res.Meta.RelatedTask == nil || res.Meta.RelatedTask.TaskID != tk.TaskID {
				t.Errorf("tasks/result _meta related-task = %+v, want %s", res.Meta.RelatedTask, tk.TaskID)
			}
			fg := c.tool("bash", `{"command":"echo before; echo got it"}`)
			if !slices.Equal(fg.texts(), res.texts()) || fg.IsError != res.IsError {
				t.Errorf("foreground = %q (isError %v), task result = %q (isError %v): want the same", fg.texts(), fg.IsError, res.texts(), res.IsError)
			}
			done := c.getTask(tk.TaskID)
			if done.Status != "completed" || done.StatusMessage != "[status: completed, exit code: 0]" {
				t.Errorf("tasks/get after the end = %+v, want completed with the status line", done)
			}
			if c.http == nil {
				c.awaitNote("notifications/tasks/status", func(p json.RawMessage) bool {
					var n task
					return json.Unmarshal(p, &n) == nil && n.TaskID == tk.TaskID && n.Status == "completed"
				})
			}
			if got := c.tool("task_list", `{}`).texts(); len(got) != 1 {
				t.Errorf("the tool result after tasks/result = %q: want no completion notice (the client collected it)", got)
			}
		})

		t.Run(tr.name+"/cancel kills, cancelled stays cancelled, a finished task cannot be cancelled", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			mark := newMark(t)
			tk := c.startTask(fmt.Sprintf(`{"command":%q}`, marked(mark, "sleep 600")), `{}`)
			if tk.TTL == nil || *tk.TTL != mcpserver.DefaultTaskTTL.Milliseconds() {
				t.Errorf("ttl = %v, want the default %d", tk.TTL, mcpserver.DefaultTaskTTL.Milliseconds())
			}
			awaitMarked(t, mark, 1)
			var cancelled task
			c.ok("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID), &cancelled)
			if cancelled.Status != "cancelled" {
				t.Errorf("tasks/cancel = %+v, want cancelled", cancelled)
			}
			awaitGone(t, mark)
			res := c.taskResult(tk.TaskID)
			if !res.IsError || !strings.Contains(strings.Join(res.texts(), "\n"), "killed") {
				t.Errorf("tasks/result of a cancelled task = %q (isError %v), want the killed call's error result", res.texts(), res.IsError)
			}
			if got := c.getTask(tk.TaskID); got.Status != "cancelled" {
				t.Errorf("tasks/get after the process ended = %+v, want cancelled still", got)
			}
			code, msg := c.errorOf("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID))
			if want := fmt.Sprintf("cannot cancel task %s: it is already cancelled", tk.TaskID); code != -32602 || msg != want {
				t.Errorf("second tasks/cancel = %d %q, want -32602 %q", code, msg, want)
			}
			done := c.startTask(`{"command":"true"}`, `{}`)
			c.taskResult(done.TaskID)
			code, msg = c.errorOf("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, done.TaskID))
			if want := fmt.Sprintf("cannot cancel task %s: it is already completed", done.TaskID); code != -32602 || msg != want {
				t.Errorf("tasks/cancel of a finished task = %d %q, want -32602 %q", code, msg, want)
			}
			if got := c.getTask(done.TaskID); got.Status != "completed" {
				t.Errorf("a refused cancel changed the task: %+v", got)
			}
		})

		t.Run(tr.name+"/a tool error is failed with the reason as statusMessage", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			tk := c.startTask(`{"command":"echo x","stdin":"pipe"}`, `{}`)
			res := c.taskResult(tk.TaskID)
			fg := c.tool("bash", `{"command":"echo x","stdin":"pipe"}`)
			if !res.IsError || !slices.Equal(res.texts(), fg.texts()) {
				t.Errorf("tasks/result = %q (isError %v), want the foreground error %q", res.texts(), res.IsError, fg.texts())
			}
			got := c.getTask(tk.TaskID)
			if got.Status != "failed" || got.StatusMessage != fg.texts()[0] {
				t.Errorf("tasks/get = %+v, want failed with statusMessage %q", got, fg.texts()[0])
			}
		})

		t.Run(tr.name+"/unknown and foreign ids read alike, each session lists its own", func(t *testing.T) {
			srv := newServer(t)
			a := session(t, srv, tr.open)
			b := session(t, srv, tr.open)
			mark := newMark(t)
			tk := a.startTask(fmt.Sprintf(`{"command":%q}`, marked(mark, "sleep 600")), `{}`)
			const unknown = "NOSUCHTASKIDNOSUCHTASKIDX"
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				fc, fm := b.errorOf(method, fmt.Sprintf(`{"taskId":%q}`, tk.TaskID))
				uc, um := b.errorOf(method, fmt.Sprintf(`{"taskId":%q}`, unknown))
				if fc != -32602 || uc != -32602 || strings.ReplaceAll(fm, tk.TaskID, unknown) != um {
					t.Errorf("%s: foreign id = %d %q, unknown id = %d %q: want -32602 alike", method, fc, fm, uc, um)
				}
			}
			var tasks struct {
				Tasks []task `json:"tasks"`
			}
			b.ok("tasks/list", `{}`, &tasks)
			if len(tasks.Tasks) != 0 {
				t.Errorf("tasks/list of the other session = %+v, want none", tasks.Tasks)
			}
			if got := a.getTask(tk.TaskID); got.Status != "working" {
				t.Errorf("the other session's attempts touched the task: %+v", got)
			}
			a.end()
			awaitGone(t, mark)
		})

		t.Run(tr.name+"/a tool without task support refuses a task", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			code, msg := c.errorOf("tools/call", `{"name":"task_list","arguments":{},"task":{}}`)
			if code != -32602 || !strings.Contains(msg, "task_list cannot be called as a task") {
				t.Errorf("task-augmented task_list = %d %q, want -32602 naming the tool", code, msg)
			}
			if got := c.tool("task_list", `{}`).texts(); !slices.Equal(got, []string{"(no background tasks)"}) {
				t.Errorf("a refused task started something: %q", got)
			}
		})

		t.Run(tr.name+"/a task-augmented background start tracks the background task", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			path := fifo(t)
			tk := c.startTask(fmt.Sprintf(`{"command":"echo before; read l < %s; echo got $l","run_in_background":true}`, path), `{}`)
			if tk.Status != "working" || tk.Meta.RuntimeID != "bash-1" || !strings.HasPrefix(tk.TaskID, "bash-1") {
				t.Fatalf("created = %+v, want working, tracking bash-1", tk)
			}
			// The model reads some output itself first: the result at the end is
			// what task_output returns then, so nothing arrives twice.
			var first []string
			for len(first) == 0 || first[0] == "[status: running]" {
				first = c.tool("task_output", `{"task_id":"bash-1"}`).texts()
			}
			if want := []string{"before\n[status: running]"}; !slices.Equal(first, want) {
				t.Errorf("task_output while it runs = %q, want %q", first, want)
			}
			release(t, path, "it")
			res := c.taskResult(tk.TaskID)
			if want := []string{"got it\n[status: completed, exit code: 0]"}; !slices.Equal(res.texts(), want) || res.IsError {
				t.Errorf("tasks/result = %q, want the rest and the status line %q", res.texts(), want)
			}
			if got := c.getTask(tk.TaskID); got.Status != "completed" || got.StatusMessage != "[status: completed, exit code: 0]" {
				t.Errorf("tasks/get at the end = %+v, want completed with the status line", got)
			}
			if got := c.tool("task_list", `{}`).texts(); len(got) != 1 {
				t.Errorf("the tool result after tasks/result = %q: want no completion notice (the client collected it)", got)
			}
		})

		t.Run(tr.name+"/the session's end kills its tasks", func(t *testing.T) {
			srv := newServer(t)
			c := session(t, srv, tr.open)
			mark := newMark(t)
			c.startTask(fmt.Sprintf(`{"command":%q}`, marked(mark, "sleep 600")), `{}`)
			awaitMarked(t, mark, 1)
			c.end()
			awaitGone(t, mark)
		})
	}
}

// TestProtocolTaskNotices pins the notice rules on stdio, where the session's
// notifications are visible: a task the client never collected is announced on
// the next tool result, once; its status changes come as notifications/tasks/status.
func TestProtocolTaskNotices(t *testing.T) {
	srv := newServer(t)
	c := session(t, srv, stdioRPC)
	c.ok("logging/setLevel", `{"level":"info"}`, nil)
	tk := c.startTask(`{"command":"echo uncollected"}`, `{"ttl":1}`)
	if tk.TTL == nil || *tk.TTL != mcpserver.MinTaskTTL.Milliseconds() {
		t.Errorf("ttl 1 granted as %v, want the least, %d", tk.TTL, mcpserver.MinTaskTTL.Milliseconds())
	}
	isDone := func(p json.RawMessage) bool {
		var n task
		return json.Unmarshal(p, &n) == nil && n.TaskID == tk.TaskID && n.Status == "completed"
	}
	c.awaitNote("notifications/tasks/status", isDone)
	c.awaitNote("notifications/message", func(p json.RawMessage) bool {
		var m mcp.LoggingMessageParams
		return json.Unmarshal(p, &m) == nil && strings.Contains(fmt.Sprint(m.Data), "background task bash-1 ")
	})
	want := []string{"bash-1 [bash] completed — echo uncollected", "background task bash-1 (bash: echo uncollected) finished [status: completed, exit code: 0]. Read its output with task_output."}
	got := c.tool("task_list", `{}`).texts()
	if !slices.Equal(got, want) {
		t.Errorf("the next tool result = %q, want the list and then the notice: %q", got, want)
	}
	if again := c.tool("task_list", `{}`).texts(); len(again) != 1 {
		t.Errorf("a second tool result = %q, want the notice only once", again)
	}
	if n := c.noteCount("notifications/tasks/status", isDone); n != 1 {
		t.Errorf("%d completed status notifications, want 1", n)
	}
	// The record expires ttl after the end: then the id reads as unknown.
	deadline := time.Now().Add(time.Minute)
	for c.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, tk.TaskID)).Error == nil {
		if time.Now().After(deadline) {
			t.Fatal("the task's record outlived its ttl by a minute")
		}
		<-time.After(mcpserver.TaskPollInterval)
	}
}

// TestProtocolTaskCreatedWorking pins the seed state: CreateTaskResult is
// "working" even when the call has ended before it is sent.
func TestProtocolTaskCreatedWorking(t *testing.T) {
	srv := newServer(t)
	c := session(t, srv, stdioRPC)
	for range 5 {
		if tk := c.startTask(`{"command":"true"}`, `{}`); tk.Status != "working" || tk.CreatedAt != tk.LastUpdatedAt {
			t.Errorf("created = %+v, want working as created", tk)
		}
	}
}
