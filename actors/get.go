package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/messages"
)

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

// list returns the caller-visible tasks in start order: the unowned ones, the
// caller's own, and (with ancestor access) its descendants'. Each bucket holds its
// ids in start order (appended as tasks are indexed, in sequence), so a merge by
// sequence number gives the view without sorting.
func (r *registry) list(caller messages.AgentID) []messages.Snapshot {
	lists := [][]messages.TaskID{r.unowned.ids}
	if a, ok := r.agents[caller]; ok && caller != "" {
		lists = append(lists, a.ids)
		if r.rt.cfg.ancestors {
			lists = r.descendantIDs(a, lists)
		}
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]messages.Snapshot, 0, n)
	for {
		// Pick the list whose first live record has the lowest sequence number;
		// forgotten tombstones are skipped.
		best := -1
		var be *taskEntry
		for i := range lists {
			for len(lists[i]) > 0 {
				if e, ok := r.tasks[lists[i][0]]; ok {
					if be == nil || e.seq < be.seq {
						best, be = i, e
					}
					break
				}
				lists[i] = lists[i][1:]
			}
		}
		if be == nil {
			return out
		}
		out = append(out, be.snap)
		lists[best] = lists[best][1:]
	}
}

// descendantIDs appends the id lists of a's child agents, recursively.
func (r *registry) descendantIDs(a *agentEntry, lists [][]messages.TaskID) [][]messages.TaskID {
	for id := range a.children {
		if c, ok := r.agents[id]; ok {
			lists = r.descendantIDs(c, append(lists, c.ids))
		}
	}
	return lists
}

// get answers a Get from the index, after the owner fence.
func (r *registry) get(ctx actor.Context, m *messages.GetTask) {
	e := r.reach(m.ID, m.Caller)
	if e == nil {
		ctx.Respond(&messages.SnapshotReply{Err: notFound(m.ID)})
		return
	}
	ctx.Respond(&messages.SnapshotReply{Snapshot: e.snap})
}

// listTasks answers a List from the index: the caller-visible tasks in start order.
func (r *registry) listTasks(ctx actor.Context, m *messages.ListTasks) {
	ctx.Respond(&messages.ListReply{Snapshots: r.list(m.Caller)})
}
