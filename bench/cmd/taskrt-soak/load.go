package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// harness is the system under soak, wired as an agent harness wires it: a runtime,
// the task tools as its control surface, the bash tool and the subagent tool, whose
// children run the small behaviours of launcher. The agents drive it through the
// tools only, as a model would.
type harness struct {
	rt    *actors.Runtime
	tt    *tools.TaskTools
	tools tools.Set
	procs *limiter

	children sync.WaitGroup // one per child run goroutine

	// Counters of what the load did, for the report.
	ops, bgBash, bgSub, fgCalls, reads, waits, kills, lists, disposals, capped atomic.Int64
	notices                                                                    atomic.Int64
	settled                                                                    sync.Map // messages.Status → *atomic.Int64

	mu         sync.Mutex // protects violations
	violations []string
}

func newHarness(rate int) (*harness, error) {
	rt, err := actors.NewRuntime()
	if err != nil {
		return nil, err
	}
	h := &harness{rt: rt, procs: newLimiter(rate)}
	h.tt = tools.NewTaskTools(rt)
	h.tools, err = tools.NewSet(append(h.tt.Tools(),
		tools.NewBash(rt, bash.New()),
		tools.NewSubagent(rt, subagent.New(&launcher{h: h})))...)
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
	c, _ := h.settled.LoadOrStore(s.Status, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

func (h *harness) settledCount(st messages.Status) int64 {
	if c, ok := h.settled.Load(st); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
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
// a panic is a violation, and so, for a strict caller, is a task tool's error. A
// top-level agent is strict: its tasks stay until it disposes itself. A child is
// not: its parent's disposal can drop its tasks under a call.
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
	case r.IsError && strict && tool != tools.SubagentName && tool != tools.BashName:
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
	{"bash long", 2, func(a *agent) { a.background(2, tools.BashName, map[string]any{"command": longCommand}) }},
	{"subagent quick", 8, func(a *agent) { a.background(0, tools.SubagentName, brief("quick")) }},
	{"subagent bash", 3, func(a *agent) { a.background(1, tools.SubagentName, brief("bash")) }},
	{"subagent hang", 2, func(a *agent) { a.background(0, tools.SubagentName, brief("hang")) }},
	{"foreground bash", 2, func(a *agent) { a.foreground(1, tools.BashName, map[string]any{"command": quickCommand}) }},
	{"foreground subagent", 2, func(a *agent) { a.foreground(0, tools.SubagentName, brief("quick")) }},
	{"read", 20, func(a *agent) { a.read(false) }},
	{"wait", 8, func(a *agent) { a.read(true) }},
	{"kill", 6, (*agent).kill},
	{"list", 6, (*agent).list},
}

func brief(model string) map[string]any {
	return map[string]any{"description": "soak " + model, "prompt": "do the " + model + " thing", "model": model}
}

// agent is one top-level agent slot: it registers an agent, operates on it for a
// random number of operations, disposes it and registers the next one.
type agent struct {
	h     *harness
	ctx   context.Context
	rng   *rand.Rand
	id    messages.AgentID
	tasks []messages.TaskID // started by the current agent
}

// run operates until ctx ends, then disposes the last agent.
func (a *agent) run(slot int) {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for gen := 0; a.ctx.Err() == nil; gen++ {
		a.id = messages.AgentID(fmt.Sprintf("agent-%d.%d", slot, gen))
		a.tasks = a.tasks[:0]
		if err := a.h.rt.Agents().Register(a.ctx, a.id, actors.WithInjector(a.h.inject)); err != nil {
			if a.ctx.Err() == nil {
				a.h.violate("register %s: %v", a.id, err)
			}
			return
		}
		for n := 20 + a.rng.IntN(60); n > 0 && a.ctx.Err() == nil; n-- {
			pick := a.rng.IntN(total)
			for _, o := range ops {
				if pick < o.weight {
					o.do(a)
					break
				}
				pick -= o.weight
			}
			a.h.ops.Add(1)
			a.pause(time.Duration(5+a.rng.IntN(25)) * time.Millisecond)
		}
		// Dispose with a context of its own: the end of the load must not cut a
		// disposal short.
		if err := a.h.rt.Agents().Dispose(context.Background(), a.id); err != nil {
			a.h.violate("dispose %s: %v", a.id, err)
		}
		a.h.disposals.Add(1)
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

// background starts a background task that creates procs processes.
func (a *agent) background(procs int, tool string, args map[string]any) {
	if !a.h.procs.take(a.ctx, procs) {
		return
	}
	args["run_in_background"] = true
	r := a.h.call(a.ctx, a.id, true, tool, args)
	if h, ok := r.Data.(tools.Handle); ok {
		a.tasks = append(a.tasks, h.TaskID)
		if tool == tools.BashName {
			a.h.bgBash.Add(1)
		} else {
			a.h.bgSub.Add(1)
		}
	}
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

func (a *agent) kill() {
	if id, ok := a.task(); ok {
		a.h.call(a.ctx, a.id, true, tools.TaskKillName, map[string]any{"task_id": id, "reason": "soak"})
		a.h.kills.Add(1)
	}
}

func (a *agent) list() {
	a.h.call(a.ctx, a.id, true, tools.TaskListName, map[string]any{})
	a.h.lists.Add(1)
}

// ---- the sub-agents ----

// launcher runs each child agent as one of three behaviours, named by the brief's
// model: "quick" answers after a few milliseconds, "bash" runs a background command
// of its own and waits for it, "hang" runs until it is cancelled.
type launcher struct{ h *harness }

func (l *launcher) Launch(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	opts := []actors.AgentOption{actors.WithInjector(l.h.inject)}
	if req.Parent != "" {
		opts = append(opts, actors.WithParent(req.Parent))
	}
	if err := l.h.rt.Agents().Register(ctx, req.Child, opts...); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	r := &childRun{h: l.h, id: req.Child, cancel: cancel, done: make(chan struct{})}
	l.h.children.Go(func() {
		r.result = l.h.play(runCtx, req)
		cancel(nil)
		close(r.done)
	})
	return r, nil
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

// childRun is one child run, the subagent.Run the producer drives.
type childRun struct {
	h      *harness
	id     messages.AgentID
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when result is set
	result subagent.Result
}

func (r *childRun) Cancel(reason string) { r.cancel(errors.New(reason)) }

func (r *childRun) Wait() subagent.Result {
	<-r.done
	return r.result
}

// Dispose disposes the child agent; one its parent's disposal already took is not
// an error.
func (r *childRun) Dispose(ctx context.Context) error {
	err := r.h.rt.Agents().Dispose(ctx, r.id)
	if errors.Is(err, messages.ErrOwnerUnknown) || errors.Is(err, messages.ErrClosed) {
		return nil
	}
	return err
}

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
