//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The signal tests run the built command as a user does, and signal it for real.

var (
	buildOnce sync.Once
	binary    string // the built agentsim
	buildErr  error
)

// agentsimBinary builds the command (with -race when the tests run with it) once
// per test binary, into a directory TestMain removes.
func agentsimBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var dir string
		if dir, buildErr = os.MkdirTemp("", "agentsim-test-"); buildErr != nil {
			return
		}
		binDir = dir
		binary = filepath.Join(dir, "agentsim")
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		// With -race when the tests run with it: the packages are then the ones the
		// test binary was built from, so the build only links.
		args := []string{"build", "-o", binary}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command(goCmd, append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// proc is a running agentsim with its stdin held open and its output read line by
// line.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout chan string // lines; closed at EOF
	stderr chan string
	exited chan error // cmd.Wait's result, once
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(agentsimBinary(t), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, stdout: make(chan string, 1000), stderr: make(chan string, 1000), exited: make(chan error, 1)}
	var readers sync.WaitGroup
	lines := func(r io.Reader, ch chan string) {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}
	readers.Go(func() { lines(outPipe, p.stdout) })
	readers.Go(func() { lines(errPipe, p.stderr) })
	go func() {
		readers.Wait() // the pipes are drained before Wait closes them
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// send writes one script line.
func (p *proc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// expect waits for the next line on ch that contains want, and returns it.
func expect(t *testing.T, ch <-chan string, want string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("output ended before a line with %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q within a minute", want)
		}
	}
}

// wait waits for the command to exit and returns its exit status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		t.Fatal("the command did not exit within a minute of the signal")
		return 0
	}
}

// pidIn reads a pid a command wrote to path.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %q", path, data)
	}
	return pid
}

// gone reports whether no process with pid exists, not even a zombie.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestScriptSignals: `agentsim script -` with stdin still open is interruptible. The
// first SIGINT or SIGTERM disposes every agent — no process of any task, sub-agents'
// included, is left — and exits non-zero; a second one exits at once.
func TestScriptSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(fmt.Sprintf("the first %s disposes every agent and exits %d", sig, 128+int(sig)), func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, "script", "-")
			p.send(t, `{"op":"register","agent":"a1"}`)
			p.send(t, `{"op":"call","agent":"a1","tool":"bash","args":{"command":"echo $$ > `+dir+`/own; exec sleep 1000","run_in_background":true}}`)
			// The built-in "bash" model runs its prompt as a background command of the
			// sub-agent and waits for it.
			p.send(t, `{"op":"call","agent":"a1","tool":"subagent","args":{"description":"nested","prompt":"echo $$ > `+dir+`/child; exec sleep 1000","model":"bash","run_in_background":true}}`)
			p.send(t, `{"op":"call","agent":"a1","tool":"bash","args":{"command":"until [ -s `+dir+`/own ] && [ -s `+dir+`/child ]; do sleep 0.01; done; echo both running"}}`)
			expect(t, p.stdout, "both running") // every process runs; the script now blocks reading stdin
			own, child := pidIn(t, dir+"/own"), pidIn(t, dir+"/child")

			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != 128+int(sig) {
				t.Errorf("exit status %d, want %d", code, 128+int(sig))
			}
			for name, pid := range map[string]int{"the agent's command": own, "the sub-agent's command": child} {
				if !gone(pid) {
					t.Errorf("%s (pid %d) outlived the interrupted command", name, pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			var stderr []string
			for l := range p.stderr {
				stderr = append(stderr, l)
			}
			if got := strings.Join(stderr, "\n"); !strings.Contains(got, "disposing every agent") || !strings.Contains(got, "script interrupted") {
				t.Errorf("stderr = %q, want the interruption said", got)
			}
		})
	}
	t.Run("a second signal exits at once, while the first one's cleanup waits", func(t *testing.T) {
		dir := t.TempDir()
		// A command that ignores SIGTERM, with an hour of grace before SIGKILL: the
		// first signal's cleanup waits for it (up to the runtime's settle timeout).
		p := start(t, "script", "-grace", "1h", "-")
		p.send(t, `{"op":"register","agent":"a1"}`)
		p.send(t, `{"op":"call","agent":"a1","tool":"bash","args":{"command":"trap '' TERM; echo $$ > `+dir+`/pid; while :; do sleep 0.05; done","run_in_background":true}}`)
		p.send(t, `{"op":"call","agent":"a1","tool":"bash","args":{"command":"until [ -s `+dir+`/pid ]; do sleep 0.01; done; echo trapped"}}`)
		expect(t, p.stdout, "trapped")
		pid := pidIn(t, dir+"/pid")
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // orphaned by the exit at once

		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		expect(t, p.stderr, "disposing every agent") // the cleanup began
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		expect(t, p.stderr, "again: exiting at once")
		if code := p.wait(t); code != 130 {
			t.Errorf("exit status %d, want 130", code)
		}
	})
}

// TestRunSignal: `agentsim run` is interruptible the same way: SIGTERM during a play
// disposes every agent, ends every task and exits 143.
func TestRunSignal(t *testing.T) {
	dir := t.TempDir()
	scenario := writeFile(t, "busy.json", `{
		"name": "busy",
		"models": {"busy": {"steps": [
			{"call": {"tool": "bash", "args": {"command": "echo $$ > `+dir+`/pid; exec sleep 1000", "run_in_background": true}}},
			{"call": {"tool": "bash", "args": {"command": "until [ -s `+dir+`/pid ]; do sleep 0.01; done; echo started"}}},
			{"await": "never", "answer": "never"}
		]}},
		"agents": [{"id": "a1", "model": "busy", "turns": ["work until stopped"]}]
	}`)
	p := start(t, "run", "-json", scenario)
	expect(t, p.stdout, `started\n[status: completed, exit code: 0]`)
	pid := pidIn(t, dir+"/pid")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 143 {
		t.Errorf("exit status %d, want 143", code)
	}
	if !gone(pid) {
		t.Errorf("the agent's command (pid %d) outlived the interrupted play", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	expect(t, p.stdout, `"type":"summary"`)
}

// TestScriptInterruptedCallAnswersInTheToolsWords: a tool call in flight when
// `agentsim script` gets SIGINT answers in the tools' words (what was interrupted,
// the task's status), never with a Go error string such as "context canceled". The
// signal comes from the command the call runs, so it arrives while the call is
// under way.
func TestScriptInterruptedCallAnswersInTheToolsWords(t *testing.T) {
	tests := []struct {
		name  string
		lines func(pid int) []string // the script; its last line is the call the signal interrupts
		want  string                 // that call's text
	}{
		{"a foreground command is killed and the answer says the call was interrupted",
			func(pid int) []string {
				return []string{fmt.Sprintf(`{"op":"call","agent":"a1","tool":"bash","args":{"command":"kill -INT %d; exec sleep 1000"}}`, pid)}
			},
			"(the call was interrupted; the command and its process group were killed)\n[status: killed, signal: SIGTERM]"},
		{"a wait for a task's reply says it was interrupted and gives the task's status",
			func(pid int) []string {
				return []string{
					fmt.Sprintf(`{"op":"call","agent":"a1","tool":"bash","args":{"command":"read line; kill -INT %d; exec sleep 1000","run_in_background":true,"stdin":"pipe"}}`, pid),
					`{"op":"call","agent":"a1","tool":"task_input","args":{"task_id":"bash-1","text":"go\n"}}`,
				}
			},
			"(input sent; the wait for the task's reply was interrupted)\n[status: running]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, "script", "-")
			p.send(t, `{"op":"register","agent":"a1"}`)
			script := tc.lines(p.cmd.Process.Pid)
			for _, l := range script {
				p.send(t, l)
			}
			var out []string
			for l := range p.stdout {
				out = append(out, l)
			}
			if code := p.wait(t); code != 130 {
				t.Errorf("exit status %d, want 130", code)
			}
			if len(out) != 1+len(script) {
				t.Fatalf("output = %q, want one line per input line", out)
			}
			for _, l := range out {
				for _, s := range []string{"context canceled", "context deadline exceeded"} {
					if strings.Contains(l, s) {
						t.Errorf("output line %s carries %q", l, s)
					}
				}
			}
			var last struct {
				Text    string `json:"text"`
				IsError bool   `json:"is_error"`
			}
			if err := json.Unmarshal([]byte(out[len(out)-1]), &last); err != nil {
				t.Fatal(err)
			}
			if last.Text != tc.want {
				t.Errorf("the interrupted call's text = %q, want %q", last.Text, tc.want)
			}
		})
	}
}
