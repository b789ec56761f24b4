package agentsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// ErrNotQuiescent is returned, wrapped with the live counts, by Sim.Close and
// RunScript when something outlived its owner: after every agent was disposed and
// the runtime closed, a task, agent, actor or bash process was still live.
var ErrNotQuiescent = errors.New("not quiescent after close")

// Option configures a Sim (New), and the Sim a scenario or a script plays on (Play,
// RunScript). Options are made by the With… functions and ParseModels; as everywhere
// in taskrt, a zero or negative value keeps the default.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	runtimeOpts  []actors.Option
	bashOpts     []bash.Option
	models       map[string]func() Model
	scripts      map[string]modelScript
	defaultModel string
	observer     func(Event)
	runner       tools.BashRunner // nil: the Sim's own bash producer
}

// WithRuntimeOptions passes options to actors.NewRuntime: an owner limit (or
// actors.WithoutOwnerLimit), a queue, a global limit, a settle timeout, a logger, a
// meter provider.
func WithRuntimeOptions(opts ...actors.Option) Option {
	return optionFunc(func(c *config) { c.runtimeOpts = append(c.runtimeOpts, opts...) })
}

// WithBashOptions passes options to bash.New: a sandbox, a grace period, a shell.
func WithBashOptions(opts ...bash.Option) Option {
	return optionFunc(func(c *config) { c.bashOpts = append(c.bashOpts, opts...) })
}

// WithModel registers a model under name: every agent or sub-agent that names it
// gets a fresh instance from newModel. It replaces a built-in model of the same
// name, and one an earlier option registered.
func WithModel(name string, newModel func() Model) Option {
	return optionFunc(func(c *config) {
		c.models[name] = newModel
		delete(c.scripts, name)
	})
}

// withScript registers a scripted model under name: every agent or sub-agent that
// names it gets a fresh instance playing script from its first step. It replaces a
// built-in model of the same name, and one an earlier option registered.
func withScript(name string, script modelScript) Option {
	return optionFunc(func(c *config) {
		c.scripts[name] = script
		delete(c.models, name)
	})
}

// WithDefaultModel names the model a subagent call without a model argument runs
// (default "echo"; "" keeps it).
func WithDefaultModel(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.defaultModel = name
		}
	})
}

// WithObserver receives every event: transcript entries of every session, agents
// registered and disposed, task starts and settlements. It is called from many
// goroutines and must be safe for concurrent use; it must not block for long.
func WithObserver(f func(Event)) Option {
	return optionFunc(func(c *config) { c.observer = f })
}

// withBashRunner runs the bash tool's commands with r instead of the Sim's own bash
// producer (a scenario's workers: a *remote.Producer runs them over NATS).
func withBashRunner(r tools.BashRunner) Option {
	return optionFunc(func(c *config) { c.runner = r })
}

// Sim is one simulated harness: a taskrt runtime with the task tools attached, the
// bash and subagent tools, their producers, a set of named models, and the sessions
// of its agents. A sub-agent is a child agent of its own ("a1/sub-1"), with a session
// and a fresh instance of its model, launched through a Launcher the Sim owns.
// Create a Sim with New and Close it when done.
type Sim struct {
	rt        *actors.Runtime
	taskTools *tools.TaskTools
	bash      *bash.Producer
	set       tools.Set
	gates     gateSet
	cfg       config
	unsub     func()
	start     time.Time

	launcher *Launcher // runs the sub-agents; Close closes it

	mu       sync.Mutex // protects the fields below
	sessions map[messages.AgentID]*Session
	agents   []messages.AgentID                    // live agents in registration order
	parents  map[messages.AgentID]messages.AgentID // of the live agents
	scripted []*scripted
	calls    map[string]int                       // model invocations by model name
	settled  []TaskInfo                           // every settlement, in order
	started  map[messages.TaskID]messages.AgentID // tasks started through the tools, by caller
	seen     map[messages.TaskID]bool             // tasks whose settlement onDone recorded
	changed  chan struct{}                        // closed (and replaced) by every onDone
	closed   bool
}

// New builds a Sim: a runtime, the task tools (attached as its control surface), a
// bash producer and tool, and a subagent producer (launching through the Sim) and
// tool, plus the built-in models (echo, bash, error, max-tokens, refusal, hang: see
// README.md) and those given as options.
func New(opts ...Option) (*Sim, error) {
	cfg := config{models: map[string]func() Model{}, scripts: map[string]modelScript{}, defaultModel: "echo"}
	for name, sc := range builtinModels() {
		cfg.scripts[name] = sc
	}
	for _, o := range opts {
		o.apply(&cfg)
	}
	for name, sc := range cfg.scripts {
		if err := sc.validate(); err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
	}
	rt, err := actors.NewRuntime(cfg.runtimeOpts...)
	if err != nil {
		return nil, err
	}
	s := &Sim{
		rt:       rt,
		cfg:      cfg,
		bash:     bash.New(cfg.bashOpts...),
		sessions: map[messages.AgentID]*Session{},
		parents:  map[messages.AgentID]messages.AgentID{},
		calls:    map[string]int{},
		started:  map[messages.TaskID]messages.AgentID{},
		seen:     map[messages.TaskID]bool{},
		changed:  make(chan struct{}),
		start:    time.Now(),
	}
	s.launcher = NewLauncher(s.registerChild)
	var run tools.BashRunner = s.bash
	if cfg.runner != nil {
		run = cfg.runner
	}
	// The simulated harness offers start keys (tools.WithStartKeys): scripts and
	// scenarios play a harness that retries a start.
	bashTool, err := tools.NewBashWithRunner(rt, run, tools.WithStartKeys())
	if err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	// task_input waits up to ten seconds for a task's first reply (the tools' default
	// is one): a reply comes as soon as it is printed, so this costs nothing, and it
	// keeps a scenario's expectations from racing a loaded machine.
	s.taskTools = tools.NewTaskTools(rt, tools.WithInputWait(10*time.Second))
	all := append(s.taskTools.Tools(), bashTool, tools.NewSubagent(rt, subagent.New(s.launcher)))
	if s.set, err = tools.NewSet(all...); err != nil {
		s.taskTools.Close()
		_ = rt.Close(context.Background())
		return nil, err
	}
	s.unsub = rt.Tasks().OnDone(s.onDone)
	return s, nil
}

// Runtime is the Sim's task runtime: its Tasks and Agents, its Stats.
func (s *Sim) Runtime() *actors.Runtime { return s.rt }

// noticeStats reports what the notice injector did.
func (s *Sim) noticeStats() tools.NoticeStats { return s.taskTools.Notices() }

// containment says how the Sim's bash producer contains commands: "cgroup" or
// "sweep", with the reason when it could not use cgroups.
func (s *Sim) containment() string {
	c := s.bash.Containment().String()
	if d := s.bash.ContainmentDetail(); d != "" {
		c += " (" + d + ")"
	}
	return c
}

// Call executes a tool call as caller ("" = the no-agent caller), as a model's call
// would be executed. Results carrying a background handle are reported to the
// observer as task starts, with the task's kind and label.
func (s *Sim) Call(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result {
	r := s.set.Call(ctx, caller, name, args)
	h, ok := r.Data.(tools.Handle)
	if ok {
		s.mu.Lock()
		s.started[h.TaskID] = caller
		s.mu.Unlock()
	}
	if ok && s.cfg.observer != nil {
		ti := TaskInfo{ID: h.TaskID, Kind: kindOf(h.TaskID), Owner: caller, Status: messages.Running}
		// The label is the runtime's (what task_list and notices show). A task whose
		// record is already gone (its owner was disposed under the call) keeps none.
		if snap, err := s.rt.Tasks().Get(ctx, h.TaskID, caller); err == nil {
			ti.Kind, ti.Label = snap.Kind, snap.Label
		}
		s.emit(Event{Type: eventStarted, Agent: caller, Task: &ti})
	}
	return r
}

func kindOf(id messages.TaskID) string {
	k, _, _ := strings.Cut(string(id), "-")
	return k
}

// Register registers a top-level agent (or, with parent set, a child agent of
// parent) with a new session as its notice injector, and returns the session.
func (s *Sim) Register(ctx context.Context, id, parent messages.AgentID) (*Session, error) {
	sess := newSession(id, s.observeEntry)
	opts := []actors.AgentOption{actors.WithInjector(sess.inject)}
	if parent != "" {
		opts = append(opts, actors.WithParent(parent))
	}
	if err := s.rt.Agents().Register(ctx, id, opts...); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sessions[id] = sess
	s.agents = append(s.agents, id)
	s.parents[id] = parent
	s.mu.Unlock()
	s.emit(Event{Type: eventRegistered, Agent: id, Parent: parent})
	return sess, nil
}

// Dispose disposes an agent: it returns once the agent, its child agents and every
// task any of them owned are gone. An agent that is already gone (its parent's
// disposal took it) is not an error.
func (s *Sim) Dispose(ctx context.Context, id messages.AgentID) error {
	err := s.rt.Agents().Dispose(ctx, id)
	if errors.Is(err, messages.ErrOwnerUnknown) || errors.Is(err, messages.ErrClosed) {
		err = nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	was := slices.Contains(s.agents, id)
	// The runtime disposed the agent's descendants with it.
	s.agents = slices.DeleteFunc(s.agents, func(a messages.AgentID) bool { return s.descends(a, id) })
	for a := range s.parents {
		if !slices.Contains(s.agents, a) {
			delete(s.parents, a)
		}
	}
	s.mu.Unlock()
	if was {
		s.emit(Event{Type: eventDisposed, Agent: id})
	}
	return nil
}

// descends reports whether a is id or one of its descendants. Called with s.mu held.
func (s *Sim) descends(a, id messages.AgentID) bool {
	for a != "" {
		if a == id {
			return true
		}
		a = s.parents[a]
	}
	return false
}

// registered reports whether id is registered and not yet disposed.
func (s *Sim) registered(id messages.AgentID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.parents[id]
	return ok
}

// transcripts returns a copy of every session's entries, disposed agents included.
func (s *Sim) transcripts() map[messages.AgentID][]Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[messages.AgentID][]Entry, len(s.sessions))
	for id, sess := range s.sessions {
		out[id] = sess.Entries()
	}
	return out
}

// Session returns an agent's session (a sub-agent's too), or nil. Sessions stay
// readable after their agent was disposed.
func (s *Sim) Session(id messages.AgentID) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// Agent returns an agent loop for a registered agent, running a fresh instance of
// the named model.
func (s *Sim) Agent(id messages.AgentID, model string) (*Agent, error) {
	sess := s.Session(id)
	if sess == nil {
		return nil, fmt.Errorf("agent %s is not registered", id)
	}
	m, err := s.newModel(model)
	if err != nil {
		return nil, err
	}
	return &Agent{id: id, session: sess, model: m, tools: s, maxSteps: defaultMaxSteps}, nil
}

// newModel returns a fresh instance of the named model; its invocations are counted
// (modelCalls).
func (s *Sim) newModel(name string) (Model, error) {
	var m Model
	if f, ok := s.cfg.models[name]; ok {
		m = f()
	} else if sc, ok := s.cfg.scripts[name]; ok {
		sm := newScripted(name, sc, &s.gates)
		s.mu.Lock()
		s.scripted = append(s.scripted, sm)
		s.mu.Unlock()
		m = sm
	} else {
		return nil, fmt.Errorf("unknown model %q (known: %s)", name, strings.Join(s.modelNames(), ", "))
	}
	return modelFunc(func(ctx context.Context, sess *Session) (Step, error) {
		s.mu.Lock()
		s.calls[name]++
		s.mu.Unlock()
		return m.Next(ctx, sess)
	}), nil
}

// modelNames lists the registered models, sorted.
func (s *Sim) modelNames() []string {
	var names []string
	for n := range s.cfg.scripts {
		names = append(names, n)
	}
	for n := range s.cfg.models {
		if _, dup := s.cfg.scripts[n]; !dup {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// modelCalls reports how many times each model was asked for a step.
func (s *Sim) modelCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// failures returns every failed script expectation so far.
func (s *Sim) failures() []string {
	s.mu.Lock()
	sms := append([]*scripted(nil), s.scripted...)
	s.mu.Unlock()
	var out []string
	for _, m := range sms {
		out = append(out, m.failed()...)
	}
	return out
}

// settledTasks returns every task settlement seen so far, in settlement order.
func (s *Sim) settledTasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TaskInfo(nil), s.settled...)
}

// Stats is a count of a Sim's live state: a Report's quiescence after the play, and
// a script's stats line.
type Stats struct {
	LiveTasks  int `json:"live_tasks"`  // tasks not yet terminal
	LiveAgents int `json:"live_agents"` // registered agents
	LiveActors int `json:"live_actors"` // the runtime's live actors (the registry counts while open)
	Processes  int `json:"processes"`   // live processes of the Sim's bash tasks
}

// stats reports the live counts.
func (s *Sim) stats() Stats {
	rs := s.rt.Stats()
	return Stats{LiveTasks: rs.Running, LiveAgents: rs.Agents, LiveActors: rs.Actors, Processes: s.bash.Live()}
}

// Close disposes every agent still registered (children with their parents), closes
// the runtime (cancelling every task still live and awaiting it), aborts sub-agent
// runs that outlived their task (a foreground run whose caller never returned), and
// waits for every goroutine the Sim started. Then it checks that nothing outlived
// its owner: when a task, agent, actor or bash process is still live, it returns
// ErrNotQuiescent. It is idempotent.
func (s *Sim) Close(ctx context.Context) error {
	if err := s.close(ctx); err != nil {
		return err
	}
	if st := s.stats(); st != (Stats{}) {
		return fmt.Errorf("%w: live tasks %d, agents %d, actors %d, processes %d",
			ErrNotQuiescent, st.LiveTasks, st.LiveAgents, st.LiveActors, st.Processes)
	}
	return nil
}

// close is Close without the quiescence check: Play reports quiescence instead.
func (s *Sim) close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	agents := slices.Clone(s.agents)
	s.mu.Unlock()
	var errs []error
	for _, id := range slices.Backward(agents) {
		if err := s.Dispose(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("dispose %s: %w", id, err))
		}
	}
	if err := s.catchUp(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.rt.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close runtime: %w", err))
	}
	if err := s.bash.Close(); err != nil { // the empty cgroups it kept for later commands
		errs = append(errs, fmt.Errorf("close bash producer: %w", err))
	}
	s.unsub()
	s.taskTools.Close()
	// Sub-agent runs that outlived their task (a foreground run whose caller never
	// returned) end now.
	if err := s.launcher.Close(ctx, "runtime closed"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// catchUp waits until the runtime's listeners have handled every settlement that
// happened so far of the tasks started through the tools: the Sim's (settledTasks)
// and the notice injector's (noticeStats). The runtime's listeners are silent from
// the moment its Close begins, so a settlement still queued for one then would be
// missing from the report. A task still running is not waited for: it ends in the
// runtime's Close, which no listener reports.
func (s *Sim) catchUp(ctx context.Context) error {
	s.mu.Lock()
	var pending []messages.TaskID
	for id := range s.started {
		if !s.seen[id] {
			pending = append(pending, id)
		}
	}
	s.mu.Unlock()
	for _, id := range pending {
		snap, err := s.rt.Tasks().Get(ctx, id, s.startedBy(id))
		switch {
		case errors.Is(err, messages.ErrClosed):
			return nil // closed already: the listeners are silent, nothing will come
		case err == nil && !snap.Status.Terminal():
			continue
		}
		// Terminal, or its record is gone: its owner's disposal awaited it. Either
		// way the settlement is on its way to the listeners.
		for {
			s.mu.Lock()
			seen, changed := s.seen[id], s.changed
			s.mu.Unlock()
			if seen {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return fmt.Errorf("waiting for the settlement of %s: %w", id, ctx.Err())
			}
		}
	}
	s.mu.Lock()
	n := int64(len(s.settled))
	s.mu.Unlock()
	// Both listeners receive every settlement, in the same order.
	return s.taskTools.WaitHandled(ctx, n)
}

// startedBy is the caller that started id through the tools.
func (s *Sim) startedBy(id messages.TaskID) messages.AgentID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started[id]
}

func (s *Sim) onDone(snap messages.Snapshot) {
	ti := taskInfo(snap)
	s.mu.Lock()
	s.settled = append(s.settled, ti)
	s.seen[snap.ID] = true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.emit(Event{Type: eventSettled, Agent: snap.Owner, Task: &ti})
}

func (s *Sim) observeEntry(e Entry) {
	s.emit(Event{Type: eventEntry, Agent: e.Agent, Entry: &e})
}

func (s *Sim) emit(e Event) {
	if s.cfg.observer == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Elapsed = e.Time.Sub(s.start).Seconds()
	s.cfg.observer(e)
}

// ---- the sub-agents ----

// registerChild is the register function of the Sim's Launcher: it registers
// req.Child (a child agent of req.Parent) with a session of its own and a fresh
// instance of the requested model (the default model when req.Model is empty), and
// its run is one turn on req.Prompt. The subagent producer launches children through
// the Launcher: a background run outlives the call that started it and ends only
// through Cancel or on its own.
func (s *Sim) registerChild(ctx context.Context, req subagent.Request) (Child, error) {
	name := req.Model
	if name == "" {
		name = s.cfg.defaultModel
	}
	model, err := s.newModel(name)
	if err != nil {
		return Child{}, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return Child{}, messages.ErrClosed
	}
	sess, err := s.Register(ctx, req.Child, req.Parent)
	if err != nil {
		return Child{}, err
	}
	agent := &Agent{id: req.Child, session: sess, model: model, tools: s, maxSteps: defaultMaxSteps, progress: req.Progress}
	return Child{
		Run:     func(ctx context.Context) subagent.Result { return agent.Turn(ctx, req.Prompt) },
		Dispose: func(ctx context.Context) error { return s.Dispose(ctx, req.Child) },
	}, nil
}
