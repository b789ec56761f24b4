package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// harness is the system under soak, wired as an agent harness wires it: a runtime,
// the task tools as its control surface, the bash tool and the subagent tool, whose
// children run the small behaviours of play through the shared agentsim.Launcher.
// The agents drive it through the tools only, as a model would.
type harness struct {
	rt    *actors.Runtime
	tt    *tools.TaskTools
	tools tools.Set
	bash  *bash.Producer
	procs *limiter

	children *agentsim.Launcher // runs the sub-agents

	retention, tombstones int // the runtime's bounds, per owner

	// Counters of what the load did, for the report.
	ops, bgBash, bgSub, fgCalls, reads, waits, kills, lists, disposals, capped atomic.Int64
	completed, killed, failed, notices                                         atomic.Int64

	mu         sync.Mutex // protects violations
	violations []string
}

func newHarness(rate, prewarm, retention, tombstones int) (*harness, error) {
	// Zero keeps the runtime's defaults.
	rt, err := actors.NewRuntime(actors.WithRetention(retention), actors.WithTombstones(tombstones))
	if err != nil {
		return nil, err
	}
	prewarmRegistry(rt.ActorSystem(), prewarm)
	if retention == 0 {
		retention = actors.DefaultRetention
	}
	if tombstones == 0 {
		tombstones = actors.DefaultTombstones
	}
	h := &harness{rt: rt, bash: bash.New(), procs: newLimiter(rate), retention: retention, tombstones: tombstones}
	h.children = agentsim.NewLauncher(h.registerChild)
	bashTool, err := tools.NewBash(rt, h.bash)
	if err != nil {
		_ = rt.Close(context.Background())
		h.procs.stop()
		return nil, err
	}
	h.tt = tools.NewTaskTools(rt)
	h.tools, err = tools.NewSet(append(h.tt.Tools(),
		bashTool,
		tools.NewSubagent(rt, subagent.New(h.children)))...)
	if err != nil {
		h.tt.Close()
		_ = rt.Close(context.Background())
		h.procs.stop()
		return nil, err
	}
	rt.Tasks().OnDone(h.onDone)
	return h, nil
}

func (h *harness) onDone(s messages.Snapshot) {
	switch s.Status {
	case messages.Completed:
		h.completed.Add(1)
	case messages.Killed:
		h.killed.Add(1)
	default:
		h.failed.Add(1)
	}
}

func (h *harness) inject(context.Context, string) error {
	h.notices.Add(1)
	return nil
}

func (h *harness) violate(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, fmt.Sprintf(format, a...))
}

// call makes one tool call as caller and checks the result: a tool that recovered
// a panic is a violation, and so, for a strict caller, is any error but the owner's
// cap. A top-level agent is strict: nothing it calls can fail, its tasks stay until
// it disposes itself. A child is not: its parent's disposal can drop its tasks, or
// itself, under a call.
func (h *harness) call(ctx context.Context, caller messages.AgentID, strict bool, tool string, args any) tools.Result {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err) // the load's own arguments always encode
	}
	r := h.tools.Call(ctx, caller, tool, raw)
	switch {
	case strings.Contains(r.Text, "internal error"):
		h.violate("%s %s as %s: %s", tool, raw, caller, r.Text)
	case r.IsError && strings.Contains(r.Text, "background task limit reached"):
		h.capped.Add(1)
	case r.IsError && ctx.Err() != nil:
		// the soak is ending; a call cut short is expected
	case r.IsError && strict:
		h.violate("%s %s as %s failed: %s", tool, raw, caller, r.Text)
	}
	return r
}

// ---- the agents ----

// Commands of the background bash tasks, by how many processes each creates.
var (
	quickCommand = "echo soak quick; echo done"               // 1 process
	slowCommand  = "echo soak slow; sleep 0.2; echo done"     // 2 processes
	longCommand  = "echo soak long; sleep 60; echo unreached" // 2 processes; killed or disposed
)

// op is one kind of thing an agent does, with its weight.
type op struct {
	name   string
	weight int
	do     func(a *agent)
}

var ops = []op{
	{"bash quick", 16, func(a *agent) { a.background(1, tools.BashName, map[string]any{"command": quickCommand}) }},
	{"bash slow", 6, func(a *agent) { a.background(2, tools.BashName, map[string]any{"command": slowCommand}) }},
	{"subagent quick", 8, func(a *agent) { a.background(0, tools.SubagentName, brief("quick")) }},
	{"subagent bash", 3, func(a *agent) { a.background(1, tools.SubagentName, brief("bash")) }},
	{"foreground bash", 2, func(a *agent) { a.foreground(1, tools.BashName, map[string]any{"command": quickCommand}) }},
	{"foreground subagent", 2, func(a *agent) { a.foreground(0, tools.SubagentName, brief("quick")) }},
	{"read", 20, func(a *agent) { a.read(false) }},
	{"wait", 8, func(a *agent) { a.read(true) }},
	{"kill", 6, (*agent).kill},
	{"replace a long task", 3, (*agent).replaceLong},
	{"list", 6, (*agent).list},
}

// The long-running tasks every agent keeps, which only a kill or its disposal ends.
var longTasks = []struct {
	procs int
	tool  string
	args  func() map[string]any
}{
	{2, tools.BashName, func() map[string]any { return map[string]any{"command": longCommand} }},
	{0, tools.SubagentName, func() map[string]any { return brief("hang") }},
}

func brief(model string) map[string]any {
	return map[string]any{"description": "soak " + model, "prompt": "do the " + model + " thing", "model": model}
}

// agent is one top-level agent slot: it registers an agent, operates on it for a
// lifetime, disposes it and registers the next one under a new id.
//
// The load is shaped to be steady, so that the samples show its steady state rather
// than its phases. Lifetimes are fixed and the slots are evenly staggered (slot i of
// n ends its first lifetime after (i+1)/n of one): each agent's task records pile up
// over its lifetime and vanish at its disposal, and staggered sawtooths add up to a
// nearly flat total. And each agent keeps exactly one long-running task of each
// long kind (longTasks), started with it and replaced when killed, rather than
// starting them at random: their goroutines and processes would otherwise make the
// floor of the counts wander.
type agent struct {
	h        *harness
	ctx      context.Context
	rng      *rand.Rand
	lifetime time.Duration
	id       messages.AgentID
	tasks    []messages.TaskID // started by the current agent, long ones included
	long     []messages.TaskID // the current long-running tasks, by longTasks index
}

// run operates until ctx ends, then disposes the last agent.
func (a *agent) run(slot, slots int) {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	life := a.lifetime * time.Duration(slot+1) / time.Duration(slots)
	for gen := 0; a.ctx.Err() == nil; gen++ {
		a.id = messages.AgentID(fmt.Sprintf("agent-%d.%d", slot, gen))
		a.tasks, a.long = a.tasks[:0], a.long[:0]
		if err := a.h.rt.Agents().Register(a.ctx, a.id, actors.WithInjector(a.h.inject)); err != nil {
			if a.ctx.Err() == nil {
				a.h.violate("register %s: %v", a.id, err)
			}
			return
		}
		for _, lt := range longTasks {
			a.long = append(a.long, a.background(lt.procs, lt.tool, lt.args()))
		}
		for end := time.Now().Add(life); time.Now().Before(end) && a.ctx.Err() == nil; {
			a.doOne(ops, total)
			a.h.ops.Add(1)
			a.pause(time.Duration(5+a.rng.IntN(25)) * time.Millisecond)
		}
		life = a.lifetime
		// Dispose with a context of its own: the end of the load must not cut a
		// disposal short.
		if err := a.h.rt.Agents().Dispose(context.Background(), a.id); err != nil {
			a.h.violate("dispose %s: %v", a.id, err)
		}
		a.h.disposals.Add(1)
	}
}

// live is a long-lived agent: registered once, it starts short tasks (quick and slow
// commands, quick sub-agents), reads, waits and lists until the load ends, and is
// disposed only then. Its settled tasks are what retention bounds.
func (a *agent) live(slot int) {
	a.id = messages.AgentID(fmt.Sprintf("long-lived-%d", slot))
	if err := a.h.rt.Agents().Register(a.ctx, a.id, actors.WithInjector(a.h.inject)); err != nil {
		if a.ctx.Err() == nil {
			a.h.violate("register %s: %v", a.id, err)
		}
		return
	}
	defer func() {
		if err := a.h.rt.Agents().Dispose(context.Background(), a.id); err != nil {
			a.h.violate("dispose %s: %v", a.id, err)
		}
	}()
	var short []op // the short-lived work of ops, and the reads
	for _, o := range ops {
		switch o.name {
		case "bash quick", "bash slow", "subagent quick", "read", "wait", "list":
			short = append(short, o)
		}
	}
	total := 0
	for _, o := range short {
		total += o.weight
	}
	for a.ctx.Err() == nil {
		a.doOne(short, total)
		a.h.ops.Add(1)
		// It reads its recent tasks: evicted ones answer from their tombstones, but
		// past -retention + -tombstones settled tasks an id is forgotten (not found).
		if keep := a.h.retention + a.h.tombstones; len(a.tasks) > keep {
			a.tasks = append(a.tasks[:0], a.tasks[len(a.tasks)-keep/2:]...)
		}
		a.pause(time.Duration(5+a.rng.IntN(25)) * time.Millisecond)
	}
}

// doOne does one of ops, chosen at random by weight (total is the sum of the
// weights).
func (a *agent) doOne(ops []op, total int) {
	pick := a.rng.IntN(total)
	for _, o := range ops {
		if pick < o.weight {
			o.do(a)
			return
		}
		pick -= o.weight
	}
}

func (a *agent) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.ctx.Done():
	}
}

// background starts a background task that creates procs processes and returns
// its id ("" when it did not start).
func (a *agent) background(procs int, tool string, args map[string]any) messages.TaskID {
	if !a.h.procs.take(a.ctx, procs) {
		return ""
	}
	args["run_in_background"] = true
	r := a.h.call(a.ctx, a.id, true, tool, args)
	h, ok := r.Data.(tools.Handle)
	if !ok {
		return ""
	}
	a.tasks = append(a.tasks, h.TaskID)
	if tool == tools.BashName {
		a.h.bgBash.Add(1)
	} else {
		a.h.bgSub.Add(1)
	}
	return h.TaskID
}

func (a *agent) foreground(procs int, tool string, args map[string]any) {
	if !a.h.procs.take(a.ctx, procs) {
		return
	}
	a.h.call(a.ctx, a.id, true, tool, args)
	a.h.fgCalls.Add(1)
}

func (a *agent) task() (messages.TaskID, bool) {
	if len(a.tasks) == 0 {
		return "", false
	}
	return a.tasks[a.rng.IntN(len(a.tasks))], true
}

func (a *agent) read(wait bool) {
	id, ok := a.task()
	if !ok {
		return
	}
	args := map[string]any{"task_id": id}
	if wait {
		args["wait"], args["timeout_ms"] = true, 100+a.rng.IntN(200)
		a.h.waits.Add(1)
	} else {
		a.h.reads.Add(1)
	}
	a.h.call(a.ctx, a.id, true, tools.TaskOutputName, args)
}

// kill kills one of the agent's tasks other than its long-running ones: most have
// ended already, some are running.
func (a *agent) kill() {
	id, ok := a.task()
	if !ok || slices.Contains(a.long, id) {
		return
	}
	a.h.call(a.ctx, a.id, true, tools.TaskKillName, map[string]any{"task_id": id, "reason": "soak"})
	a.h.kills.Add(1)
}

// replaceLong kills one of the agent's long-running tasks, waits for it to settle
// and starts another of its kind.
func (a *agent) replaceLong() {
	i := a.rng.IntN(len(longTasks))
	if i >= len(a.long) || a.long[i] == "" {
		return
	}
	id := a.long[i]
	a.h.call(a.ctx, a.id, true, tools.TaskKillName, map[string]any{"task_id": id, "reason": "replaced"})
	a.h.kills.Add(1)
	a.h.call(a.ctx, a.id, true, tools.TaskOutputName, map[string]any{"task_id": id, "wait": true, "timeout_ms": 30000})
	a.long[i] = a.background(longTasks[i].procs, longTasks[i].tool, longTasks[i].args())
}

func (a *agent) list() {
	a.h.call(a.ctx, a.id, true, tools.TaskListName, map[string]any{})
	a.h.lists.Add(1)
}

// ---- the sub-agents ----

// registerChild is the soak's register function for agentsim.NewLauncher: each child
// is a registered agent (a child of its parent) running one of three behaviours,
// named by the brief's model: "quick" answers after a few milliseconds, "bash" runs a
// background command of its own and waits for it, "hang" runs until it is cancelled.
func (h *harness) registerChild(ctx context.Context, req subagent.Request) (agentsim.Child, error) {
	opts := []actors.AgentOption{actors.WithInjector(h.inject)}
	if req.Parent != "" {
		opts = append(opts, actors.WithParent(req.Parent))
	}
	if err := h.rt.Agents().Register(ctx, req.Child, opts...); err != nil {
		return agentsim.Child{}, err
	}
	return agentsim.Child{
		Run:     func(ctx context.Context) subagent.Result { return h.play(ctx, req) },
		Dispose: func(ctx context.Context) error { return h.rt.Agents().Dispose(ctx, req.Child) },
	}, nil
}

// play is a child's whole run.
func (h *harness) play(ctx context.Context, req subagent.Request) subagent.Result {
	aborted := func() subagent.Result {
		return subagent.Result{Stop: subagent.StopAborted, Detail: context.Cause(ctx).Error()}
	}
	switch req.Model {
	case "quick":
		t := time.NewTimer(5 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return subagent.Result{Stop: subagent.StopCompleted, Output: "done: " + req.Prompt}
		case <-ctx.Done():
			return aborted()
		}
	case "bash":
		r := h.call(ctx, req.Child, false, tools.BashName, map[string]any{"command": "echo child", "run_in_background": true})
		hd, ok := r.Data.(tools.Handle)
		if !ok {
			return subagent.Result{Stop: subagent.StopError, Detail: r.Text}
		}
		r = h.call(ctx, req.Child, false, tools.TaskOutputName, map[string]any{"task_id": hd.TaskID, "wait": true, "timeout_ms": 10000})
		if ctx.Err() != nil {
			return aborted()
		}
		return subagent.Result{Stop: subagent.StopCompleted, Output: r.Text}
	case "hang":
		<-ctx.Done()
		return aborted()
	}
	return subagent.Result{Stop: subagent.StopError, Detail: "unknown model " + req.Model}
}

// ---- protoactor's process registry ----

// prewarmRegistryIDs is how many throwaway PIDs the soak has prewarmRegistry add
// and remove: enough that each of the registry's 32768 maps has almost surely (all
// but about 32768·e^(-600000/32768) ≈ 0.0004 of one, on average) held one.
const prewarmRegistryIDs = 600_000

// prewarmRegistry adds and removes n throwaway PIDs, so that every map of the actor
// system's process registry has allocated its first slots.
//
// The registry spreads PIDs over 1024 buckets of 32 shards, 32768 Go maps in all,
// and a map allocates its first group of slots (about 260 bytes) when a PID first
// lands in it and keeps it after the PID is removed. Under a steady load every
// request's reply PID lands in a random map, so the heap grows by up to about 8 MiB
// over the first minutes and then stops: bounded, but a soak of a few minutes
// would read it as a leak. Warming the registry up first takes about a tenth of a
// second and leaves the soak measuring what it is for.
func prewarmRegistry(sys *actor.ActorSystem, n int) {
	var p nopProcess
	for i := range n {
		pid, _ := sys.ProcessRegistry.Add(p, "taskrt-soak-prewarm$"+strconv.Itoa(i))
		sys.ProcessRegistry.Remove(pid)
	}
}

// nopProcess is a process that is never sent anything.
type nopProcess struct{}

func (nopProcess) SendUserMessage(*actor.PID, any)   {}
func (nopProcess) SendSystemMessage(*actor.PID, any) {}
func (nopProcess) Stop(*actor.PID)                   {}

// ---- process pacing ----

// limiter hands out process tokens at a fixed rate, so the load creates at most
// rate OS processes per second (with a burst of one second's worth).
type limiter struct {
	tokens chan struct{}
	quit   chan struct{}
	done   chan struct{}
}

func newLimiter(rate int) *limiter {
	l := &limiter{tokens: make(chan struct{}, rate), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				select {
				case l.tokens <- struct{}{}:
				default:
				}
			case <-l.quit:
				return
			}
		}
	}()
	return l
}

// take waits for n tokens; false when ctx ended first.
func (l *limiter) take(ctx context.Context, n int) bool {
	for range n {
		select {
		case <-l.tokens:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// stop ends the refill goroutine and waits for it.
func (l *limiter) stop() {
	close(l.quit)
	<-l.done
}
