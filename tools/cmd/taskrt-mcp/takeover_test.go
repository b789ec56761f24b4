//go:build linux

package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskrt/taskrt/producers/remote"
)

// A frontend's death, pause or shutdown, with real processes: the frontends are
// taskrt-mcp -http -nats processes, the workers and the NATS server live in the
// test process.

// cluster starts an embedded NATS server and workers of two slots each on it for
// the test (so that a scope's commands spread over them).
func cluster(t *testing.T, lease time.Duration, workers ...string) (*remote.Server, []*remote.Worker) {
	t.Helper()
	ns, err := remote.StartServer(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	var ws []*remote.Worker
	for _, name := range workers {
		nc, err := remote.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		w, err := remote.NewWorker(nc, remote.WithName(name), remote.WithLease(lease), remote.WithDir(t.TempDir()), remote.WithMaxTasks(2))
		if err != nil {
			nc.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = w.Close(context.Background())
			nc.Close()
		})
		ws = append(ws, w)
	}
	return ns, ws
}

// startIn is a background start at f: its task id and scope ("" for a new one).
func startIn(t *testing.T, f *frontendProc, scope, command string) (id, inScope string) {
	t.Helper()
	args := map[string]any{"command": command, "run_in_background": true}
	if scope != "" {
		args["scope"] = scope
	}
	got := callAt(t, f.url, "bash", args)
	id, _ = got.structured["task_id"].(string)
	inScope, _ = got.structured["scope"].(string)
	if got.isError || got.rpcError != "" || id == "" || inScope == "" {
		t.Fatalf("start at %s: %q %q", f.id, got.texts, got.rpcError)
	}
	return id, inScope
}

// twoFrontends starts frontends A and B (lease 2 s) and a worker, and script
// (marked) as a task of a new scope homed on A; it returns them once the task's
// process runs, with the processes it has.
func twoFrontends(t *testing.T, script string) (a, b *frontendProc, id, scope, mark string, pids []int) {
	t.Helper()
	const lease = 2 * time.Second
	ns, _ := cluster(t, lease, "w1")
	a, b = startFrontend(t, ns.URL(), lease), startFrontend(t, ns.URL(), lease)
	mark = newMark()
	id, scope = startIn(t, a, "", marked(mark, script))
	awaitMarked(t, mark, 1)
	return a, b, id, scope, mark, markedPIDs(mark)
}

// notices are the texts of a result after its first: its notices.
func notices(c sessionlessCall) []string {
	if len(c.texts) < 2 {
		return nil
	}
	return c.texts[1:]
}

// TestNoticeDueAtHomeDeathComesOnce: a task ends while its scope's home lives,
// and nobody calls; the home is killed with SIGKILL. The survivor that takes the
// scope delivers the task's notice on the first result naming the scope, and
// never again; a task whose end the model had (it waited on it) brings none.
func TestNoticeDueAtHomeDeathComesOnce(t *testing.T) {
	const lease = 2 * time.Second
	ns, _ := cluster(t, lease, "w1")
	a, b := startFrontend(t, ns.URL(), lease), startFrontend(t, ns.URL(), lease)
	seen, scope := startIn(t, a, "", "echo seen")
	if got := callAt(t, a.url, "task_wait", map[string]any{"scope": scope, "task_ids": []string{seen}, "timeout_ms": 30000}); !strings.Contains(got.text(), "[status: completed") {
		t.Fatalf("task_wait at the home = %q", got.texts)
	}
	mark := newMark()
	due, _ := startIn(t, a, scope, marked(mark, "sleep 0.3"))
	awaitMarked(t, mark, 1)
	awaitGone(t, mark) // it ended; no call tells the model
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.exited
	first := awaitServed(t, b, killed, "task_list", map[string]any{"scope": scope})
	t.Logf("home SIGKILL → the scope served by the survivor: %s", time.Since(killed).Round(time.Millisecond))
	// The notice comes once the restored task settles on the survivor: on one of
	// the results naming the scope, and on no other.
	want := "background task " + due + " (bash: " + marked(mark, "sleep 0.3") + ") finished [status: completed, exit code: 0]. Read its output with task_output."
	got := notices(first)
	for deadline := time.Now().Add(time.Minute); len(got) == 0 && time.Now().Before(deadline); {
		got = notices(callAt(t, b.url, "task_list", map[string]any{"scope": scope}))
	}
	if !slices.Equal(got, []string{want}) {
		t.Errorf("the notices after the takeover = %q, want the due one once: %q", got, want)
	}
	for range 3 {
		if again := callAt(t, b.url, "task_list", map[string]any{"scope": scope}); len(notices(again)) != 0 {
			t.Errorf("a later result carries %q, want no notice", notices(again))
		}
	}
	callAt(t, b.url, "scope_close", map[string]any{"scope": scope})
}

// TestPausedHomeAnswersNothing: the home is stopped (SIGSTOP) past its lease; a
// survivor takes the scope, its long task running on. When the old home resumes
// (SIGCONT) it answers nothing from its memory: a call for the scope at it is
// served by the new home (it lists the task started there meanwhile); it kills
// nothing, and nothing runs twice.
func TestPausedHomeAnswersNothing(t *testing.T) {
	a, b, long, scope, mark, before := twoFrontends(t, "sleep 600")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	stopped := time.Now()
	got := awaitServed(t, b, stopped, "task_output", map[string]any{"scope": scope, "task_id": long})
	t.Logf("home SIGSTOP → the scope served by the survivor: %s", time.Since(stopped).Round(time.Millisecond))
	if got.isError || !strings.HasSuffix(got.text(), "[status: running]") {
		t.Fatalf("task_output at the survivor = %q", got.texts)
	}
	later, _ := startIn(t, b, scope, "echo later")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	list := callAt(t, a.url, "task_list", map[string]any{"scope": scope})
	if list.isError || !strings.Contains(list.text(), long+" [bash] running") || !strings.Contains(list.text(), later+" [bash]") {
		t.Errorf("task_list at the resumed home = %q (error %q), want the new home's list with %s", list.texts, list.rpcError, later)
	}
	a.stderr.await(t, regexp.MustCompile(`scope dropped with this frontend's lease`))
	if after := markedPIDs(mark); !slices.Equal(after, before) {
		t.Errorf("the task's processes were %v before the pause and are %v after it: want the same, nothing killed, nothing run twice", before, after)
	}
	if kill := callAt(t, a.url, "task_kill", map[string]any{"scope": scope, "task_id": long}); !strings.HasPrefix(kill.text(), "requested cancellation of task "+long) {
		t.Errorf("task_kill at the resumed home (served by the new home) = %q %q", kill.texts, kill.rpcError)
	}
	awaitGone(t, mark)
	callAt(t, b.url, "scope_close", map[string]any{"scope": scope})
}

// TestIdleScopeDiesEverywhere: a scope with commands on two workers whose home
// dies is taken by a survivor with no request (its commands adopted before the
// workers' orphan grace), and when it stays idle past -idle-timeout its commands
// die on every worker; a later call finds no such scope.
func TestIdleScopeDiesEverywhere(t *testing.T) {
	const lease = 2 * time.Second
	ns, ws := cluster(t, lease, "w1", "w2")
	idle := []string{"-idle-timeout", "4s", "-v"}
	a, b := startFrontend(t, ns.URL(), lease, idle...), startFrontend(t, ns.URL(), lease, idle...)
	mark := newMark()
	_, scope := startIn(t, a, "", marked(mark, "sleep 600"))
	for range 3 {
		startIn(t, a, scope, marked(mark, "sleep 600"))
	}
	awaitMarked(t, mark, 4)
	for _, w := range ws {
		if w.Processes() == 0 {
			t.Fatalf("worker %s runs none of the scope's commands, want them spread over both", w.Name())
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.exited
	b.stderr.await(t, regexp.MustCompile(`msg="scope taken" .*tasks=4 adopted=4`))
	t.Logf("home SIGKILL → the scope taken with no request: %s", time.Since(killed).Round(time.Millisecond))
	if n := len(markedPIDs(mark)); n < 4 {
		t.Errorf("%d of the scope's processes live after the takeover, want the 4", n)
	}
	awaitGone(t, mark)
	for _, w := range ws {
		<-w.Drained()
	}
	t.Logf("home SIGKILL → the idle scope's commands gone: %s", time.Since(killed).Round(time.Millisecond))
	if got := callAt(t, b.url, "task_list", map[string]any{"scope": scope}); got.text() != "(no background tasks)" {
		t.Errorf("task_list of the lapsed scope = %q, want it empty, as for any unknown scope", got.texts)
	}
}

// TestFrontendShutdownHandsScopesOn: a frontend stopped with SIGTERM (a deploy)
// hands its scopes on: a survivor takes them at once, their commands running on.
func TestFrontendShutdownHandsScopesOn(t *testing.T) {
	a, b, long, scope, mark, before := twoFrontends(t, "echo up; sleep 600")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	<-a.exited
	got := awaitServed(t, b, stopped, "task_output", map[string]any{"scope": scope, "task_id": long, "wait": true, "until": "up", "timeout_ms": 30000})
	t.Logf("home SIGTERM → the scope served by the survivor: %s", time.Since(stopped).Round(time.Millisecond))
	if got.isError || got.text() != "up\n[matched: up]\n[status: running]" {
		t.Errorf("task_output at the survivor = %q, want the command's output and it running", got.texts)
	}
	if after := markedPIDs(mark); !slices.Equal(after, before) {
		t.Errorf("processes %v before the shutdown, %v after: want the same", before, after)
	}
	callAt(t, b.url, "scope_close", map[string]any{"scope": scope})
	awaitGone(t, mark)
}
