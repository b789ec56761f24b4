//go:build linux

package mcpserver_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

// TestPageOpenedAfterTheTasksRan is the live page as an operator meets it: two
// sessions' tasks ran — a 200-line build, a command that printed and exited 2, a
// killed one, a running server (watched), one queued at the global limit — and only then is
// the page opened. Every task's output size comes from its state, the exit code or
// failure detail is beside the status, a non-zero exit is not green, the queued
// task is shown queued, and the server, which a task_watch watches, is marked
// watched.
func TestPageOpenedAfterTheTasksRan(t *testing.T) {
	exe := chromium(t)
	srv := newServer(t, mcpserver.WithRuntimeOptions(actors.WithGlobalLimit(2), actors.WithQueue(1)))
	hs := pageServer(t, srv, testToken, nil)
	c1 := connectHTTP(t, hs, testToken)
	c2 := connectHTTP(t, hs, testToken)
	start := func(c *client, command string) messages.TaskID {
		t.Helper()
		res := c.call(t, "bash", map[string]any{"command": command, "run_in_background": true})
		var h struct {
			ID messages.TaskID `json:"task_id"`
		}
		if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil || h.ID == "" {
			t.Fatalf("bash %q: %q (%v)", command, structured(t, res), err)
		}
		return h.ID
	}
	wait := func(c *client, id messages.TaskID) {
		t.Helper()
		c.call(t, "task_output", map[string]any{"task_id": id, "wait": true, "timeout_ms": 60000})
	}
	build := start(c1, "seq 200")
	wait(c1, build)
	exit2 := start(c1, "echo 'error: missing file'; exit 2")
	wait(c1, exit2)
	killed := start(c1, "sleep 600")
	c1.call(t, "task_kill", map[string]any{"task_id": killed})
	wait(c1, killed)
	server := start(c1, "echo listening; sleep 600")
	other := start(c2, "sleep 600")
	queued := start(c2, "echo later")
	c1.call(t, "task_watch", map[string]any{"task_id": server, "pattern": "ERROR"})

	ctx := browser(t, exe)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+testToken))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(`body[data-state="live"]`),
		chromedp.WaitVisible(row(build, "completed")),
		chromedp.WaitVisible(row(exit2, "completed")),
		chromedp.WaitVisible(row(killed, "killed")),
		chromedp.WaitVisible(row(server, "running")),
		chromedp.WaitVisible(row(other, "running")),
		chromedp.WaitVisible(row(queued, "queued")),
	); err != nil {
		dump(t, ctx)
		t.Fatalf("loading the page: %v", err)
	}
	cell := func(id messages.TaskID, sel string) string {
		return jsText(t, ctx, fmt.Sprintf(`document.querySelector('tr[data-task=%q] %s').textContent`, id, sel))
	}
	t.Run("the output size comes from the task's state", func(t *testing.T) {
		for id, want := range map[messages.TaskID]string{build: "692 B", exit2: "20 B", killed: "0 B"} {
			if got := cell(id, "td.bytes"); got != want {
				t.Errorf("%s: output %q, want %q", id, got, want)
			}
		}
		if got := cell(server, "td.bytes"); got == "" {
			t.Errorf("%s: output size empty while it runs", server)
		}
	})
	t.Run("the exit code or failure detail is beside the status", func(t *testing.T) {
		for id, want := range map[messages.TaskID]string{build: "completedexit code: 0", exit2: "completedexit code: 2", killed: "killedsignal: SIGTERM", queued: "queued"} {
			if got := cell(id, "td.status"); got != want {
				t.Errorf("%s: status cell %q, want %q", id, got, want)
			}
		}
	})
	t.Run("a non-zero exit is not green", func(t *testing.T) {
		bg := func(id messages.TaskID) string {
			return jsText(t, ctx, fmt.Sprintf(`getComputedStyle(document.querySelector('tr[data-task=%q] .pill')).backgroundColor`, id))
		}
		green := bg(build)
		if got := bg(exit2); got == green {
			t.Errorf("exit 2 pill is %s, the colour of exit 0", got)
		}
	})
	t.Run("a watched task wears a badge; the others do not", func(t *testing.T) {
		for id, want := range map[messages.TaskID]string{server: "runningwatched", other: "running"} {
			if got := cell(id, "td.status"); got != want {
				t.Errorf("%s: status cell %q, want %q", id, got, want)
			}
		}
	})
	t.Run("the counts name the queued task", func(t *testing.T) {
		if got := jsText(t, ctx, `document.getElementById("counts").textContent`); !strings.Contains(got, "2 running · 1 queued") {
			t.Errorf("counts %q, want 2 running and 1 queued", got)
		}
	})
}
