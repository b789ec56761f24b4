//go:build linux

package livepage_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskrt/taskrt/internal/proctest"
	"github.com/taskrt/taskrt/messages"
)

var screenshot = flag.String("screenshot", "", "also write TestPageInBrowser's screenshot of the live page to `FILE` (it is always written to the test's artifact directory; keep it with go test -artifacts)")

// chromiumEnv names the browser binary the browser test runs, when set.
const chromiumEnv = "TASKRT_CHROMIUM"

// chromium finds a Chromium (or Chrome) binary, or skips the test: this machine
// cannot run a browser at all.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skipf("no Chromium on this machine: install it (Debian: apt-get install -y chromium; .ci/run does) or set %s to a Chrome binary", chromiumEnv)
	return ""
}

// browser starts one headless Chromium with a fresh profile and returns a tab's
// context, valid until the end of the test (the browser is then closed, and every
// process of it is gone before the test ends).
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "chromium-profile")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 760),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // kills the browser and waits for it
		awaitGone(t, profile)
	})
	// The first call starts the browser, bound to the tab's context (a timeout on
	// it would stop the browser).
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	// Everything the test does in the browser must be done within two minutes, on a
	// loaded machine: each step waits for a DOM condition, none sleeps.
	ctx, cancelTimeout := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	watchConsole(t, tab)
	return ctx
}

// watchConsole fails the test on every uncaught exception of the page's script, and
// logs the page's other console messages.
func watchConsole(t *testing.T, tab context.Context) {
	ctx, cancel := context.WithCancel(tab)
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() {
				t.Errorf("the page threw: %s (%s:%d)", m, m.URL, m.Line+1)
			} else {
				t.Logf("console: %s", m)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// dump logs the page's body, to see why a wait failed.
func dump(t *testing.T, ctx context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.outerHTML`))
	t.Logf("the page (%v):\n%s", err, html)
}

// waitJS waits until the JavaScript expression cond is true on the page.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		dump(t, ctx)
		t.Fatalf("waiting for %s (%s): %v", what, cond, err)
	}
}

// jsText evaluates a JavaScript string expression.
func jsText(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// row is the CSS selector of a task's row, in a given status.
func row(id messages.TaskID, status string) string {
	return fmt.Sprintf(`tr[data-task=%q][data-status=%q]`, id, status)
}

// awaitGone polls /proc until no process carries mark (the browser's profile
// directory is on each of its command lines): observing other processes has no
// event to wait on.
func awaitGone(t *testing.T, mark string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for len(proctest.MarkedPIDs(mark)) > 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the processes marked %s are still there after a minute", mark)
		}
	}
}

// openPage loads the page in the browser and waits until it is live.
func openPage(t *testing.T, ctx context.Context, p *page, also ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	actions := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(p.hs.URL + "/"), chromedp.WaitVisible(`body[data-state="live"]`)}, also...)
	if err := chromedp.Do(ctx, actions...); err != nil {
		dump(t, ctx)
		t.Fatalf("loading the page: %v", err)
	}
}

// TestPageInBrowser is the page as an operator uses it, in a real browser: tasks
// of two owners appear, one is selected and its tail grows line by line, it is
// killed and its tail ends, and an owner that goes shows as ended.
func TestPageInBrowser(t *testing.T) {
	exe := chromium(t)
	began := time.Now()
	// The commands run in dir, where the test's fifos are: one fifo per line, since
	// a fifo written and closed twice could meet one open.
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "hold"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := newPage(t, setup{})
	p.register(t, "mcp-1")
	ctx := browser(t, exe)
	openPage(t, ctx, p, chromedp.WaitVisible(`section[data-agent="mcp-1"]`))

	// 1. Tasks of two owners appear with their status.
	follow := p.startBash(t, "mcp-1", `for f in a b; do read -r l < $f; echo "line $l"; done; read -r l < hold`, dir)
	done := p.startBash(t, "mcp-1", `echo '<b>not bold</b>'`, dir)
	p.register(t, "mcp-2")
	sleeping := p.startBash(t, "mcp-2", "sleep 600", dir)
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(row(follow, "running")),
		chromedp.WaitVisible(row(done, "completed")),
		chromedp.WaitVisible(`section[data-agent="mcp-2"] `+row(sleeping, "running")),
	); err != nil {
		dump(t, ctx)
		t.Fatalf("waiting for the tasks on the page: %v", err)
	}
	t.Run("a command is shown as text, never as HTML", func(t *testing.T) {
		label := jsText(t, ctx, fmt.Sprintf(`document.querySelector('tr[data-task=%q] td.label').textContent`, done))
		if want := `echo '<b>not bold</b>'`; label != want {
			t.Errorf("label = %q, want %q", label, want)
		}
		if n := jsText(t, ctx, `String(document.querySelectorAll('#agents b').length)`); n != "0" {
			t.Errorf("%s <b> elements on the page, want 0", n)
		}
	})

	// 2. Selecting a task tails its output, live.
	if err := chromedp.Do(ctx, chromedp.Click(row(follow, "running")+` td.id`)); err != nil {
		t.Fatalf("selecting %s: %v", follow, err)
	}
	// A tail that ended early (a task without an output stream) fails at once.
	tailGrows := func(what, want string) {
		t.Helper()
		has := fmt.Sprintf(`document.getElementById('tail').textContent.includes(%q)`, want)
		waitJS(t, ctx, what, has+` || document.getElementById('tailpane').dataset.state === "ended"`)
		if jsText(t, ctx, `String(`+has+`)`) != "true" {
			dump(t, ctx)
			t.Fatalf("the tail ended before %s", what)
		}
	}
	release(t, filepath.Join(dir, "a"), "alpha")
	tailGrows("the first line in the tail", "line alpha\n")
	release(t, filepath.Join(dir, "b"), "beta")
	tailGrows("the tail to grow", "line alpha\nline beta\n")

	// 3. A killed task turns killed, and its tail ends with it.
	p.kill(t, follow, "mcp-1")
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(row(follow, "killed")),
		chromedp.WaitVisible(`#tailpane[data-state="ended"][data-reason="settled"]`),
	); err != nil {
		t.Fatalf("waiting for %s to show killed: %v", follow, err)
	}
	if got := jsText(t, ctx, `document.getElementById('tail').textContent`); got != "line alpha\nline beta\n[killed (signal: SIGTERM)]\n" {
		t.Errorf("tail = %q", got)
	}

	// 4. The page read without consuming: the owner's next read returns the whole
	//    output.
	if res, err := p.rt.Tasks().Read(bg, follow, "mcp-1"); err != nil || res.Output != "line alpha\nline beta\n" || res.Snapshot.Status != messages.Killed {
		t.Errorf("Read after the page tailed it = %q %s (%v), want the whole output, killed", res.Output, res.Snapshot.Status, err)
	}

	// 5. The screenshot, a test artifact.
	takeScreenshot(t, ctx)

	// 6. An owner that goes shows as ended, its task killed with it.
	p.dispose(t, "mcp-2")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`section.ended[data-agent="mcp-2"] `+row(sleeping, "killed"))); err != nil {
		dump(t, ctx)
		t.Fatalf("waiting for mcp-2 to show as ended: %v", err)
	}
	t.Logf("the browser test took %v", time.Since(began).Round(time.Millisecond))
}

// takeScreenshot writes the page's screenshot to the test's artifact directory,
// and to -screenshot when set.
func takeScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	paths := []string{filepath.Join(t.ArtifactDir(), "live-page.png")}
	if *screenshot != "" {
		paths = append(paths, *screenshot)
	}
	for _, path := range paths {
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %v (%d bytes)", paths, len(png))
}
