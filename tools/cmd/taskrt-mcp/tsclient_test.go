//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tsSDKVersion is the official TypeScript SDK the client test drives taskrt-mcp
// with (testdata/tsclient/package.json pins it, package-lock.json locks it).
const tsSDKVersion = "1.32.2"

// tsClient returns the directory of the TypeScript client, installed: it runs
// npm ci there when node_modules is missing. The test is skipped only when node
// or npm is not installed; .ci/run installs both.
func tsClient(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the TypeScript SDK client test needs node and npm (.ci/run installs them)", tool)
		}
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "tsclient"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	b, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != tsSDKVersion {
		t.Fatalf("%s has @modelcontextprotocol/sdk %s, want %s: run npm ci there", dir, meta.Version, tsSDKVersion)
	}
	return dir
}

// step is one line the client script printed.
type step struct {
	Step string          `json:"step"`
	Name string          `json:"name"`
	raw  json.RawMessage // the whole line
}

// tsTask is an MCP Task as the TypeScript client returned it.
type tsTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
	Meta          struct {
		RuntimeID string `json:"taskrt/task_id"`
	} `json:"_meta"`
}

type tsResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
	Meta    struct {
		RelatedTask struct {
			TaskID string `json:"taskId"`
		} `json:"io.modelcontextprotocol/related-task"`
	} `json:"_meta"`
}

func (r tsResult) texts() []string {
	var out []string
	for _, c := range r.Content {
		out = append(out, c.Text)
	}
	return out
}

type tsError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// TestTypeScriptClientTasks drives protocol-level tasks with the official
// TypeScript SDK client (client.experimental.tasks), over stdio (the client
// launches the server) and streamable HTTP: create, get, result, cancel, list,
// isolation between two sessions, and no process left after a cancel or the
// session's end. The script is testdata/tsclient/tasks.mjs.
func TestTypeScriptClientTasks(t *testing.T) {
	dir := tsClient(t)
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			target := binary(t)
			if mode == "http" {
				target = httpServerProcess(t)
			}
			steps := runTSClient(t, dir, mode, target)
			checkTSSteps(t, steps)
		})
	}
}

// httpServerProcess runs the binary serving HTTP on a loopback port and returns
// its MCP URL; it is stopped (SIGTERM, then waited for) at the end of the test.
func httpServerProcess(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(binary(t), "-http", "127.0.0.1:0")
	stderr := newWatcher()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("the HTTP server did not exit within a minute of SIGTERM")
		}
	})
	return stderr.await(t, regexp.MustCompile(`serving MCP at (http://\S+)`))[1]
}

// runTSClient runs the script and answers its checkpoints after checking the
// processes its tasks started; it returns the steps it printed, by name.
func runTSClient(t *testing.T, dir, mode, target string) map[string]step {
	t.Helper()
	mark1, mark2 := newMark(), newMark()
	cmd := exec.Command("node", "tasks.mjs", mode, target)
	cmd.Dir = dir
	stderr := newWatcher()
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killAllMarked(mark1, mark2)
	})
	if _, err := fmt.Fprintf(in, "%s %s\n", mark1, mark2); err != nil {
		t.Fatal(err)
	}
	steps := map[string]step{}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s step
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Errorf("script printed %q: %v", sc.Text(), err)
			continue
		}
		s.raw = append(json.RawMessage(nil), sc.Bytes()...)
		if s.Step != "checkpoint" {
			steps[s.Step] = s
			continue
		}
		switch s.Name {
		case "running":
			awaitMarked(t, mark1, 1)
		case "cancelled": // tasks/cancel, then tasks/result returned
			awaitGone(t, mark1)
		case "before-end":
			awaitMarked(t, mark2, 1)
		case "ended": // the client closed (stdio) or deleted (HTTP) its sessions
			awaitGone(t, mark2)
		}
		steps["checkpoint "+s.Name] = s
		if _, err := io.WriteString(in, "\n"); err != nil {
			t.Fatal(err)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node tasks.mjs %s: %v\nstderr:\n%s", mode, err, stderr)
	}
	return steps
}

func killAllMarked(marks ...string) {
	for _, m := range marks {
		for _, pid := range markedPIDs(m) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// field decodes one field of a step.
func field[T any](t *testing.T, steps map[string]step, name, key string) T {
	t.Helper()
	var v T
	s, ok := steps[name]
	if !ok {
		t.Fatalf("the script printed no %q step", name)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(s.raw, &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(m[key], &v); err != nil {
		t.Fatalf("step %s field %s = %s: %v", name, key, m[key], err)
	}
	return v
}

func checkTSSteps(t *testing.T, steps map[string]step) {
	t.Run("the client sees the tasks capability and bash's taskSupport", func(t *testing.T) {
		if got, want := string(field[json.RawMessage](t, steps, "connected", "tasks")), `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`; got != want {
			t.Errorf("tasks capability = %s, want %s", got, want)
		}
		for name, support := range field[map[string]*string](t, steps, "connected", "execution") {
			if want := name == "bash"; (support != nil && *support == "optional") != want {
				t.Errorf("tool %s taskSupport = %v, want optional only for bash", name, support)
			}
		}
	})
	t.Run("callToolStream: created working, then the foreground result", func(t *testing.T) {
		type message struct {
			Type   string   `json:"type"`
			Task   tsTask   `json:"task"`
			Result tsResult `json:"result"`
		}
		msgs := field[[]message](t, steps, "stream", "messages")
		fg := field[tsResult](t, steps, "stream", "foreground")
		if len(msgs) < 3 || msgs[0].Type != "taskCreated" || msgs[len(msgs)-1].Type != "result" {
			t.Fatalf("stream = %+v, want taskCreated, taskStatus…, result", msgs)
		}
		if msgs[0].Task.Status != "working" {
			t.Errorf("created status = %q, want working", msgs[0].Task.Status)
		}
		for _, m := range msgs[1 : len(msgs)-1] {
			if m.Type != "taskStatus" || (m.Task.Status != "working" && m.Task.Status != "completed") {
				t.Errorf("stream message %+v, want a working or completed taskStatus", m)
			}
		}
		res := msgs[len(msgs)-1].Result
		if want := []string{"hello from a task\n[status: completed, exit code: 0]"}; !slices.Equal(res.texts(), want) || !slices.Equal(fg.texts(), want) {
			t.Errorf("task result = %q, foreground = %q, want both %q", res.texts(), fg.texts(), want)
		}
		if res.Meta.RelatedTask.TaskID != msgs[0].Task.TaskID {
			t.Errorf("related-task = %q, want %q", res.Meta.RelatedTask.TaskID, msgs[0].Task.TaskID)
		}
	})
	created := field[tsTask](t, steps, "created", "task")
	t.Run("get and list", func(t *testing.T) {
		if created.Status != "working" || created.TTL == nil || *created.TTL != 60000 || created.PollInterval != 500 {
			t.Errorf("created = %+v, want working, ttl 60000, pollInterval 500", created)
		}
		got := field[tsTask](t, steps, "get", "task")
		if got.TaskID != created.TaskID || got.Status != "working" || got.Meta.RuntimeID != "bash-2" {
			t.Errorf("getTask = %+v, want %s working, runtime id bash-2", got, created.TaskID)
		}
		list := field[[]tsTask](t, steps, "list", "tasks")
		var ids, statuses []string
		for _, tk := range list {
			ids, statuses = append(ids, tk.TaskID), append(statuses, tk.Status)
		}
		if len(list) != 2 || ids[1] != created.TaskID || !slices.Equal(statuses, []string{"completed", "working"}) {
			t.Errorf("listTasks = %v %v, want the finished task and %s working", ids, statuses, created.TaskID)
		}
	})
	t.Run("another session cannot reach the task: foreign reads like unknown", func(t *testing.T) {
		unknown := field[tsError](t, steps, "foreign", "unknown")
		if unknown.Code != -32602 {
			t.Errorf("unknown id: %+v, want -32602", unknown)
		}
		for _, key := range []string{"get", "result", "cancel"} {
			e := field[tsError](t, steps, "foreign", key)
			if e.Code != -32602 || strings.ReplaceAll(e.Message, created.TaskID, "no-such-task-id") != unknown.Message {
				t.Errorf("foreign %s: %+v, want %q with the id", key, e, unknown.Message)
			}
		}
		if list := field[[]tsTask](t, steps, "foreign", "list"); len(list) != 0 {
			t.Errorf("the other session lists %+v, want none", list)
		}
	})
	t.Run("cancel: cancelled, stays cancelled, a second cancel is -32602", func(t *testing.T) {
		if got := field[tsTask](t, steps, "cancel", "task"); got.Status != "cancelled" {
			t.Errorf("cancelTask = %+v, want cancelled", got)
		}
		res := field[tsResult](t, steps, "cancelled-result", "result")
		if !res.IsError || !strings.Contains(strings.Join(res.texts(), "\n"), "[status: killed") {
			t.Errorf("getTaskResult of the cancelled task = %q (isError %v), want the killed command's error", res.texts(), res.IsError)
		}
		if got := field[tsTask](t, steps, "after-cancel", "task"); got.Status != "cancelled" {
			t.Errorf("getTask after the kill = %+v, want cancelled", got)
		}
		if again := field[tsError](t, steps, "after-cancel", "again"); again.Code != -32602 || !strings.Contains(again.Message, "already cancelled") {
			t.Errorf("second cancelTask = %+v, want -32602 already cancelled", again)
		}
	})
	t.Run("the script ran to its end", func(t *testing.T) {
		for _, name := range []string{"checkpoint running", "checkpoint cancelled", "checkpoint before-end", "checkpoint ended", "done"} {
			if _, ok := steps[name]; !ok {
				t.Errorf("no %q step", name)
			}
		}
	})
}

// TestSessionlessFlag pins -sessionless: by default go-sdk's client, which speaks
// 2026-07-28 first, is served in it; with -sessionless=false it falls back to a
// 2025-11-25 session.
func TestSessionlessFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "2026-07-28"},
		{[]string{"-sessionless=false"}, "2025-11-25"},
	} {
		t.Run(fmt.Sprintf("%v serves %s", tc.args, tc.want), func(t *testing.T) {
			cmd := exec.Command(binary(t), tc.args...)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "taskrt-test", Version: "1"}, nil).
				Connect(bg, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Errorf("negotiated %s, want %s", got, tc.want)
			}
			res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "hi\n[status: completed, exit code: 0]" {
				t.Errorf("bash = %q", got)
			}
		})
	}
}
