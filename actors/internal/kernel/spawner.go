package kernel

import "github.com/asynkron/protoactor-go/actor"

// Spawned is an actor a Spawner spawns. MailboxMade is called with its mailbox as
// soon as protoactor made it, inside the spawn and before the actor's Started runs,
// so that the actor can hand it to whoever stops it later (Kernel.Stop).
type Spawned interface {
	actor.Actor
	MailboxMade(box *Mailbox)
}

// Spawner spawns the actors of one spawning actor (the registry for unowned tasks,
// an agent actor for its own) from one Props made once: the actor to start is handed
// to the Props' producer through next, which protoactor calls synchronously inside
// SpawnNamed, on the spawning actor's goroutine. A spawned actor is never restarted
// (its parent's supervisor stops it), so the producer runs once per spawn. Rejected:
// a Props per spawn, which costs its closures and options on every start and keeps a
// Props alive per live actor.
//
// An inline spawner (Kernel.InlineSpawner) runs the new actor's first batch — its
// Started — on the spawning actor's goroutine, right after the spawn, instead of
// handing it to a dispatcher worker: the new mailbox is made held, so the Started
// that SpawnNamed posts is not dispatched, and it is released once SpawnNamed
// returned. The actor's handlers still run one at a time, on its own mailbox and
// context; only the goroutine is the spawner's, which waits for them, so Started
// must not block. This saves a hand-off per spawn. The registry's spawner does not
// do it: the registry is every start's serial point, and its goroutine should not
// also run the tasks' Started.
//
// A Spawner is used by its spawning actor only (one goroutine at a time).
type Spawner struct {
	props *actor.Props
	next  Spawned  // the actor SpawnNamed is to make
	made  Spawned  // the actor SpawnNamed made, until its mailbox is made
	held  *Mailbox // the held mailbox made for next (inline spawners)
}

// Spawner is a spawner whose actors' Started runs on a dispatcher worker.
func (k *Kernel) Spawner() *Spawner { return k.newSpawner(false) }

// InlineSpawner is a spawner whose actors' Started runs on the spawning goroutine,
// before Spawn returns.
func (k *Kernel) InlineSpawner() *Spawner { return k.newSpawner(true) }

func (k *Kernel) newSpawner(inline bool) *Spawner {
	s := &Spawner{}
	// SpawnNamed makes the actor (the producer below), then its mailbox.
	mailboxes := func() actor.Mailbox {
		m := newMailbox()
		if inline {
			m.held.Store(true)
			s.held = m
		}
		if a := s.made; a != nil {
			a.MailboxMade(m)
		}
		s.made = nil
		return m
	}
	s.props = actor.PropsFromProducer(func() actor.Actor {
		a := s.next
		s.next, s.made = nil, a
		return a
	}, actor.WithDispatcher(k.pool), actor.WithMailbox(mailboxes))
	return s
}

// Spawn spawns a as ctx's child named name. An inline spawner's held mailbox is
// released after SpawnNamed returned, running a's Started here; should SpawnNamed
// panic, it is released to the dispatcher instead, so that no actor is left held.
func (s *Spawner) Spawn(ctx actor.Context, name string, a Spawned) (*actor.PID, error) {
	s.next = a
	returned := false
	defer func() {
		s.next, s.made = nil, nil
		if m := s.held; m != nil {
			s.held = nil
			m.release(returned) // when the spawn failed, nothing was posted
		}
	}()
	pid, err := ctx.SpawnNamed(s.props, name)
	returned = true
	return pid, err
}
