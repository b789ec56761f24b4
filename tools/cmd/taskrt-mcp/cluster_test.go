//go:build linux

package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskrt/taskrt/internal/sessionless"
	"github.com/taskrt/taskrt/producers/remote"
)

// frontendProc is a taskrt-mcp -http -nats process.
type frontendProc struct {
	cmd    *exec.Cmd
	url    string        // its MCP endpoint
	id     string        // its frontend id
	stderr *watcher      // what it logged
	exited chan struct{} // closed once the process was waited for
}

// startFrontend runs the binary as a frontend of the cluster at natsURL; the
// test's end stops it (SIGTERM) unless it was killed.
func startFrontend(t *testing.T, natsURL string, lease time.Duration, extra ...string) *frontendProc {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"-http", "127.0.0.1:0", "-nats", natsURL, "-lease", lease.String()}, extra...)...)
	stderr := newWatcher()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &frontendProc{cmd: cmd, stderr: stderr, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-f.exited
			t.Errorf("frontend %s did not exit within a minute of SIGTERM", f.id)
		}
	})
	f.id = stderr.await(t, regexp.MustCompile(`frontend (\S+): serves`))[1]
	f.url = stderr.await(t, regexp.MustCompile(`serving MCP at (http://\S+)`))[1]
	return f
}

// sessionlessCall is one 2026-07-28 tools/call over HTTP: its text items and
// structured content, or the JSON-RPC error's message.
type sessionlessCall struct {
	texts      []string
	isError    bool
	structured map[string]any
	rpcError   string
}

// callAt sends one sessionless tools/call to url.
func callAt(t *testing.T, url, tool string, args map[string]any) sessionlessCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	r, err := sessionless.Call(ctx, nil, url, tool, args)
	if err != nil {
		t.Fatalf("%s at %s: %v", tool, url, err)
	}
	return sessionlessCall{texts: r.Texts, isError: r.IsError, structured: r.Structured, rpcError: r.RPCError}
}

func (c sessionlessCall) text() string { return strings.Join(c.texts, "\n") }

// TestFrontendProcessesServeAScope: three taskrt-mcp -http -nats processes and a
// worker. A scope minted on A is served by all three in turn — start, read,
// list, wait, kill — with its commands on the worker; then A is killed with
// SIGKILL: within the lease + 2 s a survivor serves the scope, whose long task
// ran on throughout and is read, listed, killed and waited from the survivors.
func TestFrontendProcessesServeAScope(t *testing.T) {
	const lease = 2 * time.Second
	ns, err := remote.StartServer(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	wnc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("w1"), remote.WithLease(lease), remote.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(context.Background()) }()

	a, b, c := startFrontend(t, ns.URL(), lease), startFrontend(t, ns.URL(), lease), startFrontend(t, ns.URL(), lease)
	mark := newMark()
	start := callAt(t, a.url, "bash", map[string]any{"command": marked(mark, `echo "hi on $TASKRT_WORKER"; sleep 600`), "run_in_background": true})
	id, _ := start.structured["task_id"].(string)
	scope, _ := start.structured["scope"].(string)
	if id != "bash-1" || scope == "" {
		t.Fatalf("start at A = %q %v", start.texts, start.structured)
	}
	steps := []struct {
		at   *frontendProc
		tool string
		args map[string]any
		want string // a prefix of the answer's text
	}{
		{b, "task_output", map[string]any{"task_id": id, "wait": true, "until": "hi on", "timeout_ms": 30000}, "hi on w1\n[matched: hi on]\n[status: running]"},
		{c, "task_list", nil, "bash-1 [bash] running — " + marked(mark, `echo "hi on $TASKRT_WORKER"; sleep 600`)},
		{a, "bash", map[string]any{"command": "echo two", "run_in_background": true}, "started background task bash-2 (bash: echo two)"},
		{b, "task_wait", map[string]any{"task_ids": []string{"bash-2"}, "timeout_ms": 30000}, "bash-2 (bash: echo two) finished [status: completed, exit code: 0]"},
		{c, "task_output", map[string]any{"task_id": "bash-2"}, "two\n[status: completed, exit code: 0]"},
		{a, "bash", map[string]any{"command": marked(mark, "sleep 600"), "run_in_background": true}, "started background task bash-3"},
		{b, "task_kill", map[string]any{"task_id": "bash-3"}, "requested cancellation of task bash-3"},
		{c, "task_wait", map[string]any{"task_ids": []string{"bash-3"}, "timeout_ms": 30000}, "bash-3 (bash: " + marked(mark, "sleep 600") + ") finished [status: killed, signal: SIGTERM]"},
		{a, "task_list", nil, "bash-1 [bash] running — "},
	}
	for i, s := range steps {
		args := map[string]any{"scope": scope}
		for k, v := range s.args {
			args[k] = v
		}
		got := callAt(t, s.at.url, s.tool, args)
		if got.rpcError != "" || got.isError || !strings.HasPrefix(got.text(), s.want) {
			t.Fatalf("step %d, %s at %s: %q (error %q), want it to begin %q", i, s.tool, s.at.id, got.text(), got.rpcError, s.want)
		}
	}
	awaitMarked(t, mark, 1) // bash-1 runs on the worker
	// The cluster numbers the tasks: a scope minted on B goes on from A's bash-3,
	// so no two tasks share an id whichever frontend homes them.
	other := callAt(t, b.url, "bash", map[string]any{"command": "echo other", "run_in_background": true})
	if id, _ := other.structured["task_id"].(string); id != "bash-4" || other.structured["scope"] == scope {
		t.Fatalf("a start in a new scope at B = %q %v, want bash-4 in a scope of its own", other.texts, other.structured)
	}

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.exited
	// A survivor takes the scope: bash-1 runs on, read, listed, killed and waited
	// from the others; the tasks whose end the model had (bash-2 waited, bash-3
	// killed) bring no notice.
	read := awaitServed(t, b, killed, "task_output", map[string]any{"task_id": id, "scope": scope})
	took := time.Since(killed)
	t.Logf("home SIGKILL → the scope served by a survivor: %s", took.Round(time.Millisecond))
	if took > lease+2*time.Second {
		t.Errorf("the scope was served again %s after the SIGKILL, want within the lease + 2s", took)
	}
	if read.isError || read.text() != "[status: running]" {
		t.Errorf("task_output of %s after the takeover = %q, want it running, nothing read twice", id, read.texts)
	}
	if len(markedPIDs(mark)) == 0 {
		t.Errorf("bash-1's command died with its home")
	}
	after := []struct {
		at   *frontendProc
		tool string
		args map[string]any
		want string
	}{
		{c, "task_list", nil, "bash-1 [bash] running — "},
		{c, "task_kill", map[string]any{"task_id": id}, "requested cancellation of task bash-1"},
		{b, "task_wait", map[string]any{"task_ids": []string{id}, "timeout_ms": 30000}, "bash-1 (bash: " + marked(mark, `echo "hi on $TASKRT_WORKER"; sleep 600`) + ") finished [status: killed, signal: SIGTERM]"},
		{b, "task_output", map[string]any{"task_id": "bash-2"}, "[status: completed, exit code: 0]"},
	}
	for i, s := range after {
		args := map[string]any{"scope": scope}
		for k, v := range s.args {
			args[k] = v
		}
		got := callAt(t, s.at.url, s.tool, args)
		if got.rpcError != "" || got.isError || !strings.HasPrefix(got.text(), s.want) || len(got.texts) != 1 {
			t.Fatalf("after the takeover, step %d, %s at %s: %q (error %q), want one text beginning %q", i, s.tool, s.at.id, got.texts, got.rpcError, s.want)
		}
	}
	awaitGone(t, mark)
	callAt(t, c.url, "scope_close", map[string]any{"scope": scope})
	// A closed scope and a guessed one read alike on every frontend: no tasks,
	// and a start in them is refused.
	for _, f := range []*frontendProc{b, c} {
		for _, sc := range []string{scope, "GUESSEDSCOPEHANDLE2345ABCD"} {
			if got := callAt(t, f.url, "task_list", map[string]any{"scope": sc}); got.text() != "(no background tasks)" {
				t.Errorf("task_list of %s at %s = %q, want no tasks", sc, f.id, got.texts)
			}
			if got := callAt(t, f.url, "bash", map[string]any{"scope": sc, "command": "true", "run_in_background": true}); !got.isError || !strings.HasPrefix(got.text(), "scope not found: "+sc) {
				t.Errorf("a start in %s at %s = %q, want scope not found", sc, f.id, got.texts)
			}
		}
	}
}

// awaitServed calls tool at f until the scope's home answers: before a dead
// home's lease lapses the call fails (the home is unreachable), then a survivor
// takes the scope and serves it. It fails the test after a minute.
func awaitServed(t *testing.T, f *frontendProc, since time.Time, tool string, args map[string]any) sessionlessCall {
	t.Helper()
	for {
		got := callAt(t, f.url, tool, args)
		if got.rpcError == "" {
			return got
		}
		if !strings.Contains(got.rpcError, "unreachable") || time.Since(since) > time.Minute {
			t.Fatalf("%s at %s: %q, want the home unreachable until its lease lapses", tool, f.id, got.rpcError)
		}
	}
}
