package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Impl names an implementation in benchmark names (impl=…) and in the figures.
type Impl string

// The implementations the figures compare.
const (
	ImplActors Impl = "actors" // the taskrt runtime
	// ImplActorsEvents is the taskrt runtime with one event subscriber (Runtime.Subscribe)
	// draining its events: what the event stream costs.
	ImplActorsEvents Impl = "actors+events"
	ImplMutex        Impl = "mutex" // MutexRegistry, the hand-written baseline
	ImplFloor        Impl = "floor" // bare protoactor
	ImplExec         Impl = "exec"  // plain os/exec (process figures)
)

// Registry is the task-registry contract the figures drive: the subset of the taskrt
// API that both the runtime and the hand-written baseline implement. It is sealed:
// NewRegistry returns one of the two.
type Registry interface {
	// Register registers an owning agent; a non-empty parent makes it a child agent
	// whose parent's disposal disposes it too.
	Register(ctx context.Context, id, parent messages.AgentID) error
	// Start, Get, Read, Kill and Wait are those of actors.Tasks, with its owner fence.
	Start(ctx context.Context, s messages.Spec) (messages.TaskID, error)
	Get(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.Snapshot, error)
	Read(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.ReadResult, error)
	Kill(ctx context.Context, id messages.TaskID, caller messages.AgentID, reason string) (messages.KillResult, error)
	Wait(ctx context.Context, id messages.TaskID, caller messages.AgentID, timeout time.Duration) (messages.Snapshot, error)
	// Dispose cancels and awaits every task of the agent (and of its child agents)
	// and unregisters it.
	Dispose(ctx context.Context, id messages.AgentID) error
	// Close cancels and awaits every task and releases everything the registry holds.
	Close(ctx context.Context) error

	// waitRegistered registers a wait on a task and returns once the registration is
	// in place, so that a settlement after it returns is observed as a wake-up; the
	// returned function blocks for the wait's answer.
	waitRegistered(ctx context.Context, id messages.TaskID, caller messages.AgentID) (func() (messages.Snapshot, error), error)
}

// NewRegistry returns the registry of impl: the taskrt runtime (ImplActors, with no
// owner cap, so that the figures can hold many tasks per owner) or a MutexRegistry
// (ImplMutex).
func NewRegistry(impl Impl) (Registry, error) {
	switch impl {
	case ImplActors, ImplActorsEvents:
		rt, err := actors.NewRuntime(actors.WithoutOwnerLimit())
		if err != nil {
			return nil, err
		}
		rt.Tasks().AttachSurface("bench")
		a := &actorsRegistry{rt: rt}
		if impl == ImplActorsEvents {
			sub, err := rt.Subscribe(context.Background())
			if err != nil {
				return nil, err
			}
			a.drained = make(chan struct{})
			go func() {
				defer close(a.drained)
				for range sub.Events() {
				}
			}()
		}
		return a, nil
	case ImplMutex:
		return NewMutexRegistry(), nil
	default:
		return nil, fmt.Errorf("bench: %q is not a registry implementation", impl)
	}
}

// actorsRegistry adapts *actors.Runtime to Registry. It adds nothing but an
// interface call.
type actorsRegistry struct {
	rt      *actors.Runtime
	drained chan struct{} // ImplActorsEvents: closed when the subscriber's goroutine ended
}

func (a *actorsRegistry) Register(ctx context.Context, id, parent messages.AgentID) error {
	if parent != "" {
		return a.rt.Agents().Register(ctx, id, actors.WithParent(parent))
	}
	return a.rt.Agents().Register(ctx, id)
}

func (a *actorsRegistry) Start(ctx context.Context, s messages.Spec) (messages.TaskID, error) {
	return a.rt.Tasks().Start(ctx, s)
}

func (a *actorsRegistry) Get(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.Snapshot, error) {
	return a.rt.Tasks().Get(ctx, id, caller)
}

func (a *actorsRegistry) Read(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.ReadResult, error) {
	return a.rt.Tasks().Read(ctx, id, caller)
}

func (a *actorsRegistry) Kill(ctx context.Context, id messages.TaskID, caller messages.AgentID, reason string) (messages.KillResult, error) {
	res, _, err := a.rt.Tasks().Kill(ctx, id, caller, reason)
	return res, err
}

func (a *actorsRegistry) Wait(ctx context.Context, id messages.TaskID, caller messages.AgentID, timeout time.Duration) (messages.Snapshot, error) {
	return a.rt.Tasks().Wait(ctx, id, caller, timeout)
}

func (a *actorsRegistry) Dispose(ctx context.Context, id messages.AgentID) error {
	return a.rt.Agents().Dispose(ctx, id)
}

func (a *actorsRegistry) Close(ctx context.Context) error {
	if err := a.rt.Close(ctx); err != nil {
		return err
	}
	if a.drained != nil {
		<-a.drained // Close closed the subscription's channel
	}
	if s := a.rt.Stats(); s != (actors.Stats{Abandoned: s.Abandoned}) {
		return fmt.Errorf("bench: runtime not empty after Close: %+v", s)
	}
	return nil
}

// waitRegistered sends the runtime's own WaitTask request (the one Tasks.Wait sends)
// to the registry, then makes a Read round trip to the same task: both requests go
// from the root context through the registry's mailbox to the task actor's, in order,
// so when the Read is answered the wait is registered in the task actor.
func (a *actorsRegistry) waitRegistered(ctx context.Context, id messages.TaskID, caller messages.AgentID) (func() (messages.Snapshot, error), error) {
	f := a.rt.ActorSystem().Root.RequestFuture(a.rt.Registry(), &messages.WaitTask{ID: id, Caller: caller, Timeout: time.Minute}, 2*time.Minute)
	if _, err := a.rt.Tasks().Read(ctx, id, caller); err != nil {
		return nil, err
	}
	return func() (messages.Snapshot, error) {
		m, err := f.Result()
		if err != nil {
			return messages.Snapshot{}, err
		}
		r, ok := m.(*messages.WaitReply)
		if !ok {
			return messages.Snapshot{}, fmt.Errorf("bench: unexpected wait reply %T", m)
		}
		return r.Snapshot, r.Err
	}, nil
}

// closeWithin closes reg with a generous deadline and joins the error into err.
func closeWithin(reg Registry, err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	*err = errors.Join(*err, reg.Close(ctx))
}
