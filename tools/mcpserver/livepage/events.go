package livepage

import (
	"context"
	"net/http"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// events serves EventsPath:
//
//  1. subscribe, then take the snapshot, so that nothing happens between the two
//     unseen (the page applies events on top of the snapshot idempotently);
//  2. send the snapshot;
//  3. send the events in batches, as many as are waiting (up to batchMax), and a
//     fresh snapshot after a batch that held an overflow; a comment when idle;
//  4. end with the request, the Source, or the runtime.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	ctx, done := h.streamContext(r)
	defer done()
	sub, err := h.rt.Subscribe(ctx, actors.WithEventBuffer(h.buffer))
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	snap, err := h.snapshot(ctx)
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	out := newSSE(w)
	out.event("snapshot", "", snap)
	if out.flush() != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			out.comment("ping")
		case ev, ok := <-sub.Events():
			if !ok {
				return // the runtime closed
			}
			if overflowed := addBatch(out, ev, sub.Events()); overflowed && !h.addSnapshot(ctx, out) {
				return
			}
		}
		if out.flush() != nil {
			return
		}
	}
}

// addBatch adds first and the events already waiting in more, up to batchMax in
// all, to out. It reports whether one of them was an overflow.
func addBatch(out *sse, first messages.Event, more <-chan messages.Event) (overflowed bool) {
	ev := first
	for n := 1; ; n++ {
		out.event("event", "", toWireEvent(ev))
		overflowed = overflowed || ev.Kind == messages.EventOverflow
		if n == batchMax {
			return overflowed
		}
		select {
		case next, ok := <-more:
			if !ok {
				return overflowed
			}
			ev = next
		default:
			return overflowed
		}
	}
}

// addSnapshot adds a fresh snapshot to out, to resynchronise after an overflow;
// false when it cannot be taken (the request or the runtime ended).
func (h *Handler) addSnapshot(ctx context.Context, out *sse) bool {
	snap, err := h.snapshot(ctx)
	if err != nil {
		return false
	}
	out.event("snapshot", "", snap)
	return true
}

// snapshot lists the owners and their tasks. Called after subscribing, it is never
// older than the first event the subscription delivers.
func (h *Handler) snapshot(ctx context.Context) (wireSnapshot, error) {
	snap := wireSnapshot{Now: time.Now(), Agents: []wireAgent{}, Tasks: []*wireTask{}}
	for _, o := range h.src.Owners() {
		a, tasks, err := h.ownerTasks(ctx, o)
		if err != nil {
			return wireSnapshot{}, err
		}
		snap.Agents = append(snap.Agents, a)
		snap.Tasks = append(snap.Tasks, tasks...)
	}
	unowned, err := h.rt.Tasks().List(ctx, "")
	if err != nil {
		return wireSnapshot{}, err
	}
	for _, t := range unowned {
		if !t.Evicted {
			snap.Tasks = append(snap.Tasks, h.withBytes(ctx, toWireTask(t)))
		}
	}
	return snap, nil
}

// ownerTasks is o as a snapshot lists it, with its tasks not evicted (each with
// its output size and live watches); the evicted ones it counts.
func (h *Handler) ownerTasks(ctx context.Context, o Owner) (wireAgent, []*wireTask, error) {
	tasks := h.rt.Tasks()
	list, err := tasks.List(ctx, o.ID)
	if err != nil {
		return wireAgent{}, nil, err
	}
	watches, err := tasks.Watches(ctx, o.ID)
	if err != nil {
		return wireAgent{}, nil, err
	}
	a := wireAgent{ID: o.ID, Since: o.Began}
	var shown []*wireTask
	for _, t := range list {
		switch {
		case t.Owner != o.ID: // unowned: listed once, after every owner
		case t.Evicted:
			a.Evicted++
		default:
			wt := h.withBytes(ctx, toWireTask(t))
			wt.Watches = watches[t.ID]
			shown = append(shown, wt)
		}
	}
	return a, shown, nil
}

// withBytes sets a snapshot task's output size from its state (an observer read of
// no bytes), so that a page opened after the tasks ran shows it: output events seen
// while the page is open only add to it.
func (h *Handler) withBytes(ctx context.Context, t *wireTask) *wireTask {
	if r, err := h.rt.Tasks().Peek(ctx, t.ID, t.Owner, 0, 1); err == nil {
		n := r.Written
		t.Bytes = &n
	}
	return t
}
