//go:build linux

package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// newProducer is a real bash producer with a short grace period; the test fails if
// any of its processes is still alive at the end.
func newProducer(t *testing.T) *bash.Producer {
	t.Helper()
	p := bash.New(bash.WithGrace(time.Second))
	t.Cleanup(func() {
		if n := p.Live(); n != 0 {
			t.Errorf("%d bash processes still alive after the test", n)
		}
	})
	return p
}

// gate is a FIFO: a command that reads it (cat "$GATE") blocks until the test calls
// open; a command that writes it blocks until the test reads it.
func gate(t *testing.T) (path string, open func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the command reads
		if err != nil {
			t.Error(err)
			return
		}
		f.Close()
	}
}

// newBashTool is tools.NewBash for options that must be valid.
func newBashTool(t *testing.T, rt *actors.Runtime, p *bash.Producer, opts ...tools.BashOption) *tools.BashTool {
	t.Helper()
	b, err := tools.NewBash(rt, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gone reports whether no process with pid exists (not even a zombie).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func TestBashForeground(t *testing.T) {
	t.Run("returns the output and the exit code", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		b := newBashTool(t, e.rt, p)
		got := b.Call(bg, "", json.RawMessage(`{"command":"echo hello; echo oops >&2; exit 3"}`))
		if want := (tools.Result{Text: lines("hello", "oops", "[status: completed, exit code: 3]")}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if s := e.rt.Stats(); s.Tasks != 0 {
			t.Errorf("a foreground command created %d tasks", s.Tasks)
		}
	})
	t.Run("the timeout kills the whole process group", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		b := newBashTool(t, e.rt, p)
		// The shell starts a grandchild, prints its pid, and waits for it. On a loaded
		// machine the 300 ms may pass before the shell got that far: then there is no
		// pid to check, but still nothing of the command may be left.
		got := b.Call(bg, "", json.RawMessage(`{"command":"sleep 1000 & echo $!; wait","timeout_ms":300}`))
		tail := lines("(timed out after 300 ms; the command and its process group were killed)",
			"[status: killed, signal: SIGTERM]")
		out, _, _ := strings.Cut(got.Text, "\n")
		pid, err := strconv.Atoi(out)
		want := tools.Result{Text: tail}
		if err == nil {
			want.Text = lines(out, tail)
		}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if err == nil && !gone(pid) {
			t.Errorf("grandchild %d survived the timeout", pid)
		}
		if n := p.Live(); n != 0 {
			t.Errorf("%d processes of the command alive after the timeout", n)
		}
	})
	t.Run("timeout_ms above the cap is clamped and the response says so", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		b := newBashTool(t, e.rt, p, tools.WithBashMaxTimeout(200*time.Millisecond))
		got := b.Call(bg, "", json.RawMessage(`{"command":"exec sleep 1000","timeout_ms":600000}`))
		want := tools.Result{Text: lines("(timeout_ms clamped to 200)",
			"(timed out after 200 ms; the command and its process group were killed)",
			"[status: killed, signal: SIGTERM]")}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("the default timeout applies without timeout_ms", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		b := newBashTool(t, e.rt, p, tools.WithBashTimeout(100*time.Millisecond))
		got := b.Call(bg, "", json.RawMessage(`{"command":"exec sleep 1000"}`))
		if !strings.Contains(got.Text, "(timed out after 100 ms;") {
			t.Errorf("got %+v, want a timeout after 100 ms", got)
		}
	})
	t.Run("a command that cannot start is a tool error", func(t *testing.T) {
		p := newProducer(t) // before the env: its process check runs after the runtime closed
		e := newEnv(t)
		dir := filepath.Join(t.TempDir(), "removed")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b := newBashTool(t, e.rt, p, tools.WithWorkDir(dir))
		if err := os.Remove(dir); err != nil { // gone after the tool was made
			t.Fatal(err)
		}
		got := b.Call(bg, "", json.RawMessage(`{"command":"true"}`))
		if !got.IsError || got.Text == "" || strings.Contains(got.Text, "\n") {
			t.Errorf("got %+v, want a one-line tool error", got)
		}
		if n := p.Live(); n != 0 {
			t.Errorf("%d processes started", n)
		}
	})
}

// TestBashOptionsAreCheckedWhenMade: NewBash rejects options that would make every
// call fail, instead of constructing a tool that fails at each call.
func TestBashOptionsAreCheckedWhenMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opt     tools.BashOption
		wantErr string // "" = valid
	}{
		{"a missing working directory is an error", tools.WithWorkDir("/nonexistent"), "tools.WithWorkDir: stat /nonexistent: no such file or directory"},
		{"a working directory that is a file is an error", tools.WithWorkDir(file), "is not a directory"},
		{"an environment entry without = is an error", tools.WithEnv("NOEQUALS"), `tools.WithEnv: malformed entry "NOEQUALS" (want KEY=VALUE)`},
		{"an environment entry with an empty key is an error", tools.WithEnv("=value"), `malformed entry "=value"`},
		{"an existing directory is fine", tools.WithWorkDir(t.TempDir()), ""},
		{"the empty directory keeps the process's own", tools.WithWorkDir(""), ""},
		{"KEY=VALUE and KEY= are fine", tools.WithEnv("A=1", "B="), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t)
			b, err := tools.NewBash(rt, bash.New(), tc.opt)
			if tc.wantErr == "" {
				if err != nil || b == nil {
					t.Errorf("NewBash = %v, %v; want a tool", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, messages.ErrInvalidArgument) {
				t.Errorf("NewBash error = %v, want ErrInvalidArgument containing %q", err, tc.wantErr)
			}
			if b != nil {
				t.Errorf("NewBash returned a tool with its error")
			}
		})
	}
}

func TestBashBackground(t *testing.T) {
	t.Run("run_in_background starts a task of the caller and returns its handle", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		e.agent(t, "a2", 8)
		b := newBashTool(t, e.rt, p)
		got := b.Call(bg, "a1", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true}`))
		want := tools.Result{
			Text: "started background task bash-1 (bash: exec sleep 1000). You will be notified when it finishes; read its output with task_output.",
			Data: tools.Handle{Kind: "background", TaskID: "bash-1"},
		}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if r := e.call("a1", "task_list", `{}`); r.Text != "bash-1 [bash] running — exec sleep 1000" {
			t.Errorf("a1's task_list = %q", r.Text)
		}
		if r := e.call("a2", "task_list", `{}`); r.Text != "(no background tasks)" {
			t.Errorf("a2's task_list = %q, want no tasks", r.Text)
		}
		b2, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"text":"started background task bash-1 (bash: exec sleep 1000). You will be notified when it finishes; read its output with task_output.","data":{"kind":"background","task_id":"bash-1"},"is_error":false}`; string(b2) != want {
			t.Errorf("JSON = %s, want %s", b2, want)
		}
	})
	t.Run("task_kill stops a background command and every process it started", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		path, _ := gate(t)
		b := newBashTool(t, e.rt, p, tools.WithEnv("GATE="+path))
		r := b.Call(bg, "a1", json.RawMessage(`{"command":"sleep 1000 & echo $! > \"$GATE\"; wait","run_in_background":true}`))
		id := r.Data.(tools.Handle).TaskID
		data, err := os.ReadFile(path) // the grandchild's pid, written once it runs
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("pid %q: %v", data, err)
		}
		if got := e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q,"reason":"no longer needed"}`, id)); got.Text != "requested cancellation of task bash-1" {
			t.Errorf("task_kill = %+v", got)
		}
		if got := e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id)); got.Text != "[status: killed, signal: SIGTERM]" {
			t.Errorf("task_output after the kill = %+v", got)
		}
		if !gone(pid) {
			t.Errorf("grandchild %d survived task_kill", pid)
		}
		e.expectOnlySentinel(t, ch, "a1")
	})
	t.Run("disposing the owner kills its background commands", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		if r := b.Call(bg, "a1", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true}`)); r.IsError {
			t.Fatal(r.Text)
		}
		if err := e.rt.Agents().Dispose(bg, "a1"); err != nil {
			t.Fatal(err)
		}
		if n := p.Live(); n != 0 {
			t.Errorf("%d processes alive after Dispose", n)
		}
	})
	t.Run("without the task tools a background call fails with the fence error", func(t *testing.T) {
		p := newProducer(t)
		rt := newRuntime(t)
		b := newBashTool(t, rt, p)
		got := b.Call(bg, "", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true}`))
		want := tools.Result{Text: "background tasks unavailable: no control surface is attached (load the task tools)", IsError: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if n := p.Live(); n != 0 {
			t.Errorf("%d processes started", n)
		}
	})
	t.Run("with run_in_background disabled the parameter is absent and rejected", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		b := newBashTool(t, e.rt, p, tools.WithRunInBackground(false))
		props := b.Schema()["properties"].(map[string]any)
		if _, ok := props["run_in_background"]; ok {
			t.Errorf("schema has run_in_background: %v", props)
		}
		if strings.Contains(b.Description(), "run_in_background") {
			t.Errorf("description mentions run_in_background: %q", b.Description())
		}
		got := b.Call(bg, "", json.RawMessage(`{"command":"touch started","run_in_background":true}`))
		if want := (tools.Result{Text: `invalid arguments: unknown field "run_in_background"`, IsError: true}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		got = b.Call(bg, "", json.RawMessage(`{"command":"echo still works"}`))
		if want := (tools.Result{Text: lines("still works", "[status: completed, exit code: 0]")}); got != want {
			t.Errorf("foreground: got %+v, want %+v", got, want)
		}
	})
}

// TestBashBackgroundTimeout: timeout_ms with run_in_background is honoured — the
// background command and every process it started are killed once it passes, and
// the status line and notice say it timed out — and bounded.
func TestBashBackgroundTimeout(t *testing.T) {
	t.Run("the timeout kills the command and its processes, and the notice says so", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		ch := e.agent(t, "a1", 8)
		path, _ := gate(t)
		b := newBashTool(t, e.rt, p, tools.WithEnv("GATE="+path))
		r := b.Call(bg, "a1", json.RawMessage(`{"command":"sleep 1000 & echo $! > \"$GATE\"; wait","run_in_background":true,"timeout_ms":300}`))
		if r.IsError {
			t.Fatal(r.Text)
		}
		data, err := os.ReadFile(path) // the grandchild's pid, written once it runs
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("pid %q: %v", data, err)
		}
		want := "background task bash-1 (bash: sleep 1000 & echo $! > \"$GATE\"; wait) finished [status: killed, timed out after 300 ms, signal: SIGTERM]. Read its output with task_output."
		if got := next(t, ch); got != want {
			t.Errorf("notice = %q, want %q", got, want)
		}
		if !gone(pid) {
			t.Errorf("grandchild %d survived the background timeout", pid)
		}
		if got := e.call("a1", "task_output", `{"task_id":"bash-1"}`); got.Text != "[status: killed, timed out after 300 ms, signal: SIGTERM]" {
			t.Errorf("task_output = %+v", got)
		}
	})
	t.Run("a command that ends before its timeout is untouched", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		if r := b.Call(bg, "a1", json.RawMessage(`{"command":"echo hi","run_in_background":true,"timeout_ms":600000}`)); r.IsError {
			t.Fatal(r.Text)
		}
		if got := e.call("a1", "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":60000}`); got.Text != lines("hi", "[status: completed, exit code: 0]") {
			t.Errorf("task_output = %+v", got)
		}
	})
	t.Run("a kill before the timeout is a kill, not a timeout", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		if r := b.Call(bg, "a1", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true,"timeout_ms":600000}`)); r.IsError {
			t.Fatal(r.Text)
		}
		e.call("a1", "task_kill", `{"task_id":"bash-1"}`)
		if got := e.call("a1", "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":60000}`); got.Text != "[status: killed, signal: SIGTERM]" {
			t.Errorf("task_output = %+v", got)
		}
	})
	t.Run("a background timeout is not capped like a foreground one", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p, tools.WithBashMaxTimeout(time.Second))
		r := b.Call(bg, "a1", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true,"timeout_ms":3600000}`))
		if r.IsError || strings.Contains(r.Text, "clamped") {
			t.Errorf("got %+v, want a start without clamping", r)
		}
		if got := e.call("a1", "task_output", `{"task_id":"bash-1"}`); got.Text != "[status: running]" {
			t.Errorf("task_output = %+v, want it still running", got)
		}
	})
	t.Run("a timeout beyond a year is rejected and starts nothing", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p)
		got := b.Call(bg, "a1", json.RawMessage(`{"command":"exec sleep 1000","run_in_background":true,"timeout_ms":9223372036854775807}`))
		if want := (tools.Result{Text: "invalid arguments: timeout_ms must be at most 31622400000", IsError: true}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if s := e.rt.Stats(); s.Tasks != 0 {
			t.Errorf("%d tasks started", s.Tasks)
		}
	})
}

// TestBashTranscript plays one background bash task through the tools — started,
// polled twice, waited on, listed — logs the transcript and pins it as a golden file.
func TestBashTranscript(t *testing.T) {
	p := newProducer(t)
	e := newEnv(t)
	ch := e.agent(t, "a1", 8)
	path, open := gate(t)
	b := newBashTool(t, e.rt, p, tools.WithEnv("GATE="+path))
	set, err := tools.NewSet(append(e.tt.Tools(), b)...)
	if err != nil {
		t.Fatal(err)
	}
	var tr strings.Builder
	call := func(name, args string) tools.Result {
		r := set.Call(bg, "a1", name, json.RawMessage(args))
		fmt.Fprintf(&tr, "> %s %s\n", name, args)
		if r.IsError {
			tr.WriteString("error: ")
		}
		tr.WriteString(r.Text + "\n")
		if r.Data != nil {
			d, err := json.Marshal(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&tr, "data: %s\n", d)
		}
		tr.WriteString("\n")
		return r
	}
	// The command prints nothing until the test opens the gate, so both polls see
	// it running with no output, whatever the scheduling.
	call("bash", `{"command":"cat \"$GATE\"; echo 'compiling...'; echo 'ok  example.com/pkg  0.01s'","run_in_background":true}`)
	call("task_output", `{"task_id":"bash-1"}`)
	call("task_output", `{"task_id":"bash-1"}`)
	// The wait is under way before the gate opens, so it is pending when the task
	// settles and no notice follows; a wait begun after the settlement could come
	// too late to stop the notice.
	began := make(chan struct{})
	tools.SetOutputCallHook(e.tt, func(messages.TaskID) { close(began) })
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		call("task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":60000}`)
	}()
	<-began
	open()
	<-waited
	call("task_list", `{}`)
	t.Log("transcript:\n" + tr.String())
	golden(t, "transcript", tr.String())
	// The wait returned the end: no notice follows.
	e.expectOnlySentinel(t, ch, "a1")
}
