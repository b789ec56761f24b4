package agentsim_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/producers/bash"
)

var update = flag.Bool("update", false, "rewrite the golden files of the scripts under scripts/")

// TestScripts runs every script file in the repository and compares its output,
// line for line, with the golden file next to it (scripts/NAME.golden).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("scripts/*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no script files found")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := agentsim.RunScript(testContext(t), bytes.NewReader(in), &out); err != nil {
				t.Fatal(err)
			}
			goldenPath := strings.TrimSuffix(f, ".jsonl") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test ./agentsim -update to create it)", err)
			}
			compareLines(t, string(want), out.String())
		})
	}
}

func compareLines(t *testing.T, want, got string) {
	t.Helper()
	w := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	g := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, gl, wl)
		}
	}
}

// TestScriptSurface pins the exact output lines of a small script, malformed lines
// included: every input line yields one output line, and a bad line does not stop
// the script.
func TestScriptSurface(t *testing.T) {
	in := strings.Join([]string{
		`{"op":"register","agent":"a1"}`,
		`{"op":"call","agent":"a1","tool":"task_list","args":{}}`,
		`not json`,
		`{"op":"call","agent":"a1","tool":"subagent","args":{"description":"d","prompt":"p","run_in_background":true}}`,
		`{"op":"warp"}`,
		``,
		`{"op":"notices","agent":"a1","wait":1,"timeout_ms":60000}`,
		`{"op":"call","agent":"nobody","tool":"task_list","args":{}}`,
		`{"op":"call","agent":"","tool":"task_output","args":{"task_id":"subagent-1"}}`,
		`{"op":"call","agent":"a1","tool":"task_output","args":{"task_id":"subagent-1"}}`,
		`{"op":"call","agent":"a1","tool":"task_output","args":{"task_id":""}}`,
		`{"op":"stats"}`,
		`{"op":"sleep","ms":0}`,
		`{"op":"dispose","agent":"a1"}`,
		`{"op":"notices","agent":"a1"}`,
		`{"op":"stats"}`,
	}, "\n")
	want := strings.Join([]string{
		`{"op":"register","line":1,"agent":"a1"}`,
		`{"op":"call","line":2,"agent":"a1","tool":"task_list","text":"(no background tasks)","data":null,"is_error":false}`,
		`{"op":"","line":3,"error":"malformed line: invalid character 'o' in literal null (expecting 'u')"}`,
		`{"op":"call","line":4,"agent":"a1","tool":"subagent","text":"started background task subagent-1 (subagent: d). You will be notified when it finishes; read its output with task_output.","data":{"kind":"background","task_id":"subagent-1"},"is_error":false}`,
		`{"op":"warp","line":5,"error":"unknown op \"warp\" (want register, call, notices, dispose, stats or sleep)"}`,
		`{"op":"notices","line":7,"agent":"a1","notices":["background task subagent-1 (subagent: d) finished [status: completed]. Read its output with task_output."]}`,
		`{"op":"call","line":8,"agent":"nobody","tool":"task_list","error":"unknown agent \"nobody\""}`,
		`{"op":"call","line":9,"agent":"","tool":"task_output","text":"task not found: subagent-1","data":null,"is_error":true}`,
		`{"op":"call","line":10,"agent":"a1","tool":"task_output","text":"p\n[status: completed]","data":null,"is_error":false}`,
		`{"op":"call","line":11,"agent":"a1","tool":"task_output","text":"invalid arguments: task_id must not be empty","data":null,"is_error":true}`,
		`{"op":"stats","line":12,"live_tasks":0,"live_agents":1,"live_actors":3,"processes":0}`,
		`{"op":"sleep","line":13,"ms":0}`,
		`{"op":"dispose","line":14,"agent":"a1"}`,
		`{"op":"notices","line":15,"agent":"a1","error":"unknown agent \"a1\""}`,
		`{"op":"stats","line":16,"live_tasks":0,"live_agents":0,"live_actors":1,"processes":0}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := agentsim.RunScript(testContext(t), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	compareLines(t, want, out.String())
}

// TestScriptEdgeInputs pins what the README promises for bad input — an error object
// per bad line, and the script goes on — at the edges: a line over 4 MiB,
// durations that would overflow or block practically forever, negative counts and
// timeouts, keys that differ only in case, values of the wrong shape. Every error is
// one plain line that names the field and shows no Go internals.
func TestScriptEdgeInputs(t *testing.T) {
	long := `{"op":"stats","agent":"` + strings.Repeat("x", 4<<20) + `"}` // 4 MiB of id alone
	tests := []struct {
		name string
		line string
		want string // the output line
	}{
		{"a line over 4 MiB is an error and the script goes on", long,
			`{"op":"","line":1,"error":"line is longer than 4194304 bytes (4 MiB); skipped"}`},
		{"a sleep that would overflow a duration is rejected", `{"op":"sleep","ms":9223372036854775807}`,
			`{"op":"sleep","line":1,"error":"ms must be from 0 to 86400000 (24 h)"}`},
		{"a number in exponent form is read as the number it is", `{"op":"sleep","ms":1e12}`,
			`{"op":"sleep","line":1,"error":"ms must be from 0 to 86400000 (24 h)"}`},
		{"a negative sleep is rejected", `{"op":"sleep","ms":-1}`,
			`{"op":"sleep","line":1,"error":"ms must be from 0 to 86400000 (24 h)"}`},
		{"a fraction is not a number of milliseconds", `{"op":"sleep","ms":0.5}`,
			`{"op":"sleep","line":1,"error":"malformed line: ms must be a whole number"}`},
		{"a string is not a number", `{"op":"sleep","ms":"5"}`,
			`{"op":"sleep","line":1,"error":"malformed line: ms must be a number"}`},
		{"a notices timeout of MaxInt64 is rejected", `{"op":"notices","agent":"a1","wait":1,"timeout_ms":9223372036854775807}`,
			`{"op":"notices","line":1,"agent":"a1","error":"timeout_ms must be from 1 to 86400000 (24 h)"}`},
		{"a notices timeout of three thousand years is rejected", `{"op":"notices","agent":"a1","wait":1,"timeout_ms":99999999999999}`,
			`{"op":"notices","line":1,"agent":"a1","error":"timeout_ms must be from 1 to 86400000 (24 h)"}`},
		{"a negative wait is rejected", `{"op":"notices","agent":"a1","wait":-1}`,
			`{"op":"notices","line":1,"agent":"a1","error":"wait must be from 0 to 1000000 notices"}`},
		{"a negative timeout is rejected", `{"op":"notices","agent":"a1","wait":1,"timeout_ms":-5}`,
			`{"op":"notices","line":1,"agent":"a1","error":"timeout_ms must be from 1 to 86400000 (24 h)"}`},
		{"a timeout without a wait is rejected, not ignored", `{"op":"notices","agent":"a1","timeout_ms":5}`,
			`{"op":"notices","line":1,"agent":"a1","error":"timeout_ms needs a wait of at least 1"}`},
		{"a notices wait that times out says so", `{"op":"notices","agent":"a1","wait":1,"timeout_ms":1}`,
			`{"op":"notices","line":1,"agent":"a1","error":"timed out after 1 ms: 0 of the 1 notices awaited arrived"}`},
		{"keys are case-sensitive", `{"OP":"stats"}`,
			`{"op":"","line":1,"error":"malformed line: unknown field \"OP\""}`},
		{"a key given twice is rejected", `{"op":"stats","op":"sleep"}`,
			`{"op":"sleep","line":1,"error":"malformed line: field \"op\" is given twice"}`},
		{"a key that does not apply to the op is rejected", `{"op":"sleep","ms":1,"agent":"a1"}`,
			`{"op":"sleep","line":1,"agent":"a1","error":"field \"agent\" does not apply to op \"sleep\""}`},
		{"a wrongly typed agent names the field", `{"op":"dispose","agent":7}`,
			`{"op":"dispose","line":1,"error":"malformed line: agent must be a string"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each line runs after a1 is registered and before a stats line, which
			// must still be answered: the bad line did not stop the script.
			in := tc.line + "\n" + `{"op":"stats"}` + "\n"
			var out bytes.Buffer
			err := agentsim.RunScript(testContext(t), strings.NewReader(`{"op":"register","agent":"a1"}`+"\n"+in), &out)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(got) != 3 {
				t.Fatalf("%d output lines, want 3:\n%s", len(got), out.String())
			}
			// The register line is line 1 of the input; the line under test is line 2.
			want := strings.Replace(tc.want, `"line":1`, `"line":2`, 1)
			if got[1] != want {
				t.Errorf("got  %s\nwant %s", got[1], want)
			}
			for _, internal := range []string{"Go struct", "of type", "scriptLine", "json:", "bufio"} {
				if strings.Contains(got[1], internal) {
					t.Errorf("the error shows Go internals (%q): %s", internal, got[1])
				}
			}
			if !strings.HasPrefix(got[2], `{"op":"stats","line":3,`) {
				t.Errorf("the line after the bad one was not executed: %s", got[2])
			}
		})
	}
}

// TestScriptEndsQuiescentOrSaysSo: RunScript reports ErrNotQuiescent when anything
// is live after the script, so that the command's exit status says so; a clean
// script ends without an error.
func TestScriptEndsQuiescentOrSaysSo(t *testing.T) {
	t.Run("the end of a script disposes what is left: no error", func(t *testing.T) {
		in := `{"op":"register","agent":"a1"}
{"op":"call","agent":"a1","tool":"bash","args":{"command":"exec sleep 1000","run_in_background":true}}
{"op":"call","agent":"","tool":"bash","args":{"command":"exec sleep 1000","run_in_background":true}}`
		var out bytes.Buffer
		if err := agentsim.RunScript(testContext(t), strings.NewReader(in), &out); err != nil {
			t.Errorf("RunScript = %v, want nil", err)
		}
	})
	t.Run("a process still alive after the close is an error", func(t *testing.T) {
		// A command that ignores SIGTERM, a grace period of a minute before SIGKILL,
		// and a runtime that abandons what has not settled after a millisecond: the
		// close returns with the process alive.
		pidFile := filepath.Join(t.TempDir(), "pid")
		in := `{"op":"register","agent":"a1"}
{"op":"call","agent":"a1","tool":"bash","args":{"command":"trap '' TERM; echo $$ > ` + pidFile + `; while :; do sleep 0.05; done","run_in_background":true}}
{"op":"call","agent":"a1","tool":"bash","args":{"command":"until [ -s ` + pidFile + ` ]; do sleep 0.01; done"}}`
		var out bytes.Buffer
		err := agentsim.RunScript(testContext(t), strings.NewReader(in), &out,
			agentsim.WithRuntimeOptions(actors.WithSettleTimeout(time.Millisecond)),
			agentsim.WithBashOptions(bash.WithGrace(time.Minute)))
		data, readErr := os.ReadFile(pidFile)
		if readErr != nil {
			t.Fatal(readErr)
		}
		pid, convErr := strconv.Atoi(strings.TrimSpace(string(data)))
		if convErr != nil {
			t.Fatal(convErr)
		}
		// The test's own leftover: kill it and wait until it is gone, so that no later
		// test meets it.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !awaitGone(testContext(t), pid) {
			t.Errorf("pid %d still exists after SIGKILL", pid)
		}
		if !errors.Is(err, agentsim.ErrNotQuiescent) || strings.Contains(err.Error(), "processes 0") {
			t.Errorf("RunScript = %v, want ErrNotQuiescent naming the process", err)
		}
	})
}

// gone reports whether no process with pid exists, not even a zombie.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// awaitGone polls until pid is gone or ctx ends (observing an OS process is the one
// thing tests poll for).
func awaitGone(ctx context.Context, pid int) bool {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !gone(pid) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// TestScriptInterrupted: when ctx ends, RunScript stops reading — even while blocked
// on an input that stays open — disposes every agent, leaves no process and says it
// was interrupted.
func TestScriptInterrupted(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancelCause(testContext(t))
	defer cancel(nil)
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- agentsim.RunScript(ctx, pr, outW)
		outW.Close()
	}()
	pidFile := filepath.Join(t.TempDir(), "pid")
	lines := bufio.NewScanner(outR)
	for _, l := range []string{
		`{"op":"register","agent":"a1"}`,
		`{"op":"call","agent":"a1","tool":"bash","args":{"command":"echo $$ > ` + pidFile + `; exec sleep 1000","run_in_background":true}}`,
		`{"op":"call","agent":"a1","tool":"bash","args":{"command":"until [ -s ` + pidFile + ` ]; do sleep 0.01; done"}}`,
	} {
		if _, err := io.WriteString(pw, l+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() { // the answer: the line ran, the script waits for the next
			t.Fatalf("no answer to %s", l)
		}
	}
	cancel(errors.New("interrupt"))
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "script interrupted: interrupt") {
		t.Errorf("RunScript = %v, want the interruption", err)
	}
	for lines.Scan() {
		t.Errorf("output after the interruption: %s", lines.Text())
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The task settled, so its process was reaped, before RunScript returned.
	if !gone(pid) {
		t.Errorf("the background command (pid %d) outlived the interrupted script", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
