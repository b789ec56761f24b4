package mcpserver_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// stdioRevisions are the ways a client speaks over stdio: the sessionless
// revision (no initialize, every request on its own) and two with sessions.
var stdioRevisions = []struct {
	name string
	open func(*testing.T, *mcpserver.Server) *rpc
}{
	{"2026-07-28", func(t *testing.T, srv *mcpserver.Server) *rpc { return sessionlessRPC(t, srv, stdioRPC) }},
	{"2025-11-25", func(t *testing.T, srv *mcpserver.Server) *rpc { return session(t, srv, stdioRPC) }},
	{"2025-06-18", func(t *testing.T, srv *mcpserver.Server) *rpc {
		c := stdioRPC(t, srv)
		c.initialize("2025-06-18")
		return c
	}},
}

// TestStdioNeedsNoHandle pins the stdio rule: one client per connection, so a
// call that names no scope acts as the connection's owner whatever revision it
// speaks — it starts, lists, reads, kills and waits its tasks with no handle to
// carry, every notice reaches it exactly once, and its tasks die with the
// connection.
func TestStdioNeedsNoHandle(t *testing.T) {
	for _, rev := range stdioRevisions {
		t.Run(rev.name, func(t *testing.T) {
			srv := newServer(t)
			c := rev.open(t, srv)
			path := fifo(t)
			cmd := fmt.Sprintf("read l < %s; echo got $l", path)
			start := c.scopedTool("bash", map[string]any{"command": cmd, "run_in_background": true})
			if start.isError || start.structured["task_id"] != "bash-1" {
				t.Fatalf("start = %q %v, want bash-1", start.texts, start.structured)
			}
			if _, ok := start.structured["scope"]; ok || strings.Contains(strings.Join(start.texts, "\n"), "scope") {
				t.Errorf("start = %q %v: want no scope to carry", start.texts, start.structured)
			}
			mark := newMark(t)
			sleeper := marked(mark, "sleep 600")
			c.scopedTool("bash", map[string]any{"command": sleeper, "run_in_background": true})
			awaitMarked(t, mark, 1)

			list := c.scopedTool("task_list", map[string]any{}).texts
			if want := []string{"bash-1 [bash] running — " + cmd + "\nbash-2 [bash] running — " + sleeper}; !slices.Equal(list, want) {
				t.Errorf("task_list = %q, want %q", list, want)
			}
			if got := c.scopedTool("task_kill", map[string]any{"task_id": "bash-2"}).texts; !slices.Equal(got, []string{"requested cancellation of task bash-2"}) {
				t.Errorf("task_kill = %q", got)
			}
			awaitGone(t, mark)

			release(t, path, "it")
			notice := "background task bash-1 (bash: " + cmd + ") finished [status: completed, exit code: 0]. Read its output with task_output."
			notices := 0
			deadline := time.Now().Add(time.Minute)
			for notices == 0 {
				got := c.scopedTool("task_list", map[string]any{}).texts
				for _, text := range got[1:] {
					if text != notice {
						t.Errorf("a notice %q, want only bash-1's (bash-2 was killed by the model)", text)
					}
					notices++
				}
				if time.Now().After(deadline) {
					t.Fatal("no notice of bash-1 within a minute")
				}
				<-time.After(10 * time.Millisecond) // a model's next call
			}
			if notices != 1 {
				t.Errorf("bash-1's notice came %d times in one result, want once", notices)
			}
			if got := c.scopedTool("task_output", map[string]any{"task_id": "bash-1"}).texts; !slices.Equal(got, []string{"got it\n[status: completed, exit code: 0]"}) {
				t.Errorf("task_output = %q: want its output and status, and no second notice", got)
			}
			wait := c.scopedTool("task_wait", map[string]any{"task_ids": []string{"bash-1", "bash-2"}, "mode": "all", "timeout_ms": 60000})
			if wait.isError || !strings.Contains(strings.Join(wait.texts, "\n"), ") finished [status: killed, signal: SIGTERM]") {
				t.Errorf("task_wait = %q, want both ended", wait.texts)
			}

			last := newMark(t)
			c.scopedTool("bash", map[string]any{"command": marked(last, "sleep 600"), "run_in_background": true})
			awaitMarked(t, last, 1)
			c.end()
			awaitGone(t, last)
		})
	}
}

// An explicit scope keeps working on stdio: one minted over HTTP is reached
// from a stdio connection of the same Server that names it.
func TestStdioTakesAnExplicitScope(t *testing.T) {
	srv := newServer(t)
	id, scope := sessionlessRPC(t, srv, httpWire).startScoped("echo from http", "")
	c := sessionlessRPC(t, srv, stdioRPC)
	got := c.scopedTool("task_output", map[string]any{"task_id": id, "scope": scope, "wait": true}).texts
	if want := []string{"from http\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
		t.Errorf("task_output over stdio naming the scope = %q, want %q", got, want)
	}
	if r := c.scopedTool("task_output", map[string]any{"task_id": id}); !r.isError {
		t.Errorf("task_output over stdio without the scope = %q, want not found: the task is the scope's", r.texts)
	}
}
