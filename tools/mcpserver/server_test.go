//go:build linux

package mcpserver_test

//lint:file-ignore SA1019 the tests check the notices sent as log messages, which the server keeps for the revisions that still have logging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

func TestToolList(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	res, err := c.cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	descriptions := parseDescriptions(goldenFile(t, "descriptions"))
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		t.Run(tool.Name, func(t *testing.T) {
			t.Run("description is the tools package's", func(t *testing.T) {
				if want := descriptions[tool.Name]; tool.Description != want {
					t.Errorf("description\n got: %q\nwant: %q", tool.Description, want)
				}
			})
			t.Run("input schema matches the tools package's golden file", func(t *testing.T) {
				b, err := json.MarshalIndent(tool.InputSchema, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if got, want := string(b)+"\n", goldenFile(t, "schema_"+tool.Name); got != want {
					t.Errorf("schema\n got: %s\nwant: %s", got, want)
				}
			})
		})
	}
	t.Run("the tools are bash and every task tool, nothing else", func(t *testing.T) {
		want := []string{"bash"}
		for _, tool := range taskTools(t) {
			want = append(want, tool.Name())
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("tools = %v, want %v", names, want)
		}
		for _, name := range []string{"bash", "task_output", "task_list", "task_kill", "task_wait", "task_input"} {
			if !slices.Contains(names, name) {
				t.Errorf("%s is missing", name)
			}
		}
	})
}

// taskTools returns the tools package's task tools, from a runtime of their own.
func taskTools(t *testing.T) []tools.Tool {
	t.Helper()
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	tt := tools.NewTaskTools(rt)
	defer func() {
		tt.Close()
		if err := rt.Close(bg); err != nil {
			t.Error(err)
		}
	}()
	return tt.Tools()
}

// parseDescriptions reads descriptions.golden: "== name" lines, each followed by
// the description and a blank line.
func parseDescriptions(s string) map[string]string {
	out := map[string]string{}
	for _, block := range strings.Split(s, "== ")[1:] {
		name, desc, _ := strings.Cut(block, "\n")
		out[name] = strings.TrimSuffix(desc, "\n\n")
	}
	return out
}

func TestHandshake(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	init := c.cs.InitializeResult()
	t.Run("the instructions are the tools package's prompt section, and where a notice comes from over MCP", func(t *testing.T) {
		got := init.Instructions
		if !strings.HasPrefix(got, tools.PromptSection().Text+"\n\n") {
			t.Errorf("instructions\n got: %q\nwant the prompt section first: %q", got, tools.PromptSection().Text)
		}
		for _, want := range []string{"comes with the result of your next call", "before you end your turn while background tasks are running, call task_list"} {
			if !strings.Contains(got, want) {
				t.Errorf("instructions %q do not say %q", got, want)
			}
		}
	})
	t.Run("a client trying the sessionless protocol falls back to sessions", func(t *testing.T) {
		if got, want := init.ProtocolVersion, "2025-11-25"; got != want {
			t.Errorf("protocol version = %q, want %q", got, want)
		}
	})
	t.Run("the server offers logging and tools", func(t *testing.T) {
		if init.Capabilities.Logging == nil || init.Capabilities.Tools == nil {
			t.Errorf("capabilities = %+v, want logging and tools", init.Capabilities)
		}
	})
}

func TestForeground(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	direct, err := tools.NewBash(srv.Runtime(), bash.New())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"returns the output and the exit code", map[string]any{"command": "echo hello; echo oops >&2"}, "hello\noops\n[status: completed, exit code: 0]"},
		{"a failing command is not a tool error", map[string]any{"command": "exit 3"}, "[status: completed, exit code: 3]"},
		{"the timeout kills the command", map[string]any{"command": "sleep 60", "timeout_ms": 300},
			"(timed out after 300 ms; the command and its process group were killed)\n[status: killed, signal: SIGTERM]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := c.call(t, "bash", tc.args)
			if got := texts(t, res); !slices.Equal(got, []string{tc.want}) || res.IsError {
				t.Errorf("got %q (isError %v), want %q", got, res.IsError, tc.want)
			}
			raw, _ := json.Marshal(tc.args)
			if d := direct.Call(bg, "", raw); d.Text != tc.want {
				t.Errorf("the tool itself says %q, want the same text as over MCP", d.Text)
			}
			if s := structured(t, res); s != "" {
				t.Errorf("structuredContent = %s, want none", s)
			}
		})
	}
}

func TestForegroundProgress(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	gate1, gate2 := fifo(t), fifo(t)
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": fmt.Sprintf("echo line-1; cat %s; echo line-2; cat %s; echo line-3", gate1, gate2),
	}}
	params.SetProgressToken("tok-1")
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.cs.CallTool(bg, params)
		done <- result{res, err}
	}()
	// Each report carries the latest line; the command holds on a fifo until the
	// test has seen the line it expects.
	var last float64
	awaitLine := func(t *testing.T, want string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case p := <-c.progress:
				if p.ProgressToken != "tok-1" {
					t.Errorf("token %v, want tok-1", p.ProgressToken)
				}
				if p.Progress <= last {
					t.Errorf("progress %v after %v: want it to grow", p.Progress, last)
				}
				last = p.Progress
				if p.Message == want {
					return
				}
			case <-deadline:
				t.Fatalf("no progress report with %q within a minute", want)
			}
		}
	}
	t.Run("a report per second carries the latest output line", func(t *testing.T) {
		awaitLine(t, "line-1")
		release(t, gate1, "")
		awaitLine(t, "line-2")
		release(t, gate2, "")
	})
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Run("the result is the tool's text", func(t *testing.T) {
		want := "line-1\n\nline-2\n\nline-3\n[status: completed, exit code: 0]"
		if got := texts(t, r.res); !slices.Equal(got, []string{want}) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// A client drives a command's stdin over MCP: bash with stdin "pipe", task_input
// writes a line, and the answer is read with task_output until it appears; eof ends
// the command.
func TestStdinOverMCP(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	res := c.call(t, "bash", map[string]any{"command": `while read -r l; do echo "got $l"; done`, "run_in_background": true, "stdin": "pipe"})
	if res.IsError {
		t.Fatalf("start: %q", texts(t, res))
	}
	r := c.call(t, "task_input", map[string]any{"task_id": "bash-1", "text": "hello\n"})
	if r.IsError {
		t.Fatalf("task_input: %q", texts(t, r))
	}
	// task_input returns the reply printed within its quiet window; on a slow machine
	// the reply may come later, and task_output then waits for it.
	if reply := texts(t, r)[0]; !strings.HasPrefix(reply, "got hello\n") {
		r = c.call(t, "task_output", map[string]any{"task_id": "bash-1", "wait": true, "until": "got hello", "timeout_ms": 60000})
		if got := texts(t, r)[0]; !strings.Contains(got, "[matched: got hello]") {
			t.Fatalf("task_input = %q, then task_output until = %q, want the reply", reply, got)
		}
	}
	r = c.call(t, "task_input", map[string]any{"task_id": "bash-1", "text": "", "eof": true})
	if r.IsError {
		t.Fatalf("eof: %q", texts(t, r))
	}
	r = c.call(t, "task_output", map[string]any{"task_id": "bash-1", "wait": true, "timeout_ms": 60000})
	if got, want := texts(t, r)[0], "[status: completed, exit code: 0]"; !strings.HasSuffix(got, want) {
		t.Errorf("after eof = %q, want it to end with %q", got, want)
	}
}

func TestBackground(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	gate := fifo(t)
	res := c.call(t, "bash", map[string]any{"command": "echo started; cat " + gate, "run_in_background": true})
	t.Run("the start returns the handle as structured content", func(t *testing.T) {
		want := fmt.Sprintf(`{"kind":"background","message":"started background task bash-1 (bash: echo started; cat %s). You will be notified when it finishes; read its output with task_output.","task_id":"bash-1"}`, gate)
		if got := structured(t, res); got != want {
			t.Errorf("structuredContent = %s, want %s", got, want)
		}
		want = fmt.Sprintf("started background task bash-1 (bash: echo started; cat %s). You will be notified when it finishes; read its output with task_output.", gate)
		if got := texts(t, res); !slices.Equal(got, []string{want}) || res.IsError {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("a poll returns the new output while it runs", func(t *testing.T) {
		var out strings.Builder
		for !strings.Contains(out.String(), "started") {
			r := c.call(t, "task_output", map[string]any{"task_id": "bash-1"})
			text := texts(t, r)[0]
			if !strings.HasSuffix(text, "[status: running]") {
				t.Fatalf("poll = %q, want it to end with [status: running]", text)
			}
			out.WriteString(text)
		}
	})
	t.Run("task_list shows it running", func(t *testing.T) {
		want := "bash-1 [bash] running — echo started; cat " + gate
		if got := texts(t, c.call(t, "task_list", map[string]any{})); !slices.Equal(got, []string{want}) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("a wait returns the rest and the final status", func(t *testing.T) {
		release(t, gate, "finished")
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": "bash-1", "wait": true}))
		if want := []string{"finished\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestNotices(t *testing.T) {
	// finished starts a background command held on a fifo, lets it finish once the
	// start's result is in (so that the notice cannot ride on that result), and
	// returns once its notice reached the client as a log message — by then it is
	// queued for the next result. It returns the notice and the task_list line.
	finished := func(t *testing.T) (c *client, notice, list string) {
		srv := newServer(t)
		c, _ = serve(t, srv)
		c.setLogLevel(t)
		gate := fifo(t)
		cmd := "cat " + gate + "; echo done"
		notice = "background task bash-1 (bash: " + cmd + ") finished [status: completed, exit code: 0]. Read its output with task_output."
		list = "bash-1 [bash] completed — " + cmd
		c.call(t, "bash", map[string]any{"command": cmd, "run_in_background": true})
		release(t, gate, "x")
		l := c.nextLog(t)
		if l.Logger != "taskrt" || l.Level != "info" || l.Data != notice {
			t.Fatalf("log message = %+v, want logger taskrt, level info, data %q", l, notice)
		}
		return c, notice, list
	}
	t.Run("arrives as a log message and is appended to the next result exactly once", func(t *testing.T) {
		c, notice, list := finished(t)
		if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{list, notice}; !slices.Equal(got, want) {
			t.Errorf("next result = %q, want %q", got, want)
		}
		if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{list}; !slices.Equal(got, want) {
			t.Errorf("the result after = %q, want %q", got, want)
		}
	})
	dropped := []struct {
		name, tool string
		args       map[string]any
		want       func(cmd string) string // the tool's own text, for the command
	}{
		{"is dropped when the model read the final state meanwhile", "task_output", map[string]any{"task_id": "bash-1"},
			func(string) string { return "x\ndone\n[status: completed, exit code: 0]" }},
		{"is dropped when the model waited on the task meanwhile", "task_output", map[string]any{"task_id": "bash-1", "wait": true},
			func(string) string { return "x\ndone\n[status: completed, exit code: 0]" }},
		{"is dropped when the model killed the finished task meanwhile", "task_kill", map[string]any{"task_id": "bash-1"},
			func(string) string { return "[status: completed, exit code: 0]" }},
		{"is dropped when the model waited on it with task_wait meanwhile", "task_wait", map[string]any{"task_ids": []string{"bash-1"}},
			func(cmd string) string {
				return "bash-1 (bash: " + cmd + ") finished [status: completed, exit code: 0]\nRead a finished task's output with task_output."
			}},
	}
	for _, tc := range dropped {
		t.Run(tc.name, func(t *testing.T) {
			c, _, list := finished(t)
			cmd := strings.TrimPrefix(list, "bash-1 [bash] completed — ")
			if got, want := texts(t, c.call(t, tc.tool, tc.args)), []string{tc.want(cmd)}; !slices.Equal(got, want) {
				t.Errorf("%s = %q, want %q (no notice)", tc.tool, got, want)
			}
			if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{list}; !slices.Equal(got, want) {
				t.Errorf("the result after = %q, want %q", got, want)
			}
		})
	}
	t.Run("is appended to a tool error too", func(t *testing.T) {
		c, notice, _ := finished(t)
		res := c.call(t, "task_output", map[string]any{"task_id": "bash-9"})
		if got, want := texts(t, res), []string{"task not found: bash-9", notice}; !slices.Equal(got, want) || !res.IsError {
			t.Errorf("got %q (isError %v), want %q (isError true)", got, res.IsError, want)
		}
	})
	t.Run("a killed task sends none", func(t *testing.T) {
		srv := newServer(t)
		c, _ := serve(t, srv)
		c.setLogLevel(t)
		gate := fifo(t)
		c.call(t, "bash", map[string]any{"command": "cat " + gate, "run_in_background": true})
		c.call(t, "task_kill", map[string]any{"task_id": "bash-1"})
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": "bash-1", "wait": true}))
		if want := []string{"[status: killed, signal: SIGTERM]"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
		// A second task's notice is the next log message: nothing came for the first.
		c.call(t, "bash", map[string]any{"command": "true", "run_in_background": true})
		if l := c.nextLog(t); !strings.HasPrefix(fmt.Sprint(l.Data), "background task bash-2 ") {
			t.Errorf("log message = %v, want bash-2's notice", l.Data)
		}
	})
}

func TestSessionsIsolated(t *testing.T) {
	srv := newServer(t)
	a, _ := serve(t, srv)
	b, _ := serve(t, srv)
	a.setLogLevel(t)
	b.setLogLevel(t)
	gate := fifo(t)
	a.call(t, "bash", map[string]any{"command": "cat " + gate, "run_in_background": true})

	foreign := []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"another session's task reads like an unknown id", "task_output", map[string]any{"task_id": "bash-1"}, "task not found: bash-1"},
		{"another session's task cannot be waited on", "task_output", map[string]any{"task_id": "bash-1", "wait": true, "timeout_ms": 50}, "task not found: bash-1"},
		{"another session's task cannot be killed", "task_kill", map[string]any{"task_id": "bash-1"}, "task not found: bash-1"},
		{"an unknown id reads the same", "task_output", map[string]any{"task_id": "bash-2"}, "task not found: bash-2"},
	}
	for _, tc := range foreign {
		t.Run(tc.name, func(t *testing.T) {
			res := b.call(t, tc.tool, tc.args)
			if got := texts(t, res); !slices.Equal(got, []string{tc.want}) || !res.IsError {
				t.Errorf("got %q (isError %v), want %q as a tool error", got, res.IsError, tc.want)
			}
		})
	}
	t.Run("task_list shows only the session's own tasks", func(t *testing.T) {
		if got, want := texts(t, b.call(t, "task_list", map[string]any{})), []string{"(no background tasks)"}; !slices.Equal(got, want) {
			t.Errorf("b's list = %q, want %q", got, want)
		}
		if got, want := texts(t, a.call(t, "task_list", map[string]any{})), []string{"bash-1 [bash] running — cat " + gate}; !slices.Equal(got, want) {
			t.Errorf("a's list = %q, want %q", got, want)
		}
	})
	t.Run("the notice goes to the owning session only", func(t *testing.T) {
		release(t, gate, "x")
		notice := a.nextLog(t).Data
		if got := texts(t, b.call(t, "task_list", map[string]any{})); len(got) != 1 {
			t.Errorf("b's next result = %q, want no notice", got)
		}
		if got := texts(t, a.call(t, "task_list", map[string]any{})); len(got) != 2 || got[1] != notice {
			t.Errorf("a's next result = %q, want the notice %q appended", got, notice)
		}
		select {
		case l := <-b.logs:
			t.Errorf("b got a log message: %+v", l)
		default:
		}
	})
}

func TestBadInput(t *testing.T) {
	srv := newServer(t)
	c, _ := serve(t, srv)
	direct, err := tools.NewBash(srv.Runtime(), bash.New())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool string
		args       any
		want       string
	}{
		{"an unknown field", "bash", map[string]any{"command": "echo hi", "background": true}, `invalid arguments: unknown field "background"`},
		{"a wrong type", "bash", map[string]any{"command": 7}, "invalid arguments: command must be a string"},
		{"a missing command", "bash", map[string]any{}, "invalid arguments: missing required field command"},
		{"an empty command", "bash", map[string]any{"command": " "}, "invalid arguments: command must not be empty"},
		{"a negative timeout", "bash", map[string]any{"command": "echo hi", "timeout_ms": -1}, "invalid arguments: timeout_ms must be a positive number of milliseconds"},
		{"arguments that are not an object", "bash", []int{1}, "invalid arguments: arguments must be a JSON object"},
		{"a missing task id", "task_output", map[string]any{}, "invalid arguments: missing required field task_id"},
		{"an argument task_list does not take", "task_list", map[string]any{"all": true}, `invalid arguments: unknown field "all"`},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is a tool error with the tool's reason", func(t *testing.T) {
			res := c.call(t, tc.tool, tc.args)
			if got := texts(t, res); !slices.Equal(got, []string{tc.want}) || !res.IsError {
				t.Errorf("got %q (isError %v), want %q as a tool error", got, res.IsError, tc.want)
			}
			if tc.tool == "bash" {
				raw, _ := json.Marshal(tc.args)
				if d := direct.Call(bg, "", raw); d.Text != tc.want {
					t.Errorf("the tool itself says %q", d.Text)
				}
			}
		})
	}
	t.Run("an unknown tool is a protocol error", func(t *testing.T) {
		_, err := c.cs.CallTool(bg, &mcp.CallToolParams{Name: "bash_output", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), `unknown tool "bash_output"`) {
			t.Errorf("err = %v, want the unknown tool named", err)
		}
	})
	t.Run("nothing was started", func(t *testing.T) {
		if got, want := texts(t, c.call(t, "task_list", map[string]any{})), []string{"(no background tasks)"}; !slices.Equal(got, want) {
			t.Errorf("task_list = %q, want %q", got, want)
		}
	})
}

func TestOwnerLimit(t *testing.T) {
	srv := newServer(t, mcpserver.WithRuntimeOptions(actors.WithOwnerLimit(1)))
	a, _ := serve(t, srv)
	b, _ := serve(t, srv)
	gate := fifo(t)
	a.call(t, "bash", map[string]any{"command": "cat " + gate, "run_in_background": true})
	t.Run("a session over its cap gets the runtime's error", func(t *testing.T) {
		res := a.call(t, "bash", map[string]any{"command": "true", "run_in_background": true})
		want := "background task limit reached for this owner (limit: 1); use task_kill to stop an unneeded task, wait for it to finish, then retry"
		if got := texts(t, res); !slices.Equal(got, []string{want}) || !res.IsError {
			t.Errorf("got %q (isError %v), want %q", got, res.IsError, want)
		}
	})
	t.Run("the cap is per session", func(t *testing.T) {
		res := b.call(t, "bash", map[string]any{"command": "true", "run_in_background": true})
		if res.IsError {
			t.Errorf("b's start failed: %q", texts(t, res))
		}
	})
	release(t, gate, "x")
}

func TestSessionEnd(t *testing.T) {
	t.Run("the client going away mid-call kills the session's tasks and its running command", func(t *testing.T) {
		srv := newServer(t)
		c, served := serve(t, srv)
		mark := newMark(t)
		for range 2 {
			c.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
		}
		fg := make(chan error, 1)
		go func() {
			_, err := c.cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marked(mark, "sleep 300")}})
			fg <- err
		}()
		awaitMarked(t, mark, 3)
		c.conn.cut(t)
		if err := served.wait(t); err != nil {
			t.Errorf("Serve = %v", err)
		}
		// Serve returns once the owner is disposed: nothing may be left by then.
		assertNoMarked(t, mark)
		if err := <-fg; err == nil {
			t.Error("the foreground call succeeded after its session ended")
		}
		if got := srv.Runtime().Stats(); got.Agents != 0 || got.Running != 0 {
			t.Errorf("runtime after the session = %+v, want no agent and no running task", got)
		}
	})
	t.Run("cancelling Serve's context ends the session and kills its processes", func(t *testing.T) {
		srv := newServer(t)
		ct, st := mcp.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ctx, st) }()
		mc, c := newClient()
		cs, err := mc.Connect(bg, ct, sessionOpts)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		c.cs = cs
		mark := newMark(t)
		c.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
		awaitMarked(t, mark, 1)
		cancel()
		if err := <-served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
		assertNoMarked(t, mark)
		if err := cs.Wait(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Logf("client ended with %v", err)
		}
	})
	t.Run("Close ends every session and kills every process", func(t *testing.T) {
		srv, err := mcpserver.New()
		if err != nil {
			t.Fatal(err)
		}
		mark := newMark(t)
		var clients []*client
		var serves []*serving
		for range 2 {
			c, served := serve(t, srv)
			clients, serves = append(clients, c), append(serves, served)
			c.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
		}
		fg := make(chan error, 1)
		go func() {
			_, err := clients[0].cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marked(mark, "sleep 300")}})
			fg <- err
		}()
		awaitMarked(t, mark, 3)
		if err := srv.Close(bg); err != nil {
			t.Fatalf("Close = %v", err)
		}
		assertNoMarked(t, mark)
		for i, served := range serves {
			if err := served.wait(t); err != nil {
				t.Errorf("Serve %d = %v", i, err)
			}
		}
		for i, c := range clients {
			if err := c.cs.Wait(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				t.Logf("client %d ended with %v", i, err)
			}
		}
		if err := <-fg; err == nil {
			t.Error("the foreground call succeeded after the server closed")
		}
		t.Run("a new session is refused", func(t *testing.T) {
			_, st := mcp.NewInMemoryTransports()
			if _, err := srv.Connect(bg, st); !errors.Is(err, mcpserver.ErrClosed) {
				t.Errorf("Connect after Close = %v, want ErrClosed", err)
			}
		})
	})
}
