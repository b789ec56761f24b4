//go:build linux

//lint:file-ignore SA1019 the tests check the notices sent as log messages, which the server keeps for the revisions that still have logging

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/internal/proctest"
)

var transcript = flag.String("transcript", "", "write the stdio session transcript of TestStdioSession to `FILE`")

// binDir holds the server binary, built once per test run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "taskrt-mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

var bg = context.Background()

// sessionOpts make the SDK's client open a 2025-11-25 session: by default go-sdk
// v1.8.0 speaks the sessionless 2026-07-28 first, and the server serves it.
var sessionOpts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

var build struct {
	once sync.Once
	path string
	err  error
}

// binary builds the command (with -race when the tests run with it) once.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		build.path = filepath.Join(binDir, "taskrt-mcp")
		args := []string{"build", "-o", build.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// proc is the server binary running, with an SDK client connected over its stdio.
type proc struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	logs   chan *mcp.LoggingMessageParams
	stderr *watcher
}

// start runs the binary with args and connects a client over its stdin/stdout.
// The client is closed at the end of the test (which closes the server's stdin).
func start(t *testing.T, rec *bytes.Buffer, args ...string) *proc {
	t.Helper()
	return startEnv(t, rec, nil, args...)
}

// startEnv is start with extra environment entries for the server (and so for its
// commands).
func startEnv(t *testing.T, rec *bytes.Buffer, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), args...), logs: make(chan *mcp.LoggingMessageParams, 16), stderr: newWatcher()}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	var tr mcp.Transport = &mcp.CommandTransport{Command: p.cmd, TerminateDuration: time.Minute}
	if rec != nil {
		tr = &mcp.LoggingTransport{Transport: tr, Writer: &lockedWriter{w: rec}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "taskrt-test", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { p.logs <- r.Params },
	})
	cs, err := client.Connect(bg, tr, sessionOpts)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, p.stderr)
	}
	p.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return p
}

func (p *proc) call(t *testing.T, name string, args map[string]any) []string {
	t.Helper()
	res, err := p.cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string
	for _, c := range res.Content {
		out = append(out, c.(*mcp.TextContent).Text)
	}
	return out
}

// watcher is a stderr sink that lets a test wait for a line.
type watcher struct {
	mu      sync.Mutex // protects buf and waiters
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newWatcher() *watcher { return &watcher{changed: make(chan struct{})} }

func (w *watcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(b), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// await waits until the output matches re and returns the first match's groups.
func (w *watcher) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		m := re.FindStringSubmatch(w.buf.String())
		changed := w.changed
		w.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("stderr never matched %s:\n%s", re, w)
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// ---- processes (see package mcpserver's tests) ----

func newMark() string { return "mcpcmdtest" + strings.ToLower(rand.Text()[:12]) }

func marked(mark, script string) string { return proctest.Marked(mark, script) }

// markedPIDs lists the live processes that carry mark (see proctest.MarkedPIDs).
func markedPIDs(mark string) []int { return proctest.MarkedPIDs(mark) }

// pollProcs checks cond every few milliseconds for a minute: observing other
// processes has no event to wait on.
func pollProcs(t *testing.T, cond func() bool, what string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func awaitMarked(t *testing.T, mark string, n int) {
	t.Helper()
	pollProcs(t, func() bool { return len(markedPIDs(mark)) >= n }, fmt.Sprintf("%d marked processes", n))
}

func awaitGone(t *testing.T, mark string) {
	t.Helper()
	pollProcs(t, func() bool { return len(markedPIDs(mark)) == 0 }, "the marked processes to be gone")
}

// ignoresTERM reports whether process pid ignores SIGTERM (bit 15 of SigIgn).
func ignoresTERM(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	return false
}

// exitCode waits for the server process and returns its exit status.
func exitCode(t *testing.T, p *proc) int {
	t.Helper()
	err := p.cs.Close() // closes stdin and waits for the process
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("waiting for the server: %v", err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// ---- the tests ----

func TestStdioSession(t *testing.T) {
	var rec bytes.Buffer
	// The background command waits on a fifo until the test has the start's
	// result, so that its notice cannot ride on that result.
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEnv(t, &rec, []string{"BUILD_GATE=" + gate})
	if err := p.cs.SetLoggingLevel(bg, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	t.Run("lists bash and the task tools", func(t *testing.T) {
		res, err := p.cs.ListTools(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		for _, want := range []string{"bash", "task_output", "task_list", "task_kill"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools = %v, want %s among them", names, want)
			}
		}
	})
	t.Run("runs a foreground command", func(t *testing.T) {
		if got, want := p.call(t, "bash", map[string]any{"command": "echo hi"}), []string{"hi\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("a background command is started, notified and collected", func(t *testing.T) {
		cmd := `echo building; cat "$BUILD_GATE"; echo built`
		if got, want := p.call(t, "bash", map[string]any{"command": cmd, "run_in_background": true}),
			[]string{"started background task bash-1 (bash: " + cmd + "). You will be notified when it finishes; read its output with task_output."}; !slices.Equal(got, want) {
			t.Errorf("start = %q, want %q", got, want)
		}
		// Opening the fifo blocks until the command reads it; closing it ends the
		// command's cat.
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		notice := "background task bash-1 (bash: " + cmd + ") finished [status: completed, exit code: 0]. Read its output with task_output."
		select {
		case l := <-p.logs:
			if l.Data != notice {
				t.Errorf("log message %v, want %q", l.Data, notice)
			}
		case <-time.After(time.Minute):
			t.Fatal("no notice within a minute")
		}
		if got, want := p.call(t, "task_list", map[string]any{}), []string{"bash-1 [bash] completed — " + cmd, notice}; !slices.Equal(got, want) {
			t.Errorf("task_list = %q, want %q", got, want)
		}
		if got, want := p.call(t, "task_output", map[string]any{"task_id": "bash-1"}), []string{"building\nbuilt\n[status: completed, exit code: 0]"}; !slices.Equal(got, want) {
			t.Errorf("task_output = %q, want %q", got, want)
		}
	})
	t.Run("the server exits 0 at EOF", func(t *testing.T) {
		if code := exitCode(t, p); code != 0 {
			t.Errorf("exit status %d, want 0; stderr:\n%s", code, p.stderr)
		}
	})
	if *transcript != "" {
		// The client's log: what it wrote went to the server, what it read came back.
		// The client closed the server's stdin; the server's stdout then ends.
		text := strings.NewReplacer("\nwrite: ", "\n→ ", "\nread: ", "\n← ",
			"\nread error: EOF", "\n← EOF (stdin closed; the server exited 0)").Replace("\n" + rec.String())
		if err := os.WriteFile(*transcript, []byte(strings.TrimPrefix(text, "\n")), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestStdioEOFLeavesNoProcess(t *testing.T) {
	p := start(t, nil)
	mark := newMark()
	for range 2 {
		p.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
	}
	awaitMarked(t, mark, 2)
	if code := exitCode(t, p); code != 0 {
		t.Errorf("exit status %d, want 0; stderr:\n%s", code, p.stderr)
	}
	// The server exits only after its session's owner is disposed.
	if pids := markedPIDs(mark); len(pids) > 0 {
		t.Errorf("processes alive after the server exited: %v", pids)
	}
}

func TestSIGTERMLeavesNoProcess(t *testing.T) {
	p := start(t, nil)
	mark := newMark()
	for range 2 {
		p.call(t, "bash", map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true})
	}
	fg := make(chan error, 1)
	go func() {
		_, err := p.cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marked(mark, "sleep 300")}})
		fg <- err
	}()
	awaitMarked(t, mark, 3)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = p.cs.Wait() // the server ends the session
	if code := exitCode(t, p); code != 0 {
		t.Errorf("exit status %d, want 0; stderr:\n%s", code, p.stderr)
	}
	if pids := markedPIDs(mark); len(pids) > 0 {
		t.Errorf("processes alive after the server exited: %v", pids)
	}
	<-fg
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	// A task that ignores SIGTERM holds the graceful shutdown for the whole grace
	// period; the second signal must not wait for it.
	p := start(t, nil, "-kill-grace", "10m")
	mark := newMark()
	p.call(t, "bash", map[string]any{"command": marked(mark, "trap '' TERM; sleep 300"), "run_in_background": true})
	// The shell exists before its trap does: wait for a process that ignores
	// SIGTERM (the sleep inherits the ignored disposition).
	pollProcs(t, func() bool { return slices.ContainsFunc(markedPIDs(mark), ignoresTERM) }, "the task to ignore SIGTERM")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.stderr.await(t, regexp.MustCompile(`terminated: ending every session`))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = p.cs.Wait()
	code := exitCode(t, p)
	left := markedPIDs(mark)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Exit status 1 is the immediate exit; a graceful one (after the ten-minute grace)
	// would be 0. Whether the task outlives the server is not this test's business:
	// the bash producer kills a dying host's leaders (PR_SET_PDEATHSIG) and its next
	// New() removes what is left.
	if code != 1 {
		t.Errorf("exit status %d, want 1 (exited at once); stderr:\n%s", code, p.stderr)
	}
	_ = left
	awaitGone(t, mark)
}

func TestHTTP(t *testing.T) {
	const token = "tok-" + "0123456789"
	cmd := exec.Command(binary(t), "-http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), tokenEnv+"="+token)
	stderr := newWatcher()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := stderr.await(t, regexp.MustCompile(`serving MCP at (http://\S+)`))[1]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	connect := func(tok string) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "taskrt-test", Version: "1"}, nil).
			Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: authorized{tok, tr}}}, sessionOpts)
	}
	t.Run("a client without the token is refused", func(t *testing.T) {
		if cs, err := connect(""); err == nil {
			cs.Close()
			t.Error("connected without the token")
		}
	})
	t.Run("a client with a wrong token is refused", func(t *testing.T) {
		if cs, err := connect("wrong"); err == nil {
			cs.Close()
			t.Error("connected with a wrong token")
		}
	})
	t.Run("without -ui there is no page", func(t *testing.T) {
		code, _, _ := get(t, tr, strings.TrimSuffix(url, "/mcp")+"/", "Bearer "+token)
		if code != http.StatusNotFound {
			t.Errorf("GET / = %d, want 404", code)
		}
	})
	cs, err := connect(token)
	if err != nil {
		t.Fatalf("connect with the token from %s: %v", tokenEnv, err)
	}
	mark := newMark()
	for range 2 {
		if _, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marked(mark, "sleep 300"), "run_in_background": true}}); err != nil {
			t.Fatal(err)
		}
	}
	awaitMarked(t, mark, 2)
	t.Run("SIGTERM ends the sessions, kills their processes and exits 0", func(t *testing.T) {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := <-exited
		exited <- err
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d (%v), want 0; stderr:\n%s", code, err, stderr)
		}
		if pids := markedPIDs(mark); len(pids) > 0 {
			t.Errorf("processes alive after the server exited: %v", pids)
		}
	})
	_ = cs.Close()
}

// get GETs url with the Authorization header auth (none when "") and returns the
// status, the headers and the start of the body (an event stream is not read to
// its end).
func get(t *testing.T, tr http.RoundTripper, url, auth string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	return resp.StatusCode, resp.Header, string(b[:n])
}

func TestLivePage(t *testing.T) {
	const token = "tok-" + "page-0123456789"
	cmd := exec.Command(binary(t), "-http", "127.0.0.1:0", "-ui", "-token", token)
	stderr := newWatcher()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	page := stderr.await(t, regexp.MustCompile(`live page at (http://\S+/)`))[1]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+token))
	t.Run("without the token the browser is asked for it", func(t *testing.T) {
		code, h, _ := get(t, tr, page, "")
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET / = %d, WWW-Authenticate %q; want 401 asking for Basic", code, h.Get("WWW-Authenticate"))
		}
	})
	t.Run("with the token as the password the page is served", func(t *testing.T) {
		code, _, body := get(t, tr, page, basic)
		if code != http.StatusOK || !strings.Contains(body, "taskrt-mcp") {
			t.Errorf("GET / = %d %q", code, body)
		}
	})
	t.Run("SIGTERM exits 0 while a page streams events", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, page+"events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != http.StatusOK || first != "event: snapshot\n" {
			t.Fatalf("GET /events = %d, first line %q (%v)", resp.StatusCode, first, err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err = <-exited
		exited <- err
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d (%v), want 0; stderr:\n%s", code, err, stderr)
		}
	})
}

type authorized struct {
	token string
	base  http.RoundTripper
}

func (a authorized) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+a.token)
	}
	return a.base.RoundTrip(r)
}

func TestFlags(t *testing.T) {
	t.Setenv(tokenEnv, "")
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"a non-loopback address needs a token", []string{"-http", "0.0.0.0:8080"}, "not a loopback address: set a bearer token with -token or TASKRT_MCP_TOKEN"},
		{"an address without a port is refused", []string{"-http", "localhost"}, "want host:port or :port"},
		{"the cap must be positive", []string{"-max-tasks", "0"}, "-max-tasks must be at least 1"},
		{"the grace must be positive", []string{"-kill-grace", "0s"}, "-kill-grace must be positive"},
		{"the body cap must be positive", []string{"-max-request", "0"}, "-max-request must be positive"},
		{"the queue must not be negative", []string{"-queue", "-1"}, "-queue and -global-limit must not be negative"},
		{"the global limit must not be negative", []string{"-global-limit", "-2"}, "-queue and -global-limit must not be negative"},
		{"a stray argument is refused", []string{"serve"}, `unexpected argument "serve"`},
		{"the live page needs HTTP", []string{"-ui"}, "-ui needs -http: the live page is served over HTTP"},
		{"an unknown flag is refused", []string{"-port", "1"}, "flag provided but not defined: -port"},
		{"the lease must be positive", []string{"-nats", "nats://127.0.0.1:1", "-lease", "0s"}, "-lease must be positive"},
		{"the process cap must not be negative", []string{"-max-processes", "-1"}, "-max-processes and -cpus must not be negative"},
		{"the CPU cap must not be negative", []string{"-cpus", "-0.5"}, "-max-processes and -cpus must not be negative"},
		{"a memory cap is a size", []string{"-memory", "lots"}, `invalid value "lots" for flag -memory: "lots" is not a size`},
		{"a sandbox is not silently dropped for remote commands", []string{"-nats", "nats://127.0.0.1:1", "-sandbox", "read-only"}, "-sandbox applies to local commands; with -nats the workers run them"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tc.args, os.Stdin, os.Stdout, &stderr, nil)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
	t.Run("-h prints the usage and exits 0", func(t *testing.T) {
		var stderr bytes.Buffer
		if code := run([]string{"-h"}, os.Stdin, os.Stdout, &stderr, nil); code != 0 || !strings.Contains(stderr.String(), "-idle-timeout") ||
			!strings.Contains(stderr.String(), "-queue N") || !strings.Contains(stderr.String(), "-global-limit N") || !strings.Contains(stderr.String(), "-start-keys") ||
			!strings.Contains(stderr.String(), "-max-processes N") || !strings.Contains(stderr.String(), "-memory SIZE") || !strings.Contains(stderr.String(), "-cpus N") {
			t.Errorf("code %d, stderr %q", code, stderr.String())
		}
	})
	parsed := []struct {
		name, env string
		args      []string
		addr      string
		token     string
	}{
		{"a bare port binds loopback", "", []string{"-http", ":8080"}, "127.0.0.1:8080", ""},
		{"the token can come from the environment", "t0k", []string{"-http", "0.0.0.0:8080"}, "0.0.0.0:8080", "t0k"},
		{"the flag wins over the environment", "t0k", []string{"-http", "[::]:8080", "-token", "flag"}, "[::]:8080", "flag"},
	}
	for _, tc := range []struct {
		arg  string
		want int64
	}{{"1048576", 1 << 20}, {"512M", 512 << 20}, {"2G", 2 << 30}, {"64MiB", 64 << 20}, {"1.5g", 3 << 29}, {"256k", 256 << 10}} {
		t.Run("-memory "+tc.arg, func(t *testing.T) {
			o, err := parse([]string{"-memory", tc.arg}, io.Discard)
			if err != nil || o.limits.Memory != tc.want {
				t.Errorf("-memory %s = %d (%v), want %d", tc.arg, o.limits.Memory, err, tc.want)
			}
		})
	}
	for _, tc := range parsed {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tc.env)
			var stderr bytes.Buffer
			o, err := parse(tc.args, &stderr)
			if err != nil || o.httpAddr != tc.addr || o.token != tc.token {
				t.Errorf("parse(%q) = addr %q token %q err %v; want %q, %q", tc.args, o.httpAddr, o.token, err, tc.addr, tc.token)
			}
		})
	}
}
