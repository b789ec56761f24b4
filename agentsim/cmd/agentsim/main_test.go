package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binDir holds the command built for the signal tests, if one was; TestMain
// removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

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
		{"-h lists both commands", []string{"-h"}, 0, "agentsim script [-models FILE]", ""},
		{"help", []string{"help"}, 0, "Exit status:", ""},
		{"unknown command", []string{"fly"}, 2, "", `unknown command "fly"`},
		{"unknown flag", []string{"run", "-fast"}, 2, "", "flag provided but not defined: -fast"},
		{"two files", []string{"run", "a.json", "b.json"}, 2, "", "want at most one scenario FILE"},
		{"missing scenario file", []string{"run", "/nonexistent/x.json"}, 2, "", "no such file or directory"},
		{"invalid scenario file", []string{"run", badScenario}, 2, "", "invalid scenario: no agents"},
		{"negative timeout", []string{"run", "-timeout", "-1s"}, 2, "", "-timeout must not be negative"},
		{"script needs a file", []string{"script"}, 2, "", "want exactly one FILE, or - for stdin"},
		{"missing script file", []string{"script", "/nonexistent/x.jsonl"}, 2, "", "no such file or directory"},
		{"invalid models file", []string{"script", "-models", notJSON, "-"}, 2, "", "model m: step 1: exactly one of call, calls, answer and fail must be set"},
		{"a cap and no cap exclude each other", []string{"script", "-owner-limit", "3", "-no-owner-limit", "-"}, 2, "", "-owner-limit and -no-owner-limit exclude each other"},
		{"a negative grace", []string{"script", "-grace", "-1s", "-"}, 2, "", "-grace must not be negative"},
		{"a bad flag points at the command's own help", []string{"script", "-fast", "-"}, 2, "", "run 'agentsim script -h' for the usage"},
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

// TestCommandHelp: each command's -h prints its own help, not the general one.
func TestCommandHelp(t *testing.T) {
	tests := []struct {
		args      []string
		want, not []string
	}{
		{[]string{"run", "-h"}, []string{"Usage: agentsim run", "-timeout D", "Exit status:"}, []string{"Reads JSON lines", "-owner-limit"}},
		{[]string{"script", "-h"}, []string{"Usage: agentsim script", "-no-owner-limit", "-grace D", `{"op":"sleep","ms":100}`, "Exit status:"}, []string{"Plays the built-in demo", "-timeout D"}},
		{[]string{"-h"}, []string{"agentsim run -h", "agentsim script -h"}, []string{"Reads JSON lines", "Plays the built-in demo"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runArgs(t, "", tc.args...)
			if code != 0 || errOut != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("help has %q, which belongs to another command:\n%s", n, out)
				}
			}
		})
	}
}

// TestOwnerLimitFlags: -owner-limit 0 keeps the default cap of 10, as the options
// rule says (zero keeps the default); -no-owner-limit removes it; a positive value
// sets it.
func TestOwnerLimitFlags(t *testing.T) {
	script := func(n int) string {
		lines := []string{`{"op":"register","agent":"a1"}`}
		for range n {
			lines = append(lines, `{"op":"call","agent":"a1","tool":"bash","args":{"command":"exec sleep 1000","run_in_background":true}}`)
		}
		return strings.Join(lines, "\n")
	}
	tests := []struct {
		name    string
		flags   []string
		starts  int // background starts in the script
		refused int // how many of them the cap refuses (the last ones)
	}{
		{"-owner-limit 0 keeps the default of 10", []string{"-owner-limit", "0"}, 11, 1},
		{"no flag: the default of 10", nil, 11, 1},
		{"-owner-limit 3", []string{"-owner-limit", "3"}, 4, 1},
		{"-no-owner-limit removes the cap", []string{"-no-owner-limit"}, 12, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"script"}, tc.flags...), "-")
			code, out, errOut := runArgs(t, script(tc.starts), args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			refused := strings.Count(out, "background task limit reached")
			if refused != tc.refused {
				t.Errorf("%d starts refused, want %d:\n%s", refused, tc.refused, out)
			}
		})
	}
}

// TestJSONOutputIsSnakeCase: every key of the -json events and summary is
// snake_case (map keys that are data — agent ids, statuses, model names — aside),
// and started events carry the task's label.
func TestJSONOutputIsSnakeCase(t *testing.T) {
	code, out, errOut := runArgs(t, "", "run", "-json", "../../scenarios/foreground.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	dataMaps := map[string]bool{"turns": true, "statuses": true, "model_calls": true, "args": true}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !snake.MatchString(k) {
					t.Errorf("key %q at %s is not snake_case", k, path)
				}
				if dataMaps[k] {
					if m, ok := e.(map[string]any); ok {
						for dk, de := range m {
							walk(path+"."+k+"["+dk+"]", de)
						}
						continue
					}
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	started := 0
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		walk(fmt.Sprintf("line %d", i+1), v)
		if v["type"] == "started" {
			started++
			task, _ := v["task"].(map[string]any)
			if label, _ := task["label"].(string); label == "" {
				t.Errorf("started event without a label: %s", line)
			}
		}
	}
	if started == 0 {
		t.Errorf("no started event in:\n%s", out)
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
		`{"op":"register","line":1,"agent":"a1"}`,
		`{"op":"call","line":2,"agent":"a1","tool":"subagent","text":"hello, world","data":null,"is_error":false}`,
		`{"op":"call","line":3,"agent":"a1","tool":"subagent","text":"x","data":null,"is_error":false}`,
		`{"op":"","line":4,"error":"malformed line: invalid character 'o' looking for beginning of value"}`,
		`{"op":"stats","line":5,"live_tasks":0,"live_agents":1,"live_actors":2,"processes":0}`,
	}, "\n") + "\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

// TestDemoPasses plays the built-in demo. Its own timeout_ms bounds it: a demo that
// stopped being quick fails its expectations rather than a stopwatch here.
func TestDemoPasses(t *testing.T) {
	code, out, errOut := runArgs(t, "", "run", "-plain")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"a1/sub-1", "→ task_kill", "notice", "agent         disposed", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// TestRunMetrics plays the demo with -metrics -json: the metrics object after the
// summary counts exactly the tasks and notices the summary lists — started by kind,
// settled and timed by kind and status, one stop duration per killed task, notices
// delivered and suppressed.
func TestRunMetrics(t *testing.T) {
	code, out, errOut := runArgs(t, "", "run", "-json", "-metrics")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("output:\n%s", out)
	}
	var sum struct {
		Type  string `json:"type"`
		Tasks []struct {
			Kind   string `json:"kind"`
			Status string `json:"status"`
		} `json:"tasks"`
		Notices struct{ Delivered, Suppressed int } `json:"notices"`
	}
	var met struct {
		Type    string `json:"type"`
		Metrics []struct {
			Name       string            `json:"name"`
			Attributes map[string]string `json:"attributes"`
			Value      *int64            `json:"value"`
			Count      *uint64           `json:"count"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-2]), &sum); err != nil || sum.Type != "summary" {
		t.Fatalf("summary line: %v: %s", err, lines[len(lines)-2])
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &met); err != nil || met.Type != "metrics" {
		t.Fatalf("metrics line: %v: %s", err, lines[len(lines)-1])
	}
	want := map[string]int64{
		"taskrt.notices{result=delivered}":  int64(sum.Notices.Delivered),
		"taskrt.notices{result=suppressed}": int64(sum.Notices.Suppressed),
	}
	for _, task := range sum.Tasks {
		want["taskrt.tasks.started{kind="+task.Kind+"}"]++
		want["taskrt.tasks.settled{kind="+task.Kind+",status="+task.Status+"}"]++
		want["taskrt.task.duration{kind="+task.Kind+",status="+task.Status+"}:count"]++
		if task.Status == "killed" {
			want["taskrt.task.stop_duration{kind="+task.Kind+"}:count"]++
		}
	}
	got := map[string]int64{}
	for _, m := range met.Metrics {
		key := m.Name + attrText(m.Attributes)
		switch {
		case m.Value != nil:
			got[key] = *m.Value
		case m.Count != nil:
			got[key+":count"] = int64(*m.Count)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics\n got: %v\nwant: %v", got, want)
	}
}
