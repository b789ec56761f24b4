//go:build linux

package livepage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// TestPageOpenedAfterTheTasksRan is the live page as an operator meets it: two
// owners' tasks ran — a 200-line build, a command that printed and exited 2, a
// killed one, a running server (watched), one queued at the global limit — and only then is
// the page opened. Every task's output size comes from its state, the exit code or
// failure detail is beside the status, a non-zero exit is not green, the queued
// task is shown queued, and the server, which a task_watch watches, is marked
// watched.
func TestPageOpenedAfterTheTasksRan(t *testing.T) {
	exe := chromium(t)
	p := newPage(t, setup{runtime: []actors.Option{actors.WithGlobalLimit(2), actors.WithQueue(1)}})
	p.register(t, "mcp-1")
	p.register(t, "mcp-2")
	build := p.startBash(t, "mcp-1", "seq 200", "")
	p.wait(t, build, "mcp-1")
	exit2 := p.startBash(t, "mcp-1", "echo 'error: missing file'; exit 2", "")
	p.wait(t, exit2, "mcp-1")
	killed := p.startBash(t, "mcp-1", "sleep 600", "")
	p.kill(t, killed, "mcp-1")
	p.wait(t, killed, "mcp-1")
	server := p.startBash(t, "mcp-1", "echo listening; sleep 600", "")
	other := p.startBash(t, "mcp-2", "sleep 600", "")
	queued := p.startBash(t, "mcp-2", "echo later", "")
	if err := p.rt.Tasks().Watch(bg, server, "mcp-1", "ERROR", actors.WatchOptions{}); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t, exe)
	openPage(t, ctx, p,
		chromedp.WaitVisible(row(build, "completed")),
		chromedp.WaitVisible(row(exit2, "completed")),
		chromedp.WaitVisible(row(killed, "killed")),
		chromedp.WaitVisible(row(server, "running")),
		chromedp.WaitVisible(row(other, "running")),
		chromedp.WaitVisible(row(queued, "queued")),
	)
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
