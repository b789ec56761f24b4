package agentsim_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/agentsim"
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
			if err := agentsim.RunScript(ctxT(t), bytes.NewReader(in), &out); err != nil {
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
		`{"op":"register","agent":"a1"}`,
		`{"op":"call","text":"(no background tasks)","data":null,"is_error":false}`,
		`{"op":"","error":"malformed line: invalid character 'o' in literal null (expecting 'u')"}`,
		`{"op":"call","text":"started background task subagent-1 (subagent: d). You will be notified when it finishes; read its output with task_output.","data":{"kind":"background","task_id":"subagent-1"},"is_error":false}`,
		`{"op":"warp","error":"unknown op \"warp\" (want register, call, notices, dispose, stats or sleep)"}`,
		`{"op":"notices","notices":["background task subagent-1 (subagent: d) finished [status: completed]. Read its output with task_output."]}`,
		`{"op":"call","error":"unknown agent \"nobody\""}`,
		`{"op":"call","text":"task not found: subagent-1","data":null,"is_error":true}`,
		`{"op":"call","text":"p\n[status: completed]","data":null,"is_error":false}`,
		`{"op":"call","text":"invalid arguments: task_id must not be empty","data":null,"is_error":true}`,
		`{"op":"stats","live_tasks":0,"live_agents":1,"live_actors":3,"processes":0}`,
		`{"op":"sleep","ms":0}`,
		`{"op":"dispose","agent":"a1"}`,
		`{"op":"notices","error":"unknown agent \"a1\""}`,
		`{"op":"stats","live_tasks":0,"live_agents":0,"live_actors":1,"processes":0}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := agentsim.RunScript(ctxT(t), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	compareLines(t, want, out.String())
}
