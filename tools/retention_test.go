package tools_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/tools"
)

// retentionEnv is a runtime with the given retention and the task tools attached.
func retentionEnv(t *testing.T, opts ...actors.Option) (*actors.Runtime, *tools.TaskTools) {
	t.Helper()
	rt, err := actors.NewRuntime(opts...)
	if err != nil {
		t.Fatal(err)
	}
	tt := tools.NewTaskTools(rt)
	t.Cleanup(func() {
		tt.Close()
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rt, tt
}

func mustSet(t *testing.T, ts ...tools.Tool) tools.Set {
	t.Helper()
	set, err := tools.NewSet(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// The strings an evicted task produces, pinned by a golden file: task_output says its
// output is no longer kept (and why), task_list shows the retained records and counts
// the evicted ones on a closing line.
func TestEvictedStrings(t *testing.T) {
	var b strings.Builder
	add := func(what string, r tools.Result) {
		fmt.Fprintf(&b, "== %s (is_error: %v)\n%s\n\n", what, r.IsError, r.Text)
	}
	for _, tc := range []struct {
		name string
		opts []actors.Option
	}{
		{"retention 2", []actors.Option{actors.WithRetention(2)}},
		{"retention 0", []actors.Option{actors.WithNoRetention()}},
	} {
		rt, tt := retentionEnv(t, tc.opts...)
		if err := rt.Agents().Register(bg, "a1"); err != nil {
			t.Fatal(err)
		}
		e := &env{rt: rt, tt: tt, set: mustSet(t, tt.Tools()...)}
		var ids []messages.TaskID
		for i := range 4 {
			f := newFake(true)
			f.emit(fmt.Sprintf("output %d\n", i))
			id := e.start(t, f, "bash", fmt.Sprintf("job %d", i), "a1")
			f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
			e.settled(t, id, "a1")
			ids = append(ids, id)
		}
		running := newFake(true)
		e.start(t, running, "bash", "npm run dev", "a1")
		add(tc.name+": task_output, evicted", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q}`, ids[0])))
		add(tc.name+": task_output, evicted, with wait", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, ids[1])))
		add(tc.name+": task_output, newest finished", e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q}`, ids[3])))
		add(tc.name+": task_list", e.call("a1", "task_list", `{}`))
		add(tc.name+": task_kill, evicted", e.call("a1", "task_kill", fmt.Sprintf(`{"task_id":%q}`, ids[0])))
		add(tc.name+": task_output, evicted, another agent", e.call("a2", "task_output", fmt.Sprintf(`{"task_id":%q}`, ids[0])))
		running.finish(messages.Outcome{Status: messages.Completed})
	}
	golden(t, "evicted", b.String())
}

// An evicted bash task's spill file is removed: eviction runs the producer's Release.
func TestEvictionRemovesTheSpillFile(t *testing.T) {
	spill := t.TempDir()
	rt, tt := retentionEnv(t, actors.WithRetention(1))
	set := mustSet(t, append(tt.Tools(), newBashTool(t, rt, bash.New(bash.WithOutput(output.WithSpillDir(spill)))))...)
	call := func(name, args string) tools.Result {
		t.Helper()
		r := set.Call(bg, "", name, []byte(args))
		if r.IsError {
			t.Fatalf("%s %s: %s", name, args, r.Text)
		}
		return r
	}
	// 400 KB of output: more than the head and tail kept in memory, so it spills.
	call("bash", `{"command":"head -c 400000 /dev/zero | tr '\\0' x","run_in_background":true}`)
	call("task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":60000}`)
	files, err := os.ReadDir(spill)
	if err != nil || len(files) != 1 {
		t.Fatalf("spill files while bash-1 is retained: %v %v, want one", files, err)
	}
	call("bash", `{"command":"true","run_in_background":true}`)
	call("task_output", `{"task_id":"bash-2","wait":true,"timeout_ms":60000}`)
	// bash-1 is evicted; its actor stops and Release removes the file.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		files, err = os.ReadDir(spill)
		if err == nil && len(files) == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("spill files after bash-1 was evicted: %v %v, want none", files, err)
		}
	}
	if r := call("task_output", `{"task_id":"bash-1"}`); !strings.HasPrefix(r.Text, "(output no longer kept") {
		t.Errorf("task_output of the evicted task: %q", r.Text)
	}
}
