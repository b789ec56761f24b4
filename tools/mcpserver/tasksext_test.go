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
		t.Run(tr.name+"/a long foreground bash is answered as a task; tasks/get inlines the result", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithTaskAfter(50*time.Millisecond))
			c := extClient(t, srv, tr.open)
			path := fifo(t)
			var created extTask
			c.ok("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":"read l < %s; echo got $l"}}`, path), &created)
			if created.ResultType != "task" || created.Status != "working" || created.TTLMs == nil || created.Meta.Scope == "" || created.Meta.RuntimeID != "bash-1" {
				t.Fatalf("a long call = %+v, want a working task (resultType task) in a scope, runtime id bash-1", created)
			}
			var working extTask
			c.ok("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &working)
			if working.ResultType != "complete" || working.Status != "working" || working.Result != nil {
				t.Errorf("tasks/get while it runs = %+v, want working, no result", working)
			}
			release(t, path, "it")
			done := c.awaitExtDone(created.TaskID)
			// The foreground result, from a client without the extension (one with it
			// could get a task back, its task-after being this short).
			fg := sessionlessRPC(t, srv, tr.open).scopedTool("bash", map[string]any{"command": "echo got it"})
			if done.Status != "completed" || done.Result == nil || !slices.Equal(done.Result.texts(), fg.texts) {
				t.Errorf("tasks/get at the end = %+v, want completed with the foreground result %q", done, fg.texts)
			}
			list := c.scopedTool("task_list", map[string]any{"scope": created.Meta.Scope}).texts
			if want := []string{fmt.Sprintf("bash-1 [bash] completed — read l < %s; echo got $l", path)}; !slices.Equal(list, want) {
				t.Errorf("task_list of the task's scope = %q, want %q and no notice (tasks/get delivered the result)", list, want)
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
			if err := json.Unmarshal(r.Result, &res); err != nil || (res.ResultType != "" && res.ResultType != "complete") || !slices.Equal(res.texts(), []string{"quick\n[status: completed, exit code: 0]"}) {
				t.Errorf("a short call = %s, want its CallToolResult", r.raw)
			}
		})
		t.Run(tr.name+"/tasks/cancel kills; ids of other scopes and undeclared clients are refused", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithTaskAfter(50*time.Millisecond))
			c := extClient(t, srv, tr.open)
			mark := newMark(t)
			var created extTask
			c.ok("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":%q}}`, marked(mark, "sleep 600")), &created)
			if created.ResultType != "task" {
				t.Fatalf("a long call = %+v, want a task", created)
			}
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
			var ack struct {
				ResultType string `json:"resultType"`
			}
			c.ok("tasks/update", fmt.Sprintf(`{"taskId":%q,"inputResponses":{}}`, created.TaskID), &ack)
			c.ok("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &ack)
			if ack.ResultType != "complete" {
				t.Errorf("tasks/cancel ack resultType = %q, want complete", ack.ResultType)
			}
			awaitGone(t, mark)
			if got := c.awaitExtDone(created.TaskID); got.Status != "cancelled" {
				t.Errorf("tasks/get after the cancel = %+v, want cancelled", got)
			}
			c.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": created.Meta.Scope})
			if code, msg := c.errorOf("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.TaskID)); code != uc || msg != strings.ReplaceAll(um, "NOSUCHTASKIDNOSUCHTASKIDX", created.TaskID) {
				t.Errorf("tasks/get after its scope closed = %d %q, want it read as unknown", code, msg)
			}
		})
	}
}
