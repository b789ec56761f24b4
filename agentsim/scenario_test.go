package agentsim_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/agentsim"
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
			if !rep.Quiescence.Zero() {
				t.Errorf("quiescence = %+v, want all zero", rep.Quiescence)
			}
		})
	}
}

// play plays a scenario file and fails the test (showing every transcript) when an
// expectation is unmet.
func play(t *testing.T, path string) *agentsim.Report {
	t.Helper()
	sc, err := agentsim.LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agentsim.Play(ctxT(t), sc)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		var b strings.Builder
		for id, entries := range rep.Transcripts {
			b.WriteString("--- " + string(id) + "\n" + agentsim.TranscriptText(entries))
		}
		t.Errorf("%s: unmet expectations:\n  %s\n%s", path, strings.Join(rep.Failures, "\n  "), b.String())
	}
	return rep
}

func TestDemoIsTheDemoFile(t *testing.T) {
	demo := agentsim.Demo()
	file, err := agentsim.LoadScenario("scenarios/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if demo.Name != "demo" || demo.Description != file.Description || len(demo.Models) != len(file.Models) {
		t.Errorf("Demo() = %q, want the scenario in scenarios/demo.json", demo.Name)
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
			_, err := agentsim.ParseScenario(strings.NewReader(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseScenario error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestFailedExpectationsAreReported checks the checker itself: a scenario whose
// expectations are wrong must not pass.
func TestFailedExpectationsAreReported(t *testing.T) {
	sc, err := agentsim.ParseScenario(strings.NewReader(`{
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
	rep, err := agentsim.Play(ctxT(t), sc)
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
	if rep.OK() {
		t.Error("OK() = true for a failing scenario")
	}
	if got := rep.Turns["a1"][0].Stop; got != "error" {
		t.Errorf("stop = %q, want error (a failed expectation ends the turn)", got)
	}
}
