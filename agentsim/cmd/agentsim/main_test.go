package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runArgs(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUsageAndErrors(t *testing.T) {
	badScenario := writeFile(t, "bad.json", `{"agents": []}`)
	notJSON := writeFile(t, "bad-models.json", `{"m": {"steps": [{"answer": "x", "fail": "y"}]}}`)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"no arguments prints the usage", nil, 2, "", "Usage:"},
		{"-h documents everything", []string{"-h"}, 0, "agentsim script [-models FILE]", ""},
		{"help", []string{"help"}, 0, `{"op":"sleep","ms":100}`, ""},
		{"run -h", []string{"run", "-h"}, 0, "Exit status:", ""},
		{"unknown command", []string{"fly"}, 2, "", `unknown command "fly"`},
		{"unknown flag", []string{"run", "-fast"}, 2, "", "flag provided but not defined: -fast"},
		{"two files", []string{"run", "a.json", "b.json"}, 2, "", "want at most one scenario FILE"},
		{"missing scenario file", []string{"run", "/nonexistent/x.json"}, 2, "", "no such file or directory"},
		{"invalid scenario file", []string{"run", badScenario}, 2, "", "invalid scenario: no agents"},
		{"negative timeout", []string{"run", "-timeout", "-1s"}, 2, "", "-timeout must not be negative"},
		{"script needs a file", []string{"script"}, 2, "", "want exactly one FILE, or - for stdin"},
		{"missing script file", []string{"script", "/nonexistent/x.jsonl"}, 2, "", "no such file or directory"},
		{"invalid models file", []string{"script", "-models", notJSON, "-"}, 2, "", "model m: step 1: exactly one of call, calls, answer and fail must be set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runArgs(t, "", tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.wantCode, errOut)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errOut)
			}
		})
	}
}

func TestRunScenario(t *testing.T) {
	t.Run("a passing scenario exits 0 with a summary", func(t *testing.T) {
		code, out, errOut := runArgs(t, "", "run", "../../scenarios/foreground.json")
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		for _, want := range []string{"agentsim · foreground", "a1/sub-1", "quiescence   live tasks 0, agents 0, actors 0, processes 0 — ok", "PASS"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("-json ends with the summary object", func(t *testing.T) {
		code, out, _ := runArgs(t, "", "run", "-json", "../../scenarios/foreground.json")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum struct {
			Type     string   `json:"type"`
			Scenario string   `json:"scenario"`
			Failures []string `json:"failures"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Type != "summary" || sum.Scenario != "foreground" || len(sum.Failures) != 0 {
			t.Errorf("summary = %+v", sum)
		}
	})
	t.Run("unmet expectations exit 1 and are listed", func(t *testing.T) {
		f := writeFile(t, "wrong.json", `{"name":"wrong","agents":[{"id":"a1","model":"echo","turns":["hi"]}],"expect":{"answers":{"a1":["bye"]}}}`)
		code, out, _ := runArgs(t, "", "run", "-plain", f)
		if code != 1 || !strings.Contains(out, `FAIL: 1 unmet expectations`) || !strings.Contains(out, `want it to contain "bye"`) {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("-timeout aborts a scenario that would hang", func(t *testing.T) {
		f := writeFile(t, "hang.json", `{"name":"hang","agents":[{"id":"a1","model":"hang","turns":["hi"]}]}`)
		code, out, _ := runArgs(t, "", "run", "-timeout", "200ms", f)
		if code != 1 || !strings.Contains(out, "scenario timed out after 200ms") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}

func TestScriptCommand(t *testing.T) {
	models := writeFile(t, "models.json", `{"greeter": {"steps": [{"answer": "hello, ${prompt}"}]}}`)
	in := strings.Join([]string{
		`{"op":"register","agent":"a1"}`,
		`{"op":"call","agent":"a1","tool":"subagent","args":{"description":"greet","prompt":"world"}}`,
		`{"op":"call","agent":"a1","tool":"subagent","args":{"description":"greet","prompt":"x","model":"echo"}}`,
		`oops`,
		`{"op":"stats"}`,
	}, "\n")
	code, out, errOut := runArgs(t, in, "script", "-models", models, "-default-model", "greeter", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := strings.Join([]string{
		`{"op":"register","agent":"a1"}`,
		`{"op":"call","text":"hello, world","data":null,"is_error":false}`,
		`{"op":"call","text":"x","data":null,"is_error":false}`,
		`{"op":"","error":"malformed line: invalid character 'o' looking for beginning of value"}`,
		`{"op":"stats","live_tasks":0,"live_agents":1,"live_actors":2,"processes":0}`,
	}, "\n") + "\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestDemoFinishesQuickly(t *testing.T) {
	start := time.Now()
	code, out, errOut := runArgs(t, "", "run", "-plain")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"a1/sub-1", "→ task_kill", "notice", "agent         disposed", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// Not a timing assertion on the runtime; a guard that the demo stays a demo.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the demo took %s", d)
	}
}
