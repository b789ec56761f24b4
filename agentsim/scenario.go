package agentsim

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim/internal/demo"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// defaultScenarioTimeout bounds a scenario that sets no timeout_ms.
const defaultScenarioTimeout = 60 * time.Second

// Scenario is a whole simulated session as data: the models, the agents and their
// turns, and the expected outcome. README.md documents the format; ParseScenario
// reads it. The fields are the settings a player may show or change before Play;
// the rest of the file (models, agents, expectations, limits, workers) is data that
// only Play reads.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// TimeoutMS bounds the whole play in milliseconds; when it passes, every turn
	// still running is aborted (and the expectations will say what did not happen).
	// 0 means 60 s.
	TimeoutMS int `json:"timeout_ms,omitempty"`

	spec scenarioSpec // the rest of the file
}

// scenarioFile is a scenario file as encoding/json reads (and, in the fuzz test,
// writes) it: the keys of Scenario's fields, then those of scenarioSpec, whose
// exported fields encoding/json promotes although the type is unexported.
type scenarioFile struct {
	*Scenario
	scenarioSpec
}

// scenarioSpec is the part of a scenario only Play reads.
type scenarioSpec struct {
	// OwnerLimit caps the running tasks of each owner (actors.WithOwnerLimit); 0
	// keeps the runtime's default.
	OwnerLimit int `json:"owner_limit,omitempty"`
	// Queue lets up to this many starts per owner wait beyond the caps, with status
	// queued (actors.WithQueue); 0 = none.
	Queue int `json:"queue,omitempty"`
	// GlobalLimit caps the running tasks across all agents (actors.WithGlobalLimit),
	// slots handed out round robin; 0 = none.
	GlobalLimit int `json:"global_limit,omitempty"`
	// DefaultModel is the model a subagent call without a model argument runs.
	DefaultModel string `json:"default_model,omitempty"`
	// Models are scripted models by name, for agents and sub-agents.
	Models map[string]modelScript `json:"models,omitempty"`
	// Workers, when set, run every bash command on workers over NATS: an embedded
	// NATS server, these workers in this process, and the Sim as an owner node
	// (see workerSpec).
	Workers []workerSpec `json:"workers,omitempty"`
	// Agents are the top-level agents, registered in order and then run
	// concurrently.
	Agents []scenarioAgent `json:"agents"`
	// Expect is the expected outcome.
	Expect expect `json:"expect"`
}

// scenarioAgent is one top-level agent of a scenario.
type scenarioAgent struct {
	ID     messages.AgentID `json:"id"`
	Parent messages.AgentID `json:"parent,omitempty"` // an agent listed earlier
	Model  string           `json:"model"`
	Turns  []turn           `json:"turns"`
	// Keep leaves the agent registered after its last turn; Close disposes it. By
	// default an agent is disposed as soon as its turns are done.
	Keep bool `json:"keep,omitempty"`
}

// turn is one user turn: a prompt, and optionally a gate whose opening aborts the
// turn (a user interrupting). In JSON a turn is an object or just the prompt string.
type turn struct {
	Prompt   string `json:"prompt"`
	CancelOn string `json:"cancel_on,omitempty"`
}

// UnmarshalJSON accepts "prompt" as well as {"prompt": …, "cancel_on": …}.
func (t *turn) UnmarshalJSON(b []byte) error {
	if s := bytes.TrimSpace(b); len(s) > 0 && s[0] == '"' {
		return json.Unmarshal(s, &t.Prompt)
	}
	type plain turn
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(t))
}

// expect is a scenario's expected outcome. Every field is optional; quiescence (no
// live task, agent, actor or process after the play) is always checked.
type expect struct {
	// Answers: per agent, a substring of each turn's final answer, in turn order.
	Answers map[messages.AgentID][]string `json:"answers,omitempty"`
	// Stops: per agent, each turn's stop reason, in turn order.
	Stops map[messages.AgentID][]subagent.StopReason `json:"stops,omitempty"`
	// Statuses: the number of tasks that settled with each status (statuses not
	// named must not occur).
	Statuses map[messages.Status]int `json:"statuses,omitempty"`
	// Tasks: per task (an id, or KIND@OWNER as in SettledBefore), its terminal
	// status, optionally with a detail prefix:
	// "completed", "failed, error: simulated".
	Tasks map[messages.TaskID]string `json:"tasks,omitempty"`
	// Notices: how many notices were delivered and suppressed.
	Notices *noticeCounts `json:"notices,omitempty"`
	// ModelCalls: per model name, how many steps it was asked for, across all its
	// instances.
	ModelCalls map[string]int `json:"model_calls,omitempty"`
	// SettledBefore: pairs of tasks [a, b], each an id or KIND@OWNER (findTask): a
	// settled before b.
	SettledBefore [][2]messages.TaskID `json:"settled_before,omitempty"`
	// Transcript: per agent, substrings that must occur, in this order, in its
	// rendered transcript (one line per entry, "kind: text").
	Transcript map[messages.AgentID][]string `json:"transcript,omitempty"`
}

// noticeCounts are expected notice counts.
type noticeCounts struct {
	Delivered  int64 `json:"delivered"`
	Suppressed int64 `json:"suppressed"`
}

// demoJSON is the built-in demo, which the agentsim command plays (internal/demo).
//
//go:embed scenarios/demo.json
var demoJSON []byte

func init() { demo.JSON = demoJSON }

// ParseScenario decodes and validates a scenario file. Unknown keys are errors, so a
// misspelt key never goes unnoticed.
func ParseScenario(r io.Reader) (*Scenario, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	f := scenarioFile{Scenario: &Scenario{}}
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid scenario: data after the scenario object")
	}
	sc := f.Scenario
	sc.spec = f.scenarioSpec
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	return sc, nil
}

// validate reports the first inconsistency: no agents, duplicate or empty ids, a
// parent not listed before its child, an unknown model, an empty turn, a malformed
// model script.
func (sc *Scenario) validate() error {
	if len(sc.spec.Agents) == 0 {
		return errors.New("no agents")
	}
	known := func(name string) bool {
		_, ok := sc.spec.Models[name]
		_, builtin := builtinModels()[name]
		return ok || builtin
	}
	for name, m := range sc.spec.Models {
		if err := m.validate(); err != nil {
			return fmt.Errorf("model %s: %w", name, err)
		}
	}
	if sc.spec.DefaultModel != "" && !known(sc.spec.DefaultModel) {
		return fmt.Errorf("default_model %q is not defined", sc.spec.DefaultModel)
	}
	seen := map[messages.AgentID]bool{}
	for i, a := range sc.spec.Agents {
		switch {
		case strings.TrimSpace(string(a.ID)) == "":
			return fmt.Errorf("agent %d has no id", i+1)
		case seen[a.ID]:
			return fmt.Errorf("agent %s is listed twice", a.ID)
		case a.Parent != "" && !seen[a.Parent]:
			return fmt.Errorf("agent %s: parent %s must be listed before it", a.ID, a.Parent)
		case !known(a.Model):
			return fmt.Errorf("agent %s: model %q is not defined", a.ID, a.Model)
		case len(a.Turns) == 0:
			return fmt.Errorf("agent %s has no turns", a.ID)
		}
		for j, t := range a.Turns {
			if strings.TrimSpace(t.Prompt) == "" {
				return fmt.Errorf("agent %s: turn %d has no prompt", a.ID, j+1)
			}
		}
		seen[a.ID] = true
	}
	if err := validateWorkers(sc.spec.Workers); err != nil {
		return err
	}
	if sc.TimeoutMS < 0 || sc.spec.OwnerLimit < 0 || sc.spec.Queue < 0 || sc.spec.GlobalLimit < 0 {
		return errors.New("timeout_ms, owner_limit, queue and global_limit must not be negative")
	}
	return nil
}

// Report is the outcome of a played scenario.
type Report struct {
	Scenario string  `json:"scenario"`
	Elapsed  float64 `json:"elapsed_s"`
	// Turns: per agent, how each turn ended.
	Turns map[messages.AgentID][]TurnResult `json:"turns"`
	// Tasks: every settled task, in settlement order.
	Tasks []TaskInfo `json:"tasks"`
	// Statuses counts the tasks by terminal status.
	Statuses map[messages.Status]int `json:"statuses"`
	// Notices: delivered, suppressed, failed.
	Notices tools.NoticeStats `json:"notices"`
	// ModelCalls counts model steps by model name.
	ModelCalls map[string]int `json:"model_calls"`
	// Quiescence is the live state after the Sim closed: all zero when nothing
	// outlived its owner.
	Quiescence Stats `json:"quiescence"`
	// Containment is how the bash producer contained the commands (cgroup or sweep).
	Containment string `json:"containment"`
	// Sandbox is the bash producer's sandbox ("off", or the sandbox and its detail).
	Sandbox string `json:"sandbox"`
	// Transcripts: every session, top-level agents and sub-agents.
	Transcripts map[messages.AgentID][]Entry `json:"-"`
	// Failures lists every unmet expectation; empty means the scenario passed.
	Failures []string `json:"failures"`
}

// TurnResult is how one turn ended: the stop reason, the final answer (or the
// partial one of an aborted turn) and the error or abort detail, if any.
type TurnResult struct {
	Stop   subagent.StopReason `json:"stop"`
	Output string              `json:"output"`
	Detail string              `json:"detail,omitempty"`
}

// Play runs a scenario on a new Sim and returns its report. opts add to (and may
// override) what the scenario configures — an observer, runtime options, models.
// The error is for a Sim that could not be built or closed; unmet expectations,
// and anything that outlived its owner, are in the report.
func Play(ctx context.Context, sc *Scenario, opts ...Option) (*Report, error) {
	if err := sc.validate(); err != nil {
		return nil, err
	}
	spec := sc.spec
	var simOpts []Option
	for name, m := range spec.Models {
		simOpts = append(simOpts, withScript(name, m))
	}
	if spec.DefaultModel != "" {
		simOpts = append(simOpts, WithDefaultModel(spec.DefaultModel))
	}
	simOpts = append(simOpts, WithRuntimeOptions(actors.WithOwnerLimit(spec.OwnerLimit), // 0 keeps the default
		actors.WithQueue(spec.Queue), actors.WithGlobalLimit(spec.GlobalLimit)))
	var nodes *workerNodes
	if len(spec.Workers) > 0 {
		var err error
		if nodes, err = startNodes(); err != nil {
			return nil, err
		}
		simOpts = append(simOpts, withBashRunner(nodes.owner))
	}
	sim, err := New(append(simOpts, opts...)...)
	if err != nil {
		nodes.close(ctx)
		return nil, err
	}
	timeout := defaultScenarioTimeout
	if sc.TimeoutMS > 0 {
		timeout = time.Duration(sc.TimeoutMS) * time.Millisecond
	}
	playCtx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("scenario timed out after %s", timeout))
	defer cancel()
	nodes.play(playCtx, sim, spec.Workers)

	rep := &Report{Scenario: sc.Name, Turns: map[messages.AgentID][]TurnResult{}}
	var problems []string
	agents := make([]*Agent, len(spec.Agents))
	for i, a := range spec.Agents {
		if _, err := sim.Register(playCtx, a.ID, a.Parent); err != nil {
			problems = append(problems, fmt.Sprintf("register %s: %v", a.ID, err))
			continue
		}
		if agents[i], err = sim.Agent(a.ID, a.Model); err != nil {
			problems = append(problems, err.Error())
		}
	}
	var (
		mu sync.Mutex // protects rep.Turns and problems
		wg sync.WaitGroup
	)
	for i, a := range spec.Agents {
		if agents[i] == nil {
			continue
		}
		wg.Go(func() {
			for _, t := range a.Turns {
				res := playTurn(playCtx, sim, agents[i], t)
				mu.Lock()
				rep.Turns[a.ID] = append(rep.Turns[a.ID], TurnResult(res))
				mu.Unlock()
			}
			if a.Keep {
				return
			}
			if err := sim.Dispose(context.WithoutCancel(playCtx), a.ID); err != nil {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("dispose %s: %v", a.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if playCtx.Err() != nil {
		problems = append(problems, context.Cause(playCtx).Error())
	}
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancelClose()
	if err := sim.close(closeCtx); err != nil {
		cancel()
		nodes.close(closeCtx)
		return nil, err
	}
	cancel()
	workerFailures, workerProcesses := nodes.close(closeCtx)
	problems = append(problems, workerFailures...)
	rep.Elapsed = time.Since(sim.start).Seconds()
	rep.Tasks = sim.settledTasks()
	rep.Statuses = map[messages.Status]int{}
	for _, t := range rep.Tasks {
		rep.Statuses[t.Status]++
	}
	rep.Notices = sim.noticeStats()
	rep.ModelCalls = sim.modelCalls()
	rep.Quiescence = sim.stats()
	rep.Quiescence.Processes += workerProcesses
	rep.Containment = sim.containment()
	rep.Sandbox = sim.sandbox()
	rep.Transcripts = sim.transcripts()
	rep.Failures = append(append(append([]string{}, problems...), sim.failures()...), spec.Expect.check(rep)...)
	return rep, nil
}

// playTurn runs one turn, aborting it when its cancel_on gate opens.
func playTurn(ctx context.Context, sim *Sim, a *Agent, t turn) subagent.Result {
	if t.CancelOn == "" {
		return a.Turn(ctx, t.Prompt)
	}
	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if sim.gates.wait(turnCtx, t.CancelOn) == nil {
			cancel(fmt.Errorf("interrupted (gate %s opened)", t.CancelOn))
		}
		<-stop
	})
	res := a.Turn(turnCtx, t.Prompt)
	cancel(nil)
	close(stop)
	wg.Wait()
	return res
}

// check compares the report with the expectations and returns what does not match.
func (e expect) check(r *Report) []string {
	var out []string
	fail := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	if r.Quiescence != (Stats{}) {
		fail("not quiescent after close: %+v", r.Quiescence)
	}
	for _, id := range sortedKeys(e.Answers) {
		turns := r.Turns[id]
		for i, want := range e.Answers[id] {
			if i >= len(turns) {
				fail("agent %s: turn %d did not run", id, i+1)
			} else if !strings.Contains(turns[i].Output, want) {
				fail("agent %s: turn %d answered %q, want it to contain %q", id, i+1, turns[i].Output, want)
			}
		}
	}
	for _, id := range sortedKeys(e.Stops) {
		turns := r.Turns[id]
		for i, want := range e.Stops[id] {
			if i >= len(turns) {
				fail("agent %s: turn %d did not run", id, i+1)
			} else if turns[i].Stop != want {
				fail("agent %s: turn %d stopped %s (%s), want %s", id, i+1, turns[i].Stop, turns[i].Detail, want)
			}
		}
	}
	if e.Statuses != nil {
		all := map[messages.Status]bool{}
		for s := range e.Statuses {
			all[s] = true
		}
		for s := range r.Statuses {
			all[s] = true
		}
		for _, s := range sortedKeys(all) {
			if got, want := r.Statuses[s], e.Statuses[s]; got != want {
				fail("%d tasks %s, want %d", got, s, want)
			}
		}
	}
	for _, id := range sortedKeys(e.Tasks) {
		want := e.Tasks[id]
		i, err := findTask(r.Tasks, id)
		if err != nil {
			fail("%v", err)
			continue
		}
		t := r.Tasks[i]
		got := string(t.Status)
		if t.Detail != "" {
			got += ", " + t.Detail
		}
		if !strings.HasPrefix(got, want) {
			fail("task %s ended %q, want %q", id, got, want)
		}
	}
	if n := e.Notices; n != nil {
		if r.Notices.Delivered != n.Delivered || r.Notices.Suppressed != n.Suppressed {
			fail("notices delivered %d, suppressed %d; want %d, %d", r.Notices.Delivered, r.Notices.Suppressed, n.Delivered, n.Suppressed)
		}
	}
	for _, name := range sortedKeys(e.ModelCalls) {
		if got, want := r.ModelCalls[name], e.ModelCalls[name]; got != want {
			fail("model %s was called %d times, want %d", name, got, want)
		}
	}
	for _, p := range e.SettledBefore {
		a, aerr := findTask(r.Tasks, p[0])
		b, berr := findTask(r.Tasks, p[1])
		switch {
		case aerr != nil || berr != nil:
			fail("%v", errors.Join(aerr, berr))
		case a > b:
			fail("task %s did not settle before %s (order: %s)", p[0], p[1], settleOrder(r.Tasks))
		}
	}
	for _, id := range sortedKeys(e.Transcript) {
		text := transcriptText(r.Transcripts[id])
		at := 0
		for _, want := range e.Transcript[id] {
			i := strings.Index(text[at:], want)
			if i < 0 {
				fail("agent %s: transcript lacks %q (in order)", id, want)
				break
			}
			at += i + len(want)
		}
	}
	return out
}

// findTask finds a task an expectation names (ts in settle order): by its id
// ("bash-3"), or as KIND@OWNER ("subagent@a1/sub-1"), the one task of that kind
// that agent started. Ids are given out when a start commits, so a task whose start
// races another of its kind — a background sub-agent's own sub-agent can commit
// before it — has no fixed id; its kind and owner name it all the same.
func findTask(ts []TaskInfo, ref messages.TaskID) (int, error) {
	kind, owner, byOwner := strings.Cut(string(ref), "@")
	match := func(t TaskInfo) bool { return t.ID == ref }
	if byOwner {
		match = func(t TaskInfo) bool { return t.Kind == kind && string(t.Owner) == owner }
	}
	found := -1
	for i, t := range ts {
		if !match(t) {
			continue
		}
		if found >= 0 {
			return -1, fmt.Errorf("task %s names both %s and %s", ref, ts[found].ID, t.ID)
		}
		found = i
	}
	if found < 0 {
		return -1, fmt.Errorf("task %s never settled", ref)
	}
	return found, nil
}

func settleOrder(ts []TaskInfo) string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = string(t.ID)
	}
	return strings.Join(ids, " ")
}

// transcriptText renders entries one per line as "kind: text" (tool calls as
// "tool_call: name args"), the form expect.Transcript matches against.
func transcriptText(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Kind)
		b.WriteString(": ")
		switch e.Kind {
		case entryToolCall:
			b.WriteString(e.Tool + " " + string(e.Args))
		case entryToolResult:
			b.WriteString(e.Tool + " " + e.Text)
		default:
			b.WriteString(e.Text)
		}
		if e.Final {
			b.WriteString(" [stop: " + string(e.Stop) + "]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
