package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// Tasks starts and controls background tasks. Every method that names a task takes
// the caller's agent id and applies the owner fence: a task owned by another agent,
// or owned at all when the caller is "", is reported exactly as an unknown id is.
type Tasks struct{ rt *Runtime }

// Agents registers and disposes the agents that own tasks.
type Agents struct{ rt *Runtime }

// Start starts a background task and returns its id.
//
// It runs in three steps: a preflight in the registry (a control surface is attached,
// the runtime is open, the kind and label are valid, the owner is registered and not
// disposing and under its cap), then s.Run on the caller's goroutine, then an atomic
// commit that allocates the id. Any failure before the commit leaves no trace: no id is
// burned, nothing is recorded, and when the preflight fails or ctx is already done, Run
// is never called. ctx governs only the start: cancelling it after Start returned never
// touches the task.
//
// With WithQueue, a start that finds its owner at its cap (or the runtime at its
// WithGlobalLimit) and room in the owner's queue is recorded queued instead: Start
// returns its id at once and s.Run is called later, by the runtime on a goroutine of
// its own, when the task gets a slot (see queue.go); a Run error then settles the task
// failed.
//
// A Spec with a Key is idempotent: when the key names a task of the same owner that
// is live or still retained, Start calls no Run and returns that task's id with an
// error wrapping messages.ErrDuplicate (see messages.Spec.Key). The key is checked
// after the owner and before the cap, so that a retry at the cap still finds its task.
//
// While Run runs, a disposal of the owner (or Close) waits for it, at most the settle
// timeout (WithSettleTimeout). A Run that takes longer is abandoned: the disposal goes
// on, and when Run returns, Start cancels the work it started (reason "start
// abandoned"), waits up to the settle timeout for its Done, and returns an error.
func (t *Tasks) Start(ctx context.Context, s messages.Spec) (messages.TaskID, error) {
	rt := t.rt
	if rt.closed.Load() {
		return "", rt.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	if s.Run == nil {
		return "", fmt.Errorf("%w: Run is nil", messages.ErrInvalidSpec)
	}
	if len(s.Key) > messages.MaxKey {
		return "", fmt.Errorf("%w: key of %d bytes is over the bound of %d", messages.ErrInvalidSpec, len(s.Key), messages.MaxKey)
	}
	m, err := rt.callUntilReply(&reserveStart{reservation: reservation{kind: s.Kind, label: s.Label, owner: s.Owner, key: s.Key}})
	if err != nil {
		return "", rt.noActorErr(err)
	}
	res := m.(*reserveReply)
	if res.err != nil {
		return "", res.err
	}
	if res.dup != "" {
		return res.dup, fmt.Errorf("%w: key %q is task %s", messages.ErrDuplicate, s.Key, res.dup)
	}
	abort := func() { tellRegistry(rt.system.Root, rt, &abortStart{token: res.token}) }
	if res.queued {
		// At the cap with room in the queue: the task is recorded queued now, and
		// the runtime calls Run once it gets a slot (queue.go).
		m, err = rt.commit(newCommit(rt, res.token, messages.Hooks{}, s.Run))
		if err == nil && m.(*startReply).err == nil {
			return m.(*startReply).id, nil
		}
		if err == nil {
			err = m.(*startReply).err
		}
		return "", rt.noActorErr(err)
	}
	if err := ctx.Err(); err != nil {
		abort()
		return "", fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	hooks, err := messages.ContainValue("run", s.Run)
	if err != nil {
		abort()
		return "", fmt.Errorf("start %s task: %w", s.Kind, err)
	}
	if hooks.Done == nil || hooks.Cancel == nil {
		if hooks.Cancel != nil {
			_ = messages.Contain("cancel", func() error { return hooks.Cancel("invalid hooks") })
		}
		abort()
		return "", fmt.Errorf("%w: Run returned hooks without Done or Cancel", messages.ErrInvalidSpec)
	}
	m, err = rt.commit(newCommit(rt, res.token, hooks, nil))
	if err == nil && m.(*startReply).err == nil {
		return m.(*startReply).id, nil
	}
	if err == nil {
		err = m.(*startReply).err
	}
	// The work started but has no id: stop it, await it, release it.
	rt.unwind(hooks, "start abandoned")
	return "", rt.noActorErr(err)
}

// unwind cancels work that was started but never committed, waits for its Done up to
// the settle timeout, and releases it. It runs on the caller's goroutine.
func (rt *Runtime) unwind(h messages.Hooks, reason string) {
	if err := messages.Contain("cancel", func() error { return h.Cancel(reason) }); err != nil {
		rt.log.Error("taskrt: cancelling an abandoned start failed", "err", err)
	}
	timer := time.NewTimer(rt.cfg.settleTimeout)
	defer timer.Stop()
	select {
	case <-h.Done:
	case <-timer.C:
		rt.log.Error("taskrt: an abandoned start did not settle after cancel", "after", rt.cfg.settleTimeout)
	}
	if h.Release != nil {
		_ = messages.Contain("release", func() error { h.Release(); return nil })
	}
}

// noActorErr maps a request that reached no actor to ErrClosed.
func (rt *Runtime) noActorErr(err error) error {
	if errors.Is(err, errDeadLetter) {
		return rt.closedErr()
	}
	return err
}

// taskErr maps a task request that reached no actor to not-found: the task's record
// went away between the route and the answer.
func taskErr(id messages.TaskID, err error) error {
	if errors.Is(err, errDeadLetter) {
		return notFound(id)
	}
	return err
}

// Get returns a task's snapshot without consuming anything.
func (t *Tasks) Get(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.Snapshot, error) {
	m, err := t.rt.ask(ctx, &messages.GetTask{ID: id, Caller: caller})
	if err != nil {
		return messages.Snapshot{}, t.rt.noActorErr(err)
	}
	r := m.(*messages.SnapshotReply)
	return r.Snapshot, r.Err
}

// List returns the caller-visible tasks (owned by caller, or unowned) in start order.
func (t *Tasks) List(ctx context.Context, caller messages.AgentID) ([]messages.Snapshot, error) {
	m, err := t.rt.ask(ctx, &messages.ListTasks{Caller: caller})
	if err != nil {
		return nil, t.rt.noActorErr(err)
	}
	r := m.(*messages.ListReply)
	return r.Snapshots, r.Err
}

// WaitAny waits until one of the tasks ids names has settled, or timeout passes. It
// returns the snapshots in the order of the ids (duplicates removed): at least one
// terminal, unless the timeout passed first (then every one is running, and the
// error is nil). Up to messages.MaxWaitSet ids; every id is checked against the owner
// fence before anything waits, and an unknown or foreign one fails the call, naming
// it. Every terminal snapshot returned marks its task reported, as Wait does;
// cancelling ctx ends only the wait (its error is returned with the current
// snapshots). It is built from the tasks' own waits, so it costs no polling.
func (t *Tasks) WaitAny(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, timeout time.Duration) ([]messages.Snapshot, error) {
	return t.waitSet(ctx, ids, caller, messages.WaitAny, timeout)
}

// WaitAll is WaitAny that waits until every task has settled.
func (t *Tasks) WaitAll(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, timeout time.Duration) ([]messages.Snapshot, error) {
	return t.waitSet(ctx, ids, caller, messages.WaitAll, timeout)
}

// OnDone adds a listener of every task settlement, in settlement order. Each
// listener has its own actor, whose mailbox is its queue, so a slow or panicking
// listener (the panic is logged) harms neither the registry nor other listeners. The
// returned function removes it: no call starts after it returns, and it waits for a
// call in progress unless it is called from inside that call. Listeners are silent
// from the moment Close begins.
func (t *Tasks) OnDone(fn func(messages.Snapshot)) (remove func()) {
	return t.rt.addListener(fn)
}

// AttachSurface attaches a named control surface: while none is attached, Start fails
// with ErrNoSurface, so that no task can be started that nothing could read or stop.
// The returned detach is idempotent.
func (t *Tasks) AttachSurface(name string) (detach func()) {
	rt := t.rt
	m, err := rt.callUntilReply(&attachSurface{name: name})
	if err != nil {
		return func() {}
	}
	h := m.(*attachReply).handle
	var once sync.Once
	return func() {
		once.Do(func() {
			if !rt.closed.Load() {
				tellRegistry(rt.system.Root, rt, &detachSurface{handle: h})
			}
		})
	}
}

// Notify delivers a settled task's completion notice into its owner's session, at
// most once per task: it claims the notice in the registry (the task is live,
// terminal, owned, unreported and not yet notified; its owner registered and not
// disposing) and then calls the owner's injector on the caller's goroutine. It
// reports whether the notice was delivered; a task that needs no notice is not an
// error. The injector is always the one of the registration that owned the task, even
// if the owner id was disposed and registered again meanwhile. Surfaces (package tools)
// call it from their OnDone listener.
func (t *Tasks) Notify(ctx context.Context, id messages.TaskID, text string) (bool, error) {
	m, err := t.rt.call(ctx, &notifyTask{id: id})
	if err != nil {
		if errors.Is(err, messages.ErrClosed) || errors.Is(err, errDeadLetter) {
			return false, nil
		}
		return false, err
	}
	r := m.(*agentReply)
	if !r.live || r.injector == nil {
		return false, nil
	}
	if err := inject(messages.WithNoticeTask(ctx, id), r.injector, text); err != nil {
		return false, err
	}
	t.rt.metrics.notice("delivered")
	return true, nil
}

// AgentOption configures an agent at Register.
type AgentOption interface{ applyAgent(*registerAgent) }

type agentOptionFunc func(*registerAgent)

func (f agentOptionFunc) applyAgent(r *registerAgent) { f(r) }

// WithInjector sets how completion notices reach the agent's session.
func WithInjector(inj messages.Injector) AgentOption {
	return agentOptionFunc(func(r *registerAgent) { r.injector = inj })
}

// WithParent records the agent's parent agent: disposing the parent disposes this
// agent too (after or alongside the parent's own teardown). The parent must be
// registered and not disposing.
func WithParent(id messages.AgentID) AgentOption {
	return agentOptionFunc(func(r *registerAgent) { r.parent = id })
}

// Register registers an owning agent. Its id must be non-empty and not registered;
// an id may be registered again once its Dispose returned.
func (a *Agents) Register(ctx context.Context, id messages.AgentID, opts ...AgentOption) error {
	req := &registerAgent{id: id}
	for _, o := range opts {
		o.applyAgent(req)
	}
	if strings.TrimSpace(string(id)) == "" {
		return fmt.Errorf("%w: agent id is empty", messages.ErrInvalidArgument)
	}
	m, err := a.rt.call(ctx, req)
	if err != nil {
		return a.rt.noActorErr(err)
	}
	return m.(*errReply).err
}

// OnCleanup registers a cleanup that runs when the agent is disposed, before its tasks
// are torn down. Cleanups run one at a time in registration order; a failing or
// panicking cleanup is logged and the rest still run. The returned function
// unregisters the cleanup if it has not run yet. For an unknown or disposing agent,
// OnCleanup returns ErrOwnerUnknown — except when called with the context of one of
// that agent's running cleanups: such a mid-drain registration is accepted and runs in
// the same drain.
func (a *Agents) OnCleanup(ctx context.Context, id messages.AgentID, cleanup func(context.Context) error) (unregister func(), err error) {
	if cleanup == nil {
		return nil, fmt.Errorf("%w: cleanup is nil", messages.ErrInvalidArgument)
	}
	req := &addCleanup{agent: id, fn: cleanup}
	if mark, ok := ctx.Value(drainKey{}).(drainMark); ok && mark.agent == id {
		req.drain = mark.token
	}
	m, err := a.rt.call(ctx, req)
	if err != nil {
		return nil, a.rt.noActorErr(err)
	}
	r := m.(*addCleanupReply)
	if r.err != nil {
		return nil, r.err
	}
	rt := a.rt
	var once sync.Once
	return func() {
		once.Do(func() {
			if !rt.closed.Load() {
				tellRegistry(rt.system.Root, rt, &removeCleanup{agent: id, handle: r.handle})
			}
		})
	}, nil
}

// Dispose disposes an agent: refuse new starts for it, run its cleanups, cancel
// (reason "owner disposed") and await every task it owns, dispose its child agents,
// drop its records and unregister it. It returns when all of that is done; concurrent
// calls for the same agent all wait for the same disposal. If ctx ends first, Dispose
// returns ctx.Err() and the disposal goes on. Do not call Dispose for an agent from
// inside one of its own cleanups: the disposal would wait for itself.
func (a *Agents) Dispose(ctx context.Context, id messages.AgentID) error {
	m, err := a.rt.call(ctx, &disposeAgent{id: id})
	if err != nil {
		return a.rt.noActorErr(err)
	}
	return m.(*errReply).err
}

// Inject delivers text into a live agent's session through its injector. For an
// unknown, disposing or disposed agent, or one registered without an injector, it
// does nothing and returns nil: a notice never goes to a dying owner, and that is not
// an error. The injector runs on the caller's goroutine.
func (a *Agents) Inject(ctx context.Context, id messages.AgentID, text string) error {
	m, err := a.rt.call(ctx, &lookupAgent{id: id})
	if err != nil {
		if errors.Is(err, messages.ErrClosed) || errors.Is(err, errDeadLetter) {
			return nil
		}
		return err
	}
	r := m.(*agentReply)
	if !r.live || r.injector == nil {
		return nil
	}
	return inject(ctx, r.injector, text)
}

// inject calls an injector, turning a panic into an error.
func inject(ctx context.Context, inj messages.Injector, text string) error {
	return messages.Contain("injector", func() error { return inj(ctx, text) })
}
