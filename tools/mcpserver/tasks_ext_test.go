package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// extTask is the tasks extension's Task (DetailedTask) on the wire.
type extTask struct {
	ResultType     string      `json:"resultType"`
	TaskID         string      `json:"taskId"`
	Status         string      `json:"status"`
	TTLMs          *int64      `json:"ttlMs"`
	PollIntervalMs int64       `json:"pollIntervalMs"`
	Result         *toolResult `json:"result"`
	Meta           struct {
		RuntimeID string `json:"taskrt/task_id"`
		Scope     string `json:"taskrt/scope"`
	} `json:"_meta"`
}

const tasksExtCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// extClient is a sessionless client that declares the tasks extension.
func extClient(t *testing.T, srv *mcpserver.Server, open func(*testing.T, *mcpserver.Server) *rpc) *rpc {
	c := sessionlessRPC(t, srv, open)
	c.caps = tasksExtCaps
	return c
}

// awaitExtDone polls tasks/get (as a client of the extension does, every
// pollIntervalMs) until the task is terminal.
func (c *rpc) awaitExtDone(id string) extTask {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var tk extTask
		c.ok("tasks/get", fmt.Sprintf(`{"taskId":%q}`, id), &tk)
		if tk.Status != "working" {
			return tk
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s still working after a minute", id)
		}
		<-time.After(time.Duration(tk.PollIntervalMs) * time.Millisecond)
	}
}

// extID is the protocol id a background start of bash-N gets: the runtime id on
// stdio, the runtime id and the scope's handle over HTTP.
func extID(c *rpc, created extTask) string {
	if c.http == nil {
		return created.Meta.RuntimeID
	}
	return created.Meta.RuntimeID + "." + created.Meta.Scope
}

// extStart starts a background command as a client of the extension and returns
// the task it was answered with.
func (c *rpc) extStart(command string) extTask {
	c.t.Helper()
	var created extTask
	c.ok("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":%q,"run_in_background":true}}`, command), &created)
	if created.ResultType != "task" || created.Status != "working" || created.TTLMs == nil || created.TaskID != extID(c, created) {
		c.t.Fatalf("a background start = %+v, want a working task (resultType task) whose id is %s", created, extID(c, created))
	}
	return created
}

func TestTasksExtension(t *testing.T) {
	for _, tr := range wires {
		t.Run(tr.name+"/server/discover offers the extension", func(t *testing.T) {
			srv := newServer(t)
			c := extClient(t, srv, tr.open)
			var res struct {
				Capabilities struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"capabilities"`
			}
			c.ok("server/discover", `{}`, &res)
			if got := string(res.Capabilities.Extensions["io.modelcontextprotocol/tasks"]); got != "{}" {
				t.Errorf("extensions[io.modelcontextprotocol/tasks] = %q, want {}", got)
			}
		})

		t.Run(tr.name+"/a background start is a task the client tracks; its end is delivered once, by the client", func(t *testing.T) {
			srv := newServer(t)
			c := extClient(t, srv, tr.open)
			path := fifo(t)
			cmd := fmt.Sprintf("echo started; read l < %s; echo done $l", path)
			created := c.extStart(cmd)
			if created.Meta.RuntimeID != "bash-1" || (c.http != nil) != (len(created.Meta.Scope) >= 26) {
				t.Errorf("created = %+v, want bash-1, in a scope over HTTP only", created)
			}
			shown := created.TaskID // what a harness shows the model
			var list []string
			if c.http == nil {
				list = c.scopedTool("task_list", map[string]any{}).texts
			} else {
				list = c.scopedTool("task_list", map[string]any{"scope": created.Meta.Scope}).texts
			}
			if want := []string{"bash-1 [bash] running — " + cmd}; !slices.Equal(list, want) {
				t.Errorf("task_list = %q, want %q", list, want)
			}
			release(t, path, "ok")
			// Every call after the end: none carries taskrt's own notice of bash-1.
			done := c.awaitExtDone(shown)
			if done.Status != "completed" || done.Result == nil || !slices.Equal(done.Result.texts(), []string{"started\ndone ok\n[status: completed, exit code: 0]"}) {
				t.Errorf("tasks/get at the end = %+v, want completed with what task_output returns", done)
			}
			again := c.awaitExtDone(shown)
			if !slices.Equal(again.Result.texts(), done.Result.texts()) {
				t.Errorf("a second tasks/get = %q, want the same result %q", again.Result.texts(), done.Result.texts())
			}
			out := c.scopedTool("task_output", map[string]any{"task_id": shown})
			if want := []string{"[status: completed, exit code: 0]"}; out.isError || !slices.Equal(out.texts, want) {
				t.Errorf("task_output with the id the client shows = %q, want %q and no notice", out.texts, want)
			}
		})

		t.Run(tr.name+"/the model reads the end first: the client gets only the status line", func(t *testing.T) {
			srv := newServer(t)
			c := extClient(t, srv, tr.open)
			created := c.extStart("echo quick")
			shown := created.TaskID
			read := c.scopedTool("task_output", map[string]any{"task_id": shown, "wait": true}).texts
			if want := []string{"quick\n[status: completed, exit code: 0]"}; !slices.Equal(read, want) {
				t.Fatalf("task_output = %q, want %q", read, want)
			}
			done := c.awaitExtDone(shown)
			if done.Status != "completed" || done.Result == nil || !slices.Equal(done.Result.texts(), []string{"[status: completed, exit code: 0]"}) {
				t.Errorf("tasks/get = %+v, want completed with the status line only: the output was read", done)
			}
		})

		t.Run(tr.name+"/other notices ride on the inlined result", func(t *testing.T) {
			srv := newServer(t)
			c := extClient(t, srv, tr.open)
			path := fifo(t)
			created := c.extStart(fmt.Sprintf("read l < %s; echo $l", path))
			args := map[string]any{"task_id": created.TaskID, "pattern": "^hit", "timeout_ms": 60000}
			if w := c.scopedTool("task_watch", args); w.isError {
				t.Fatalf("task_watch = %q", w.texts)
			}
			release(t, path, "hit me")
			done := c.awaitExtDone(created.TaskID)
			if done.Result == nil || len(done.Result.texts()) < 2 || !strings.Contains(strings.Join(done.Result.texts()[1:], "\n"), "output matched ^hit: hit me") {
				t.Errorf("tasks/get at the end = %+v, want the watch's notice after the output", done.Result)
			}
		})

		t.Run(tr.name+"/a long foreground bash is moved to the background and answered as a task", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithTaskAfter(50*time.Millisecond))
			c := extClient(t, srv, tr.open)
			path := fifo(t)
			var created extTask
			c.ok("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":"echo before; read l < %s; echo got $l"}}`, path), &created)
			if created.ResultType != "task" || created.Status != "working" || created.Meta.RuntimeID != "bash-1" || created.TaskID != extID(c, created) {
				t.Fatalf("a long call = %+v, want a working task for bash-1", created)
			}
			var working extTask
			c.ok("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &working)
			if working.ResultType != "complete" || working.Status != "working" || working.Result != nil {
				t.Errorf("tasks/get while it runs = %+v, want working, no result", working)
			}
			release(t, path, "it")
			done := c.awaitExtDone(created.TaskID)
			fg := sessionlessRPC(t, srv, tr.open).scopedTool("bash", map[string]any{"command": "echo before; echo got it"})
			if done.Status != "completed" || done.Result == nil || !slices.Equal(done.Result.texts(), fg.texts) {
				t.Errorf("tasks/get at the end = %+v, want completed with the foreground result %q", done, fg.texts)
			}
		})

		t.Run(tr.name+"/a short foreground bash is answered with its result", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithTaskAfter(time.Minute))
			c := extClient(t, srv, tr.open)
			r := c.call("tools/call", `{"name":"bash","arguments":{"command":"echo quick"}}`)
			var res struct {
				toolResult
				ResultType string `json:"resultType"`
			}
			if err := json.Unmarshal(r.Result, &res); err != nil || res.ResultType != "complete" || !slices.Equal(res.texts(), []string{"quick\n[status: completed, exit code: 0]"}) {
				t.Errorf("a short call = %s, want its CallToolResult, resultType complete", r.raw)
			}
			if got := c.scopedTool("task_list", map[string]any{}).texts; !slices.Equal(got, []string{"(no background tasks)"}) {
				t.Errorf("task_list after a short call = %q, want none", got)
			}
		})

		t.Run(tr.name+"/tasks/cancel kills; ids of others and undeclared clients are refused", func(t *testing.T) {
			srv := newServer(t)
			c := extClient(t, srv, tr.open)
			mark := newMark(t)
			created := c.extStart(marked(mark, "sleep 600"))
			awaitMarked(t, mark, 1)
			for _, m := range []string{"tasks/result", "tasks/list"} {
				if code, _ := c.errorOf(m, fmt.Sprintf(`{"taskId":%q}`, created.TaskID)); code != -32601 {
					t.Errorf("%s = %d, want -32601 (the extension removed it)", m, code)
				}
			}
			plain := sessionlessRPC(t, srv, tr.open)
			if code, _ := plain.errorOf("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.TaskID)); code != -32021 {
				t.Errorf("tasks/get without the extension declared = %d, want -32021", code)
			}
			uc, um := c.errorOf("tasks/get", `{"taskId":"NOSUCHTASKIDNOSUCHTASKIDX"}`)
			if uc != -32602 || um != "task not found: NOSUCHTASKIDNOSUCHTASKIDX" {
				t.Errorf("unknown id = %d %q, want -32602 task not found", uc, um)
			}
			other := extClient(t, srv, tr.open) // another connection, or a request without the scope's id
			if code, msg := other.errorOf("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.Meta.RuntimeID)); code != uc || msg != strings.ReplaceAll(um, "NOSUCHTASKIDNOSUCHTASKIDX", created.Meta.RuntimeID) {
				t.Errorf("another client's tasks/get of %s = %d %q, want it read as unknown", created.Meta.RuntimeID, code, msg)
			}
			var ack struct {
				ResultType string `json:"resultType"`
			}
			c.ok("tasks/update", fmt.Sprintf(`{"taskId":%q,"inputResponses":{}}`, created.TaskID), &ack)
			c.ok("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &ack)
			if ack.ResultType != "complete" {
				t.Errorf("tasks/cancel ack resultType = %q, want complete", ack.ResultType)
			}
			awaitGone(t, mark)
			if got := c.awaitExtDone(created.TaskID); got.Status != "cancelled" || got.Result != nil {
				t.Errorf("tasks/get after the cancel = %+v, want cancelled, no result", got)
			}
			if got := c.scopedTool("task_output", map[string]any{"task_id": created.TaskID, "wait": true}).texts; !slices.Equal(got, []string{"[status: killed, signal: SIGTERM]"}) {
				t.Errorf("task_output after the client's cancel = %q, want the task killed as task_kill does", got)
			}
		})
	}
}
