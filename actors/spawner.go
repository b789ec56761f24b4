package actors

import "github.com/asynkron/protoactor-go/actor"

// taskSpawner spawns the task actors of one spawning actor (the registry for unowned
// tasks, an agent actor for its own) from one Props made once: the actor to start is
// handed to the Props' producer through next, which protoactor calls synchronously
// inside SpawnNamed, on the spawning actor's goroutine. A task actor is never
// restarted (its parent's supervisor stops it), so the producer runs once per spawn.
// It saves the Props and closures a Props per task cost (four allocations a start).
//
// An agent actor's spawner runs the new task's first batch — its Started, which
// announces the task to the registry and answers its starter — on the agent's
// goroutine, right after the spawn, instead of handing it to a dispatcher worker:
// the task's mailbox is made held, so the Started that SpawnNamed posts is not
// dispatched, and it is released once SpawnNamed returned. The task's handlers still
// run one at a time, on its own mailbox and context; only the goroutine is the
// agent's, which waits for them. Started calls no producer code that may block
// (Output's methods must not block; Done is only polled). This saves a hand-off per
// start, about 5 % of a lifecycle's time (docs/cost.md). The registry's spawner
// (unowned tasks) does not: the registry is every start's serial point, and its
// goroutine should not also run the tasks' Started.
type taskSpawner struct {
	props *actor.Props
	next  *task
	made  *task    // the task whose actor SpawnNamed is making, until its mailbox is made
	held  *mailbox // the held mailbox made for next (inline spawners)
}

func newTaskSpawner(rt *Runtime, inline bool) *taskSpawner {
	s := &taskSpawner{}
	// SpawnNamed makes the actor (the producer below), then its mailbox, which the
	// registry's record of the task keeps: an eviction stops the actor through it
	// (stopQueue, retention.go).
	mailboxes := func() actor.Mailbox {
		m := newMailbox().(*mailbox)
		if inline {
			m.held.Store(true)
			s.held = m
		}
		if t := s.made; t != nil && t.spawning != nil {
			t.spawning.entry.box = m
		}
		s.made = nil
		return m
	}
	s.props = actor.PropsFromProducer(func() actor.Actor {
		t := s.next
		s.next, s.made = nil, t
		return t
	}, actor.WithDispatcher(rt.pool), actor.WithMailbox(mailboxes))
	return s
}

// spawn spawns t's actor as ctx's child named after the task. A held mailbox is
// released after SpawnNamed returned, running the task's Started here; should
// SpawnNamed panic, it is released to the dispatcher instead, so that no task is
// left held.
func (s *taskSpawner) spawn(ctx actor.Context, t *task) (*actor.PID, error) {
	s.next = t
	returned := false
	defer func() {
		s.next, s.made = nil, nil
		if m := s.held; m != nil {
			s.held = nil
			m.release(returned) // when the spawn failed, nothing was posted
		}
	}()
	pid, err := ctx.SpawnNamed(s.props, string(t.snap.ID))
	returned = true
	return pid, err
}
