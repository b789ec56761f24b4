package agentsim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/agentsim/internal/demo"
)

// TestScenarios plays every scenario file in the repository and requires its
// expectations (and quiescence after the play) to hold.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario files found")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep := play(t, f)
			if rep.Quiescence != (Stats{}) {
				t.Errorf("quiescence = %+v, want all zero", rep.Quiescence)
			}
		})
	}
}

// loadScenario reads and validates a scenario file.
func loadScenario(t *testing.T, path string) *Scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ParseScenario(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sc
}

// play plays a scenario file and fails the test (showing every transcript) when an
// expectation is unmet.
func play(t *testing.T, path string) *Report {
	t.Helper()
	rep, err := Play(ctxT(t), loadScenario(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) > 0 {
		var b strings.Builder
		for id, entries := range rep.Transcripts {
			b.WriteString("--- " + string(id) + "\n" + transcriptText(entries))
		}
		t.Errorf("%s: unmet expectations:\n  %s\n%s", path, strings.Join(rep.Failures, "\n  "), b.String())
	}
	return rep
}

// The agentsim command plays the embedded demo, which must be the file README.md
// shows and TestScenarios plays.
func TestDemoIsTheDemoFile(t *testing.T) {
	file, err := os.ReadFile("scenarios/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(demo.JSON, file) {
		t.Error("internal/demo holds something else than scenarios/demo.json")
	}
	sc, err := ParseScenario(bytes.NewReader(demo.JSON))
	if err != nil || sc.Name != "demo" {
		t.Errorf("the demo parses as %+v, %v; want the scenario named demo", sc, err)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"malformed JSON", `{"name":`, "invalid scenario: unexpected EOF"},
		{"unknown field", `{"name":"x","agentz":[]}`, `unknown field "agentz"`},
		{"no agents", `{"name":"x","agents":[]}`, "no agents"},
		{"unknown model", `{"agents":[{"id":"a1","model":"nope","turns":["hi"]}]}`, `agent a1: model "nope" is not defined`},
		{"duplicate agent", `{"agents":[{"id":"a1","model":"echo","turns":["hi"]},{"id":"a1","model":"echo","turns":["hi"]}]}`, "agent a1 is listed twice"},
		{"parent listed later", `{"agents":[{"id":"a2","parent":"a1","model":"echo","turns":["hi"]},{"id":"a1","model":"echo","turns":["hi"]}]}`, "parent a1 must be listed before it"},
		{"no turns", `{"agents":[{"id":"a1","model":"echo","turns":[]}]}`, "agent a1 has no turns"},
		{"empty prompt", `{"agents":[{"id":"a1","model":"echo","turns":[" "]}]}`, "agent a1: turn 1 has no prompt"},
		{"step with two actions", `{"models":{"m":{"steps":[{"answer":"x","fail":"y"}]}},"agents":[{"id":"a1","model":"m","turns":["hi"]}]}`,
			"model m: step 1: exactly one of call, calls, answer and fail must be set"},
		{"stop without answer", `{"models":{"m":{"steps":[{"fail":"y","stop":"refusal"}]}},"agents":[{"id":"a1","model":"m","turns":["hi"]}]}`,
			"model m: step 1: stop needs an answer"},
		{"call without tool", `{"models":{"m":{"steps":[{"call":{"args":{}}}]}},"agents":[{"id":"a1","model":"m","turns":["hi"]}]}`,
			"model m: step 1: a call has no tool"},
		{"unknown turn field", `{"agents":[{"id":"a1","model":"echo","turns":[{"prompt":"hi","cancel":"x"}]}]}`, `unknown field "cancel"`},
		{"trailing data", `{"agents":[{"id":"a1","model":"echo","turns":["hi"]}]} {}`, "data after the scenario object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario(strings.NewReader(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseScenario error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestFailedExpectationsAreReported checks the checker itself: a scenario whose
// expectations are wrong must not pass.
func TestFailedExpectationsAreReported(t *testing.T) {
	sc, err := ParseScenario(strings.NewReader(`{
		"name": "wrong",
		"models": {"m": {"steps": [
			{"call": {"tool": "task_list", "args": {}, "expect": "something else"}},
			{"answer": "done"}
		]}},
		"agents": [{"id": "a1", "model": "m", "turns": ["go"]}],
		"expect": {"answers": {"a1": ["other"]}, "statuses": {"completed": 1}, "model_calls": {"m": 7}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Play(ctxT(t), sc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`model m: task_list result "(no background tasks)" does not contain "something else"`,
		`agent a1: turn 1 answered "", want it to contain "other"`,
		"0 tasks completed, want 1",
		"model m was called 2 times, want 7",
	}
	got := strings.Join(rep.Failures, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("failures lack %q; got:\n%s", w, got)
		}
	}
	if len(rep.Failures) == 0 {
		t.Error("no failures for a failing scenario")
	}
	if got := rep.Turns["a1"][0].Stop; got != "error" {
		t.Errorf("stop = %q, want error (a failed expectation ends the turn)", got)
	}
}
