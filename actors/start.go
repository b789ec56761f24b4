package actors

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file is the start protocol, as the registry runs it: reserve (every preflight
// check, a slot held for the owner), commit (the id, the task actor) or abort, and
// the bound on starts a teardown waits for.

type reservation struct {
	kind, label string
	owner       messages.AgentID
	key         string // Spec.Key, "" for none
	b           *bucket
	queued      bool       // a queue place, not a slot (queue.go)
	dups        []keyedDup // starts with the same key parked until this one resolves
}

// reserve runs a start's preflight. It returns nil when the start was parked behind
// a start in flight with the same key (keys.go answers it later).
func (r *registry) reserve(m *reserveStart, sender *actor.PID) *reserveReply {
	fail := func(err error) *reserveReply { return &reserveReply{err: err} }
	if r.phase != runtimeOpen {
		return fail(r.rt.closedErr())
	}
	if len(r.surfaces) == 0 {
		return fail(messages.ErrNoSurface)
	}
	// A kind that committed before is valid (counters has only such kinds): the
	// pattern runs once per kind, not once per start.
	if _, known := r.counters[m.kind]; !known && !messages.KindPattern().MatchString(m.kind) {
		return fail(fmt.Errorf("%w: kind %q must match %s", messages.ErrInvalidSpec, m.kind, messages.KindPattern()))
	}
	if strings.TrimSpace(m.label) == "" {
		return fail(fmt.Errorf("%w: label is empty", messages.ErrInvalidSpec))
	}
	b := &r.unowned
	if m.owner != "" {
		a, ok := r.agents[m.owner]
		if !ok || a.phase != agentOpen {
			return fail(fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, m.owner))
		}
		b = &a.bucket
	}
	if m.key != "" {
		if rep, parked := r.keyedStart(b, m, sender); rep != nil || parked {
			return rep
		}
	}
	queued, err := r.admit(m.owner, b, m.noQueue)
	if err != nil {
		return fail(err)
	}
	b.pending++
	r.nextToken++
	res := &m.reservation
	res.b, res.queued = b, queued
	r.starts[r.nextToken] = res
	r.keyReserved(b, m.key, r.nextToken)
	return &reserveReply{token: r.nextToken, queued: queued}
}

func (r *registry) commit(ctx actor.Context, m *commitStart) {
	res, ok := r.starts[m.token]
	if !ok {
		// The reservation was abandoned by a teardown that could not wait for this
		// start any longer (or the token is not ours).
		err := fmt.Errorf("%w: the start took longer than the settle timeout while its owner was torn down", messages.ErrOwnerUnknown)
		if r.phase != runtimeOpen {
			err = r.rt.closedErr()
		}
		ctx.Respond(&startReply{err: err})
		return
	}
	var id messages.TaskID
	if m.id != "" {
		n, ok := idNumber(m.id, res.kind)
		_, used := r.tasks[m.id]
		if _, committing := r.committing[m.id]; !ok || used || committing {
			r.abortStart(ctx, &abortStart{token: m.token})
			ctx.Respond(&startReply{err: fmt.Errorf("%w: id %s is not a free id of kind %s", messages.ErrInvalidSpec, m.id, res.kind)})
			return
		}
		// The counter never goes back under a number given out here, so a later
		// start of this runtime's own cannot reuse it.
		r.counters[res.kind] = max(r.counters[res.kind], n)
		id = m.id
	} else {
		r.counters[res.kind]++
		var buf [48]byte // the id in one allocation: <kind>-<n>
		id = messages.TaskID(strconv.AppendInt(append(append(buf[:0], res.kind...), '-'), int64(r.counters[res.kind]), 10))
	}
	delete(r.starts, m.token)
	snap := messages.Snapshot{
		ID:       id,
		Kind:     res.kind,
		Label:    res.label,
		Owner:    res.owner,
		Status:   messages.Running,
		Started:  time.Now(),
		Ref:      m.task.hooks.Ref,
		Reported: m.reported,
	}
	if !m.started.IsZero() {
		snap.Started = m.started
	}
	if res.queued {
		snap.Status = messages.Queued
	}
	r.keyCommitted(res, snap.ID)
	r.rt.nRecords.Add(1)
	r.rt.nRunning.Add(1)
	// The task actor announces itself (taskSpawned) before it answers the starter, so
	// the index holds the task before anyone can name it. The reservation stays
	// pending until taskSpawned, so a disposal of the owner waits for it and the
	// agent actor is never asked to spawn once it began its teardown.
	t := m.task // made by the client; the registry keeps no reference to it
	t.snap, t.starter = snap, ctx.Sender()
	t.spawning = &taskSpawned{entry: &taskEntry{snap: snap}} // indexed when the task announces itself (spawned)
	if res.owner == "" {
		if r.spawner == nil {
			r.spawner = r.rt.kernel.Spawner()
		}
		if _, err := r.spawner.Spawn(ctx, string(snap.ID), t); err != nil {
			r.rt.log.Error("taskrt: spawning task actor failed", "task", snap.ID, "err", err)
		}
		return
	}
	// The task's state is handed over: the agent actor only spawns it. The caller
	// hands it over (Runtime.commit), and runs the agent when it is idle. The agent
	// cannot have begun its teardown meanwhile: a disposal waits for the start until
	// the task announced itself (pending, startResolved).
	ctx.Respond(&spawnVia{agent: r.agents[res.owner].box, task: t})
}

// MailboxMade keeps the task actor's mailbox in the registry's record of the task,
// which hands it to kernel.Stop when retention evicts the task. Called by the
// spawner inside the spawn, before the actor's Started sends the record home.
func (t *task) MailboxMade(box *kernel.Mailbox) {
	if t.spawning != nil {
		t.spawning.entry.box = box
	}
}

func (r *registry) spawned(ctx actor.Context, m *taskSpawned) {
	defer func() {
		if m.settled != nil { // it settled within its Started: the settlement rode along
			r.settled(ctx, m.settled)
		}
	}()
	r.seq++
	e := m.entry
	e.pid, e.seq = m.pid, r.seq
	snap := &e.snap
	r.tasks[snap.ID] = e
	b := r.bucketOf(snap.Owner) // the owner cannot be gone: its disposal waits for this start
	b.ids = append(b.ids, snap.ID)
	r.keyIndexed(ctx, e)
	if snap.Status == messages.Queued {
		r.rt.metrics.taskQueued(snap.Kind) // before the event, as in taskChanged
		r.publish(messages.Event{Kind: messages.EventTaskQueued, Agent: snap.Owner, Task: *snap})
		defer r.queuedIndexed(ctx, snap.Owner, b, snap.ID)
	} else {
		r.publish(messages.Event{Kind: messages.EventTaskStarted, Agent: snap.Owner, Task: *snap})
		r.rt.metrics.taskStarted(snap.Kind)
	}
	if snap.Owner == "" && r.phase == runtimeClosing {
		// Committed after the close began: tear it down like the others.
		r.awaiting[m.pid.Id] = struct{}{}
		requestTask(ctx, m.pid, &teardown{reason: "runtime closed"})
	}
	r.startResolved(ctx, snap.Owner, b)
}

// startResolved accounts for a start that committed (and was indexed) or aborted:
// a disposal or a close waiting for it may go on.
func (r *registry) startResolved(ctx actor.Context, owner messages.AgentID, b *bucket) {
	b.pending--
	if a, ok := r.agents[owner]; ok && owner != "" {
		r.advanceAgent(ctx, a, a.phase)
	}
	r.advanceClose(ctx)
}

// abandonStarts gives up on the starts in flight of a disposing owner, or on every
// start in flight of a closing runtime (owner ""): their Run has held a teardown for
// the settle timeout. Each such start fails at commit, and its caller cancels the
// work Run started and awaits it (see Tasks.Start).
func (r *registry) abandonStarts(ctx actor.Context, owner messages.AgentID) {
	if owner == "" && r.phase == runtimeOpen {
		return
	}
	for token, res := range r.starts {
		if owner != "" && res.owner != owner {
			continue
		}
		if a, ok := r.agents[res.owner]; ok && a.phase == agentOpen {
			continue // not being torn down
		}
		r.rt.log.Error("taskrt: a start's Run did not return within the settle timeout during teardown; abandoned",
			"kind", res.kind, "owner", res.owner, "after", r.rt.cfg.settleTimeout)
		delete(r.starts, token)
		r.startResolved(ctx, res.owner, res.b)
		r.keyAborted(ctx, res)
		r.unreserve(ctx, res)
	}
}

// armStartsOverdue bounds how long a teardown waits for starts in flight: once per
// disposal (owner) or close (""), the settle timeout later, abandonStarts runs. The
// timer is stopped when the registry stops.
func (r *registry) armStartsOverdue(owner messages.AgentID) {
	if _, armed := r.overdue[owner]; armed {
		return
	}
	rt := r.rt
	r.overdue[owner] = time.AfterFunc(rt.cfg.settleTimeout, func() { tellRegistry(rt.system.Root, rt, &startsOverdue{owner: owner}) })
}

func (r *registry) disarmStartsOverdue(owner messages.AgentID) {
	if t, ok := r.overdue[owner]; ok {
		t.Stop()
		delete(r.overdue, owner)
	}
}

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
	id, err := rt.nextID(ctx, s.Kind)
	if err != nil {
		abort()
		return "", err
	}
	if res.queued {
		// At the cap with room in the queue: the task is recorded queued now, and
		// the runtime calls Run once it gets a slot (queue.go).
		m, err = rt.commit(newCommit(rt, res.token, messages.Hooks{}, s.Run).as(id))
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
	hooks, err := contain.Value("run", s.Run)
	if err != nil {
		abort()
		return "", fmt.Errorf("start %s task: %w", s.Kind, err)
	}
	if hooks.Done == nil || hooks.Cancel == nil {
		if hooks.Cancel != nil {
			_ = contain.Call("cancel", func() error { return hooks.Cancel("invalid hooks") })
		}
		abort()
		return "", fmt.Errorf("%w: Run returned hooks without Done or Cancel", messages.ErrInvalidSpec)
	}
	m, err = rt.commit(newCommit(rt, res.token, hooks, nil).as(id))
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

// nextID is the id WithIDs gives a start of kind, or "" for the registry's
// counter. An error is the start's, wrapped so that it says what failed.
func (rt *Runtime) nextID(ctx context.Context, kind string) (messages.TaskID, error) {
	if rt.cfg.ids == nil {
		return "", nil
	}
	n, err := contain.Value("ids", func() (int, error) { return rt.cfg.ids(ctx, kind) })
	if err != nil {
		return "", fmt.Errorf("start %s task: numbering it: %w", kind, err)
	}
	if n < 1 {
		return "", fmt.Errorf("start %s task: numbering it: WithIDs gave %d, not a number ≥ 1", kind, n)
	}
	return messages.TaskID(kind + "-" + strconv.Itoa(n)), nil
}

// unwind cancels work that was started but never committed, waits for its Done up to
// the settle timeout, and releases it. It runs on the caller's goroutine.
func (rt *Runtime) unwind(h messages.Hooks, reason string) {
	if err := contain.Call("cancel", func() error { return h.Cancel(reason) }); err != nil {
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
		_ = contain.Call("release", func() error { h.Release(); return nil })
	}
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

// idNumber is the number of id, an id of kind: "<kind>-<n>" with n ≥ 1.
func idNumber(id messages.TaskID, kind string) (int, bool) {
	rest, ok := strings.CutPrefix(string(id), kind+"-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// abortStart releases a reservation whose Run failed or was never called.
func (r *registry) abortStart(ctx actor.Context, m *abortStart) {
	res, ok := r.starts[m.token]
	if !ok {
		return
	}
	delete(r.starts, m.token)
	r.startResolved(ctx, res.owner, res.b)
	r.keyAborted(ctx, res)
	r.unreserve(ctx, res)
}

// attachSurface adds a control surface: a start needs one attached.
func (r *registry) attachSurface(ctx actor.Context, m *attachSurface) {
	r.nextSurface++
	r.surfaces[r.nextSurface] = m.name
	ctx.Respond(&attachReply{handle: r.nextSurface})
}
