package actors

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	delete(r.starts, m.token)
	r.counters[res.kind]++
	var buf [48]byte // the id in one allocation: <kind>-<n>
	id := strconv.AppendInt(append(append(buf[:0], res.kind...), '-'), int64(r.counters[res.kind]), 10)
	snap := messages.Snapshot{
		ID:      messages.TaskID(id),
		Kind:    res.kind,
		Label:   res.label,
		Owner:   res.owner,
		Status:  messages.Running,
		Started: time.Now(),
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
			r.spawner = newTaskSpawner(r.rt, false)
		}
		if _, err := r.spawner.spawn(ctx, t); err != nil {
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

func (r *registry) spawned(ctx actor.Context, m *taskSpawned) {
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
