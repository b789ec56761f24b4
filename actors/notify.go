package actors

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

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
	return contain.Call("injector", func() error { return inj(ctx, text) })
}

// notifyTask claims a settled task's one completion notice (unless a watch's
// delivery still holds it: holdClaim answers later).
func (r *registry) notifyTask(ctx actor.Context, m *notifyTask) {
	if !r.holdClaim(ctx, m.id) {
		ctx.Respond(r.claimNotice(m.id))
	}
}

// lookupAgent answers with a live agent's injector.
func (r *registry) lookupAgent(ctx actor.Context, m *lookupAgent) {
	a, ok := r.agents[m.id]
	if !ok || a.phase != agentOpen {
		ctx.Respond(&agentReply{})
		return
	}
	ctx.Respond(&agentReply{live: true, injector: a.injector})
}
