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

// ModelFactory makes a fresh model instance: each sub-agent run gets its own.
type ModelFactory func() Model

// Option configures a Sim. Options are made by the With… functions below; as
// everywhere in taskrt, a zero or negative value keeps the default.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	runtimeOpts  []actors.Option
	taskOpts     []tools.TaskOption
	bashOpts     []bash.Option
	bashToolOpts []tools.BashOption
	models       map[string]ModelFactory
	scripts      map[string]ModelScript
	defaultModel string
	observer     func(Event)
	maxSteps     int
	runner       tools.BashRunner // nil: the Sim's own bash producer
}

// WithRuntimeOptions passes options to actors.NewRuntime (an owner limit, a settle
// timeout, a logger).
func WithRuntimeOptions(opts ...actors.Option) Option {
	return optionFunc(func(c *config) { c.runtimeOpts = append(c.runtimeOpts, opts...) })
}

// WithoutOwnerLimit removes the runtime's cap on the running tasks of one owner:
// the explicit option for "none", since a zero limit keeps the default.
func WithoutOwnerLimit() Option {
	return WithRuntimeOptions(actors.WithoutOwnerLimit())
}

// WithTaskToolOptions passes options to tools.NewTaskTools.
func WithTaskToolOptions(opts ...tools.TaskOption) Option {
	return optionFunc(func(c *config) { c.taskOpts = append(c.taskOpts, opts...) })
}

// WithBashOptions passes options to bash.New.
func WithBashOptions(opts ...bash.Option) Option {
	return optionFunc(func(c *config) { c.bashOpts = append(c.bashOpts, opts...) })
}

// WithBashToolOptions passes options to tools.NewBash; an invalid one (a missing
// working directory, a malformed environment entry) makes New fail.
func WithBashToolOptions(opts ...tools.BashOption) Option {
	return optionFunc(func(c *config) { c.bashToolOpts = append(c.bashToolOpts, opts...) })
}

// WithBashRunner runs the bash tool's commands with r instead of the Sim's own
// bash producer (a *remote.Producer runs them on workers: see WorkerSpec).
func WithBashRunner(r tools.BashRunner) Option {
	return optionFunc(func(c *config) { c.runner = r })
}

// WithScript registers a scripted model under name: every agent or sub-agent that
// names it gets a fresh Scripted playing script from its first step. It replaces a
// built-in model of the same name.
func WithScript(name string, script ModelScript) Option {
	return optionFunc(func(c *config) { c.scripts[name] = script })
}

// WithModel registers a model factory under name, like WithScript for models that
// are not scripts.
func WithModel(name string, f ModelFactory) Option {
	return optionFunc(func(c *config) { c.models[name] = f })
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

// WithMaxSteps bounds the model steps of each turn (default DefaultMaxSteps; n <= 0
// keeps it).
func WithMaxSteps(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxSteps = n
		}
	})
}

// Sim is one simulated harness: a taskrt runtime with the task tools attached, the
// bash and subagent tools, their producers, a set of named models, and the sessions
// of its agents. Sim is the sub-agent producer's Launcher. Create it with New and
// Close it when done.
type Sim struct {
	rt        *actors.Runtime
	taskTools *tools.TaskTools
	bash      *bash.Producer
	set       tools.Set
	gates     Gates
	cfg       config
	unsub     func()
	start     time.Time

	launcher *Launcher // runs the sub-agents; Close closes it

	mu       sync.Mutex // protects the fields below
	sessions map[messages.AgentID]*Session
	agents   []messages.AgentID                    // live agents in registration order
	parents  map[messages.AgentID]messages.AgentID // of the live agents
	scripted []*Scripted
	calls    map[string]int                       // model invocations by model name
	settled  []TaskInfo                           // every settlement, in order
	started  map[messages.TaskID]messages.AgentID // tasks started through the tools, by caller
	seen     map[messages.TaskID]bool             // tasks whose settlement onDone recorded
	changed  chan struct{}                        // closed (and replaced) by every onDone
	closed   bool
}

// New builds a Sim: a runtime, the task tools (attached as its control surface), a
// bash producer and tool, and a subagent producer (launching through the Sim) and
// tool, plus the built-in models (see BuiltinModels) and those given as options.
func New(opts ...Option) (*Sim, error) {
	cfg := config{models: map[string]ModelFactory{}, scripts: map[string]ModelScript{}, defaultModel: "echo", maxSteps: DefaultMaxSteps}
	for name, sc := range BuiltinModels() {
		cfg.scripts[name] = sc
	}
	for _, o := range opts {
		o.apply(&cfg)
	}
	for name, sc := range cfg.scripts {
		if err := sc.Validate(); err != nil {
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
	bashTool, err := tools.NewBashWithRunner(rt, run, append([]tools.BashOption{tools.WithStartKeys()}, cfg.bashToolOpts...)...)
	if err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	// task_input waits up to ten seconds for a task's first reply (the tools' default
	// is one): a reply comes as soon as it is printed, so this costs nothing, and it
	// keeps a scenario's expectations from racing a loaded machine.
	s.taskTools = tools.NewTaskTools(rt, append([]tools.TaskOption{tools.WithInputWait(10 * time.Second)}, cfg.taskOpts...)...)
	all := append(s.taskTools.Tools(), bashTool, tools.NewSubagent(rt, subagent.New(s)))
	if s.set, err = tools.NewSet(all...); err != nil {
		s.taskTools.Close()
		_ = rt.Close(context.Background())
		return nil, err
	}
	s.unsub = rt.Tasks().OnDone(s.onDone)
	return s, nil
}

// Runtime is the Sim's task runtime.
func (s *Sim) Runtime() *actors.Runtime { return s.rt }

// Tools is the Sim's tool set.
func (s *Sim) Tools() tools.Set { return s.set }

// Gates are the gates the Sim's scripted models share.
func (s *Sim) Gates() *Gates { return &s.gates }

// Notices reports what the notice injector did.
func (s *Sim) Notices() tools.NoticeStats { return s.taskTools.Notices() }

// Processes counts the live processes of the Sim's bash tasks.
func (s *Sim) Processes() int { return s.bash.Live() }

// Containment says how the Sim's bash producer contains commands: "cgroup" or
// "sweep", with the reason when it could not use cgroups.
func (s *Sim) Containment() string {
	c := s.bash.Containment().String()
	if d := s.bash.ContainmentDetail(); d != "" {
		c += " (" + d + ")"
	}
	return c
}

// Call executes a tool call as caller ("" = the no-agent caller). Results carrying a
// background handle are reported to the observer as task starts, with the task's
// kind and label.
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
		s.emit(Event{Type: EventTaskStarted, Agent: caller, Task: &ti})
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
	sess := NewSession(id, s.observeEntry)
	opts := []actors.AgentOption{actors.WithInjector(sess.Inject)}
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
	s.emit(Event{Type: EventAgentRegistered, Agent: id, Parent: parent})
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
		s.emit(Event{Type: EventAgentDisposed, Agent: id})
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

// Session returns an agent's session, or nil. Sessions stay readable after their
// agent was disposed.
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
	m, err := s.NewModel(model)
	if err != nil {
		return nil, err
	}
	return &Agent{ID: id, Session: sess, Model: m, Tools: s, MaxSteps: s.cfg.maxSteps}, nil
}

// NewModel returns a fresh instance of the named model; its invocations are counted
// (ModelCalls).
func (s *Sim) NewModel(name string) (Model, error) {
	var m Model
	if f, ok := s.cfg.models[name]; ok {
		m = f()
	} else if sc, ok := s.cfg.scripts[name]; ok {
		sm := NewScripted(name, sc, &s.gates)
		s.mu.Lock()
		s.scripted = append(s.scripted, sm)
		s.mu.Unlock()
		m = sm
	} else {
		return nil, fmt.Errorf("unknown model %q (known: %s)", name, strings.Join(s.ModelNames(), ", "))
	}
	return ModelFunc(func(ctx context.Context, sess *Session) (Step, error) {
		s.mu.Lock()
		s.calls[name]++
		s.mu.Unlock()
		return m.Next(ctx, sess)
	}), nil
}

// ModelNames lists the registered models, sorted.
func (s *Sim) ModelNames() []string {
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

// ModelCalls reports how many times each model was asked for a step.
func (s *Sim) ModelCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// Failures returns every failed script expectation so far.
func (s *Sim) Failures() []string {
	s.mu.Lock()
	sms := append([]*Scripted(nil), s.scripted...)
	s.mu.Unlock()
	var out []string
	for _, m := range sms {
		out = append(out, m.Failures()...)
	}
	return out
}

// Settled returns every task settlement seen so far, in settlement order.
func (s *Sim) Settled() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TaskInfo(nil), s.settled...)
}

// Stats is a point-in-time count of the Sim's live state.
type Stats struct {
	LiveTasks  int `json:"live_tasks"`  // tasks not yet terminal
	LiveAgents int `json:"live_agents"` // registered agents
	LiveActors int `json:"live_actors"` // the runtime's live actors (the registry counts while open)
	Processes  int `json:"processes"`   // live processes of the Sim's bash tasks
}

// Zero reports whether nothing is live.
func (st Stats) Zero() bool { return st == Stats{} }

// Stats reports the live counts.
func (s *Sim) Stats() Stats {
	rs := s.rt.Stats()
	return Stats{LiveTasks: rs.Running, LiveAgents: rs.Agents, LiveActors: rs.Actors, Processes: s.bash.Live()}
}

// Close disposes every agent still registered (children with their parents), closes
// the runtime (cancelling every task still live and awaiting it), aborts sub-agent
// runs that outlived their task (a foreground run whose caller never returned), and
// waits for every goroutine the Sim started. It is idempotent.
func (s *Sim) Close(ctx context.Context) error {
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
// happened so far of the tasks started through the tools: the Sim's (Settled) and
// the notice injector's (Notices). The runtime's listeners are silent from the
// moment its Close begins, so a settlement still queued for one then would be
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
	s.emit(Event{Type: EventTaskSettled, Agent: snap.Owner, Task: &ti})
}

func (s *Sim) observeEntry(e Entry) {
	s.emit(Event{Type: EventEntry, Agent: e.Agent, Entry: &e})
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

// ---- the sub-agent Launcher ----

// Launch implements subagent.Launcher through the Sim's Launcher: it registers
// req.Child (a child agent of req.Parent) with a session of its own and runs one turn
// of the requested model (the default model when req.Model is empty) on req.Prompt,
// on a goroutine the Sim owns. The run's context is not derived from ctx: a
// background run outlives the call that started it and ends only through Cancel or
// on its own.
func (s *Sim) Launch(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	return s.launcher.Launch(ctx, req)
}

// registerChild is the Sim's RegisterFunc: a child agent with a session and a fresh
// instance of its model, whose run is one turn on the prompt.
func (s *Sim) registerChild(ctx context.Context, req subagent.Request) (Child, error) {
	name := req.Model
	if name == "" {
		name = s.cfg.defaultModel
	}
	model, err := s.NewModel(name)
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
	agent := &Agent{ID: req.Child, Session: sess, Model: model, Tools: s, MaxSteps: s.cfg.maxSteps, Progress: req.Progress}
	return Child{
		Run:     func(ctx context.Context) subagent.Result { return agent.Turn(ctx, req.Prompt) },
		Dispose: func(ctx context.Context) error { return s.Dispose(ctx, req.Child) },
	}, nil
}
