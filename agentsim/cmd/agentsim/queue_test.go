package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// agentsim script -queue N -global-limit N: three agents share a global limit of 2;
// the starts over it are queued, and freed slots go to the agents in turn.
func TestScriptQueueAndGlobalLimit(t *testing.T) {
	order := filepath.Join(t.TempDir(), "order")
	lines := []string{
		`{"op":"register","agent":"a1"}`, `{"op":"register","agent":"a2"}`, `{"op":"register","agent":"a3"}`,
		`{"op":"call","agent":"a1","tool":"bash","args":{"command":"read -r _","run_in_background":true,"stdin":"pipe"}}`,
		`{"op":"call","agent":"a1","tool":"bash","args":{"command":"read -r _","run_in_background":true,"stdin":"pipe"}}`,
	}
	for i, a := range []string{"a1", "a2", "a3", "a1"} {
		lines = append(lines, fmt.Sprintf(`{"op":"call","agent":%q,"tool":"bash","args":{"command":"echo %s-%d >> %s","run_in_background":true}}`, a, a, i, order))
	}
	lines = append(lines,
		`{"op":"call","agent":"a1","tool":"task_list","args":{}}`,
		`{"op":"call","agent":"a1","tool":"task_input","args":{"task_id":"bash-1","text":"","eof":true}}`,
		`{"op":"notices","agent":"a1","wait":2,"timeout_ms":30000}`,
		`{"op":"notices","agent":"a2","wait":1,"timeout_ms":30000}`,
		`{"op":"notices","agent":"a3","wait":1,"timeout_ms":30000}`,
		`{"op":"call","agent":"a1","tool":"task_input","args":{"task_id":"bash-2","text":"","eof":true}}`,
		fmt.Sprintf(`{"op":"call","agent":"a1","tool":"bash","args":{"command":"cat %s"}}`, order),
	)
	code, out, errOut := runArgs(t, strings.Join(lines, "\n")+"\n", "script", "-queue", "2", "-global-limit", "2", "-")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		`"text":"queued background task bash-3 (position 1 of 1); it starts when a slot frees.`,
		`"text":"queued background task bash-4 (position 1 of 1); it starts when a slot frees.`,
		`"text":"queued background task bash-5 (position 1 of 1); it starts when a slot frees.`,
		`"text":"queued background task bash-6 (position 2 of 2); it starts when a slot frees.`,
		`bash-3 [bash] queued — echo a1-0`,
		// One slot cycles: a2, a3, then a1 (the agent after the one served last), a1 again.
		`"text":"a2-1\na3-2\na1-0\na1-3\n[status: completed, exit code: 0]"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if code, _, errOut := runArgs(t, "", "script", "-queue", "-1", "-"); code != 2 || !strings.Contains(errOut, "-queue and -global-limit must not be negative") {
		t.Errorf("a negative -queue: exit %d, stderr %q", code, errOut)
	}
}
