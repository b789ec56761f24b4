package agentsim

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// The failures a real review found in a peer's background sub-agents (silent kills at
// the end of a turn, re-prompting a finished child, lost partial output, no cap, an
// aborted launch reported as success), each pinned end to end.

func TestParentTurnEndsWithoutCollecting(t *testing.T) {
	rep := play(t, "scenarios/end-of-turn-notice.json")
	// The child outlived the turn that started it: nothing kills it at end of turn.
	if got := rep.Tasks; len(got) != 1 || got[0].Status != messages.Completed {
		t.Fatalf("tasks = %+v, want subagent-1 completed", got)
	}
	var notices []string
	for _, e := range rep.Transcripts["a1"] {
		if e.Kind == entryNotice {
			notices = append(notices, e.Text)
		}
	}
	want := []string{"background task subagent-1 (subagent: review the diff) finished [status: completed]. Read its output with task_output."}
	if !slices.Equal(notices, want) {
		t.Errorf("notices = %q, want %q", notices, want)
	}
}

func TestCollectingTwiceNeverRerunsTheChild(t *testing.T) {
	rep := play(t, "scenarios/collect-twice.json")
	if got := rep.ModelCalls["oracle"]; got != 1 {
		t.Errorf("the child's model was asked %d times, want 1: collects must never re-prompt it", got)
	}
	children := 0
	for id := range rep.Transcripts {
		if strings.HasPrefix(string(id), "a1/sub-") {
			children++
		}
	}
	if children != 1 {
		t.Errorf("%d child agents ran, want 1", children)
	}
}

func TestErroredChildReportsFailed(t *testing.T) {
	rep := play(t, "scenarios/errored-child.json")
	want := map[messages.TaskID]string{
		"subagent-1": "error: simulated model failure",
		"subagent-2": "max-tokens",
		"subagent-3": "refusal",
	}
	for _, ti := range rep.Tasks {
		if ti.Status != messages.Failed || ti.Detail != want[ti.ID] {
			t.Errorf("%s = %s (%s), want failed (%s)", ti.ID, ti.Status, ti.Detail, want[ti.ID])
		}
	}
}

func TestOwnerCapGivesAClearError(t *testing.T) {
	rep := play(t, "scenarios/owner-cap.json")
	// Each child opens a gate when its model is first asked, and the parent awaits
	// those gates before it kills or is disposed, so each model ran exactly once:
	// "traces" for the start that succeeded, none for the one the cap refused.
	if got := rep.ModelCalls["traces"]; got != 1 {
		t.Errorf("the traces model ran %d times, want 1 (the refused start must not run a child)", got)
	}
	var children []string
	for id := range rep.Transcripts {
		if id != "a1" {
			children = append(children, string(id))
		}
	}
	slices.Sort(children)
	if want := []string{"a1/sub-1", "a1/sub-2", "a1/sub-3"}; !slices.Equal(children, want) {
		t.Errorf("child agents %v, want %v (a refused start registers no child)", children, want)
	}
}

// gated is a scripted child that answers "findings" once the gate "release" opens.
var gated = modelScript{Steps: []scriptStep{{Await: "release", Answer: ptr("findings")}}}

func ptr(s string) *string { return &s }

func call(t *testing.T, sim *Sim, ctx context.Context, caller messages.AgentID, tool, args string) tools.Result {
	t.Helper()
	return sim.Call(ctx, caller, tool, json.RawMessage(args))
}

func TestCancellingAWaitLeavesTheChildRunning(t *testing.T) {
	sim := newSim(t, withScript("gated", gated))
	ctx := ctxT(t)
	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	r := call(t, sim, ctx, "a1", "subagent", `{"description":"research","prompt":"go","model":"gated","run_in_background":true}`)
	if r.IsError {
		t.Fatal(r.Text)
	}
	id := r.Data.(tools.Handle).TaskID

	// The caller gives up on its wait (a deadline here; a user interrupt alike).
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	r = call(t, sim, waitCtx, "a1", "task_output", `{"task_id":"`+string(id)+`","wait":true,"timeout_ms":60000}`)
	cancel()
	if want := "(wait interrupted before the task finished)\n[status: running]"; r.IsError || r.Text != want {
		t.Errorf("cancelled wait = %+v, want %q", r, want)
	}
	s, err := sim.Runtime().Tasks().Get(ctx, id, "a1")
	if err != nil || s.Status != messages.Running || s.Reported {
		t.Fatalf("after the cancelled wait: %+v, %v; want running and unreported", s, err)
	}

	sim.gates.open("release")
	r = call(t, sim, ctx, "a1", "task_output", `{"task_id":"`+string(id)+`","wait":true,"timeout_ms":60000}`)
	if want := "findings\n[status: completed]"; r.Text != want || r.IsError {
		t.Errorf("collect = %+v, want %q", r, want)
	}
	if got := sim.modelCalls()["gated"]; got != 1 {
		t.Errorf("child model calls = %d, want 1", got)
	}
}

func TestStartWithCancelledContextNeverRunsTheChild(t *testing.T) {
	sim := newSim(t)
	ctx := ctxT(t)
	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, args := range []string{
		`{"description":"bg","prompt":"hi","run_in_background":true}`,
		`{"description":"fg","prompt":"hi"}`,
	} {
		r := call(t, sim, done, "a1", "subagent", args)
		if !r.IsError || !strings.Contains(r.Text, "the call was interrupted") || strings.Contains(r.Text, "context canceled") {
			t.Errorf("start on a cancelled context = %+v, want a tool error naming the interruption in the tools' words", r)
		}
		if r.Data != nil {
			t.Errorf("a failed start returned data %v", r.Data)
		}
	}
	if got := sim.modelCalls()["echo"]; got != 0 {
		t.Errorf("the child's model ran %d times, want 0", got)
	}
	if s := sim.Session("a1/sub-1"); s != nil {
		t.Error("a child agent was registered for an aborted start")
	}
	if r := call(t, sim, ctx, "a1", "task_list", `{}`); r.Text != "(no background tasks)" {
		t.Errorf("task_list = %q, want no tasks", r.Text)
	}
	// The aborted start burned no id.
	r := call(t, sim, ctx, "a1", "subagent", `{"description":"bg","prompt":"hi","run_in_background":true}`)
	if h, ok := r.Data.(tools.Handle); !ok || h.TaskID != "subagent-1" {
		t.Errorf("next start = %+v, want subagent-1", r)
	}
}

// TestDisposingTheTopAgentIsTransitive runs three levels of background sub-agents,
// each with a background command, and disposes the top agent: Dispose returns only
// once every descendant task and process is gone, and tasks settle deepest first.
func TestDisposingTheTopAgentIsTransitive(t *testing.T) {
	sc := loadScenario(t, "scenarios/three-levels.json")
	var opts []Option
	for name, m := range sc.spec.Models {
		opts = append(opts, withScript(name, m))
	}
	sim := newSim(t, opts...)
	ctx := ctxT(t)

	var (
		mu      sync.Mutex
		settled []messages.Snapshot
		all     = make(chan struct{})
	)
	unsub := sim.Runtime().Tasks().OnDone(func(s messages.Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		settled = append(settled, s)
		if len(settled) == 5 {
			close(all)
		}
	})
	defer unsub()

	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	a, err := sim.Agent("a1", "level1")
	if err != nil {
		t.Fatal(err)
	}
	if res := a.Turn(ctx, "start"); res.Stop != "completed" {
		t.Fatalf("turn = %+v", res)
	}
	// The lead's turn ends only after two gates: level3 opens one once its bash call
	// returned, and level2 the other once its subagent call returned. (The level-3
	// child runs from inside that call's Launch, before the runtime records the
	// level-2 task: its own gate alone did not order that start.) So the runtime
	// holds all five tasks and three agents now. The processes are another matter:
	// each shell has started, but it may still be exec'ing its command, and a /proc
	// scan in the middle of an exec can miss it: wait until the scan sees all three.
	if got := sim.Runtime().Stats(); got.Running != 5 || got.Agents != 3 {
		t.Fatalf("before Dispose: %+v, want 5 running tasks and 3 agents", got)
	}
	if got := awaitProcesses(ctx, sim, 3); got != 3 {
		t.Fatalf("%d bash processes before Dispose, want 3", got)
	}

	if err := sim.Dispose(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	// Nothing is left the moment Dispose returns.
	if got := sim.bash.Live(); got != 0 {
		t.Errorf("%d bash processes alive after Dispose", got)
	}
	if got, want := sim.Runtime().Stats(), (actors.Stats{Actors: 1}); got != want {
		t.Errorf("after Dispose: %+v, want %+v (only the registry)", got, want)
	}

	select {
	case <-all:
	case <-ctx.Done():
		t.Fatal("not every settlement reached the listener")
	}
	mu.Lock()
	defer mu.Unlock()
	// Each task is named by its kind and owner ("subagent@a1"): ids are given out
	// at commit, and the level-3 sub-agent's start, made from inside the level-2
	// start's Run, may commit first and take subagent-1. The shells' ids are fixed:
	// each level's bash call returns before the next level exists.
	named := map[string]int{} // kind@owner → place in the settle order
	gotIDs := map[string]messages.TaskID{}
	for i, s := range settled {
		name := s.Kind + "@" + string(s.Owner)
		named[name], gotIDs[name] = i, s.ID
		if s.Status != messages.Killed {
			t.Errorf("%s (%s) = %s (%s), want killed", s.ID, name, s.Status, s.Detail)
		}
	}
	// The two sub-agents hold subagent-1 and subagent-2, in either order.
	subagents := []messages.TaskID{gotIDs["subagent@a1"], gotIDs["subagent@a1/sub-1"]}
	slices.Sort(subagents)
	wantIDs := map[string]messages.TaskID{
		"bash@a1": "bash-1", "bash@a1/sub-1": "bash-2", "bash@a1/sub-1/sub-2": "bash-3",
		"subagent@a1": gotIDs["subagent@a1"], "subagent@a1/sub-1": gotIDs["subagent@a1/sub-1"],
	}
	if !mapsEqual(gotIDs, wantIDs) || !slices.Equal(subagents, []messages.TaskID{"subagent-1", "subagent-2"}) {
		t.Fatalf("tasks = %v, want the shells %v and the two sub-agents subagent-1 and subagent-2", gotIDs, wantIDs)
	}
	// A sub-agent task settles only after every task of its child agent's subtree.
	for _, rule := range [][2]string{
		{"bash@a1/sub-1/sub-2", "subagent@a1/sub-1"},
		{"subagent@a1/sub-1", "subagent@a1"},
		{"bash@a1/sub-1", "subagent@a1"},
	} {
		if named[rule[0]] > named[rule[1]] {
			t.Errorf("%s settled after %s; order: %v", rule[0], rule[1], ids(settled))
		}
	}
}

// awaitProcesses polls the Sim's live bash processes until there are want of them or
// ctx ends, and returns the last count. Polling is for observing OS processes only:
// the runtime's own state is awaited through its events.
func awaitProcesses(ctx context.Context, sim *Sim, want int) int {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := sim.bash.Live()
		if got == want {
			return got
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return got
		}
	}
}

func mapsEqual[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ids(ss []messages.Snapshot) []messages.TaskID {
	out := make([]messages.TaskID, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// TestCloseEndsEverything: closing the Sim ends background children (through their
// tasks) and foreground children (which have no task) alike.
func TestCloseEndsEverything(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	observe := func(e Event) {
		// The foreground child's model is running once its prompt is in its session.
		if e.Type == eventEntry && e.Agent == "a1/sub-2" && e.Entry.Kind == entryUser {
			once.Do(func() { close(started) })
		}
	}
	sim := newSim(t, WithObserver(observe))
	ctx := ctxT(t)
	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	r := call(t, sim, ctx, "a1", "subagent", `{"description":"stuck","prompt":"x","model":"hang","run_in_background":true}`)
	if r.IsError {
		t.Fatal(r.Text)
	}
	fg := make(chan tools.Result, 1)
	go func() {
		fg <- sim.Call(ctx, "a1", "subagent", json.RawMessage(`{"description":"stuck too","prompt":"x","model":"hang"}`))
	}()
	<-started
	if err := sim.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-fg; !res.IsError || !strings.Contains(res.Text, "[status: killed, aborted: runtime closed]") {
		t.Errorf("foreground call after Close = %+v", res)
	}
	if st := sim.stats(); st != (Stats{}) {
		t.Errorf("stats = %+v", st)
	}
	if err := sim.Close(ctx); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestCloseWaitsForTheListenersToCatchUp: the runtime's listeners are silent from
// the moment its Close begins, so Sim.Close lets its own listener and the notice
// injector handle every settlement that happened before it closes the runtime: the
// report lists every task that settled, however far behind the listener was.
func TestCloseWaitsForTheListenersToCatchUp(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	observe := func(e Event) {
		switch {
		case e.Type == eventSettled && e.Task.ID == "bash-1":
			<-release // the Sim's listener falls behind: bash-2's settlement queues up
		case e.Type == eventDisposed && e.Agent == "a1":
			once.Do(func() { close(release) }) // Close has disposed a1; the runtime's close is next
		}
	}
	sim, err := New(WithObserver(observe))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := call(t, sim, ctx, "a1", "bash", `{"command":"true","run_in_background":true}`); r.IsError {
			t.Fatal(r.Text)
		}
	}
	if err := sim.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var got []messages.TaskID
	for _, ti := range sim.settledTasks() {
		got = append(got, ti.ID)
	}
	slices.Sort(got)
	if want := []messages.TaskID{"bash-1", "bash-2"}; !slices.Equal(got, want) {
		t.Errorf("settled = %v, want %v", got, want)
	}
	if n := sim.noticeStats(); n.Delivered+n.Suppressed+n.Failed != 2 {
		t.Errorf("notices = %+v, want both settlements handled", n)
	}
}

// TestCloseLeavesNoCgroupOfTheSimsCommands: in cgroup mode the Sim's bash producer
// keeps the empty cgroups of settled commands for the next ones; Close removes them.
func TestCloseLeavesNoCgroupOfTheSimsCommands(t *testing.T) {
	sim := newSim(t)
	parent, ok := strings.CutPrefix(sim.containment(), "cgroup (a cgroup v2 per task under ")
	if !ok {
		t.Skipf("not in cgroup mode here: %s", sim.containment())
	}
	parent = strings.TrimSuffix(parent, ")")
	ctx := ctxT(t)
	if _, err := sim.Register(ctx, "a1", ""); err != nil {
		t.Fatal(err)
	}
	if r := call(t, sim, ctx, "a1", "bash", `{"command":"echo hi"}`); r.IsError {
		t.Fatal(r.Text)
	}
	taskDirs := func() []string {
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "task-") {
				dirs = append(dirs, e.Name())
			}
		}
		return dirs
	}
	if err := sim.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := taskDirs(); len(got) != 0 {
		t.Errorf("task cgroups left after Close: %v", got)
	}
}
