package bench

import (
	"context"
	"sync"

	"github.com/taskrt/taskrt/messages"
)

// The in-memory producers of the figures. They do no work, so a figure measures the
// registry, not the producer; where a figure counts memory, their hooks are built
// before the first measurement (see held) so that their cost is not counted.

// benchKind is the kind of every in-memory bench task: ids are "bench-N".
const benchKind = "bench"

// instantSpec is a task whose work is already done: Run returns a Done that holds
// its Outcome.
func instantSpec(owner messages.AgentID) messages.Spec {
	return messages.Spec{Kind: benchKind, Label: "instant", Owner: owner, Run: func() (messages.Hooks, error) {
		done := make(chan messages.Outcome, 1)
		done <- messages.Outcome{Status: messages.Completed}
		return messages.Hooks{Cancel: func(string) error { return nil }, Done: done}, nil
	}}
}

// held is a stream task that runs until it is cancelled (settling killed) or told to
// finish. Its hooks and spec are built by newHeld, before the task starts.
type held struct {
	done chan messages.Outcome
	once sync.Once
	spec messages.Spec
}

func newHeld(owner messages.AgentID) *held {
	h := &held{done: make(chan messages.Outcome, 1)}
	hooks := messages.Hooks{
		Cancel: func(string) error {
			h.finish(messages.Outcome{Status: messages.Killed, Detail: "cancelled"})
			return nil
		},
		Done:       h.done,
		ReadOutput: func() string { return "" },
	}
	h.spec = messages.Spec{Kind: benchKind, Label: "held", Owner: owner,
		Run: func() (messages.Hooks, error) { return hooks, nil }}
	return h
}

// finish settles the task with o, once.
func (h *held) finish(o messages.Outcome) { h.once.Do(func() { h.done <- o }) }

// chainSpec is link depth of a chain of sub-agent-like tasks under owner, the shape
// of a background sub-agent that delegated again: Run registers a child agent of
// owner and starts, as that child, the next link (or, for the last link, a held
// task); Cancel disposes the child agent and only then settles, so the link's Done
// composes the quiescence of everything below it. Each link's goroutine (started by
// Cancel) ends when its Done is delivered.
func chainSpec(reg Registry, owner messages.AgentID, depth int) messages.Spec {
	return messages.Spec{Kind: "chain", Label: "link", Owner: owner, Run: func() (messages.Hooks, error) {
		ctx := context.Background()
		child := owner + "/c"
		if err := reg.Register(ctx, child, owner); err != nil {
			return messages.Hooks{}, err
		}
		next := newHeld(child).spec
		if depth > 1 {
			next = chainSpec(reg, child, depth-1)
		}
		if _, err := reg.Start(ctx, next); err != nil {
			_ = reg.Dispose(ctx, child)
			return messages.Hooks{}, err
		}
		done := make(chan messages.Outcome, 1)
		var once sync.Once
		return messages.Hooks{
			Cancel: func(reason string) error {
				once.Do(func() {
					go func() {
						_ = reg.Dispose(ctx, child) // already gone (the owner's disposal took it) is fine
						done <- messages.Outcome{Status: messages.Killed, Detail: "aborted: " + reason}
					}()
				})
				return nil
			},
			Done: done,
		}, nil
	}}
}
