package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/tools"
)

// maxErrorLine is the longest tool error a model may get: one line of about 200
// characters, whatever the input echoed in it.
const maxErrorLine = 200

// FuzzToolArgs feeds arbitrary argument bytes to every tool. Whatever the input, a
// call never panics (nor hits the internal-error recovery), always says something,
// gives a one-line reason of at most maxErrorLine characters when it fails, and starts nothing when it fails; a bash
// call that succeeds ran or started exactly once. The seed corpus lives in
// testdata/fuzz/FuzzToolArgs.
func FuzzToolArgs(f *testing.F) {
	long := strings.Repeat("x", 5000)
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"task_id":"bash-1"}`, `{"task_id":"bash-1","wait":true,"timeout_ms":1}`,
		`{"task_id":"bash-1","reason":"x"}`, `{"command":"ls"}`, `{"command":"ls","run_in_background":true}`,
		`{"command":"ls","timeout_ms":-1}`, `{"task_id":7}`, `{"x":1}`, `{"task_id":"bash-1"} {}`,
		`{"task_id":"` + long + `"}`, `{"` + long + `":1}`, `{"command":"ls","timeout_ms":"` + long + `"}`,
		`{"task_ids":["` + long + `"]}`, `{"task_id":"bash-1","until":"(` + long + `"}`,
	} {
		f.Add([]byte(seed))
	}
	e := newEnv(f)
	agent := func() {
		if err := e.rt.Agents().Register(bg, "a1", actors.WithInjector(func(context.Context, string) error { return nil })); err != nil {
			f.Fatal(err)
		}
	}
	agent()
	r := &fakeRunner{}
	set, err := tools.NewSet(append(e.tt.Tools(),
		fakeBash(f, e.rt, r),
		&renamed{Tool: fakeBash(f, e.rt, r, tools.WithRunInBackground(false)), name: "bash-fg"})...)
	if err != nil {
		f.Fatal(err)
	}
	names := set.Names()
	f.Fuzz(func(t *testing.T, args []byte) {
		if r.starts > 500 { // keep the runtime small: drop a1's finished tasks
			if err := e.rt.Agents().Dispose(bg, "a1"); err != nil {
				t.Fatal(err)
			}
			agent()
			r.starts = 0
		}
		for _, name := range names {
			runs, starts, tasks := r.runs, r.starts, e.rt.Stats().Tasks
			got := set.Call(bg, "a1", name, json.RawMessage(args))
			switch {
			case got.Text == "":
				t.Errorf("%s(%q): empty result", name, args)
			case strings.Contains(got.Text, "internal error"):
				t.Errorf("%s(%q): %s", name, args, got.Text)
			case got.IsError && strings.Contains(got.Text, "\n"):
				t.Errorf("%s(%q): multi-line error %q", name, args, got.Text)
			case got.IsError && utf8.RuneCountInString(got.Text) > maxErrorLine:
				t.Errorf("%s(%q): an error of %d characters, over %d: %q", name, args, utf8.RuneCountInString(got.Text), maxErrorLine, got.Text)
			case got.IsError && (r.runs != runs || r.starts != starts || e.rt.Stats().Tasks != tasks):
				t.Errorf("%s(%q): failed with %q but started something", name, args, got.Text)
			case !got.IsError && strings.HasPrefix(name, "bash") && r.runs+r.starts != runs+starts+1:
				t.Errorf("%s(%q): succeeded but ran %d and started %d", name, args, r.runs-runs, r.starts-starts)
			}
		}
	})
}
