//go:build linux

package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/producers/remote"
)

// taskrt-mcp -nats: every bash command runs on a worker; strings are unchanged,
// and a task lost with its worker says so in its status line.
func TestNATSRunsEveryCommandOnAWorker(t *testing.T) {
	srv, err := remote.StartServer(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	wnc, err := remote.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("w1"), remote.WithLease(2*time.Second), remote.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(context.Background()) }()

	p := start(t, nil, "-nats", srv.URL(), "-lease", "2s")
	fg := strings.Join(p.call(t, "bash", map[string]any{"command": `echo "fg on $TASKRT_WORKER"`}), "\n")
	if want := "fg on w1\n[status: completed, exit code: 0]"; fg != want {
		t.Fatalf("foreground: got %q, want %q", fg, want)
	}
	bg := strings.Join(p.call(t, "bash", map[string]any{"command": `echo "bg on $TASKRT_WORKER"; sleep 60`, "run_in_background": true}), "\n")
	id := regexp.MustCompile(`bash-\d+`).FindString(bg)
	if id == "" {
		t.Fatalf("background: no task id in %q", bg)
	}
	out := strings.Join(p.call(t, "task_output", map[string]any{"task_id": id, "until": "bg on", "wait": true, "timeout_ms": 20000}), "\n")
	if !strings.Contains(out, "bg on w1") {
		t.Fatalf("task_output: got %q", out)
	}
	wnc.Close() // the worker is cut off: it kills its commands, and its lease lapses
	out = strings.Join(p.call(t, "task_output", map[string]any{"task_id": id, "wait": true, "timeout_ms": 20000}), "\n")
	if want := "[status: failed, worker lost: w1]"; !strings.HasSuffix(out, want) {
		t.Fatalf("task_output after the worker was lost: got %q, want it to end with %q", out, want)
	}
	<-w.Drained()
	if code := exitCode(t, p); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
