package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// Runtime is one task runtime: a registry actor and the tree below it. Create it with
// NewRuntime, reach its API through Tasks and Agents, and Close it when done; a Runtime
// must not be copied.
type Runtime struct {
	system    *actor.ActorSystem
	ownSystem bool
	registry  *actor.PID
	log       *slog.Logger
	cfg       config

	tasks  Tasks
	agents Agents
	hub    *hub
	pool   *pool // the dispatcher of every actor of this runtime

	// stopped is closed by the registry's Stopped handler: the tree is gone, and
	// every call still waiting for a reply returns ErrClosed.
	stopped chan struct{}
	// closed is set when Close completed; every call then returns ErrClosed.
	closed atomic.Bool
	// abort is cancelled when a Close gives up waiting (its ctx ended); it is the
	// parent of every cleanup's context.
	abort       context.Context
	abortCancel context.CancelFunc

	// wg owns every goroutine the runtime starts (Done watchers, cancel calls, cleanup
	// drains); Close waits for it.
	wg sync.WaitGroup

	// Live counters, read by Stats without a round trip.
	nActors    atomic.Int64 // runtime actors between Started and Stopped
	nAgents    atomic.Int64 // registered agents not yet finalized
	nRecords   atomic.Int64 // task records held (dropped at dispose / close)
	nRunning   atomic.Int64 // tasks not yet terminal
	nAbandoned atomic.Int64 // tasks failed by the settle timeout
	nextToken  atomic.Uint64

	// replies is a free list of reply processes whose answer was received.
	replies chan *reply
}

// Stats is a point-in-time count of the runtime's live state. After Close (or after
// every agent was disposed and no unowned task remains) all fields but Abandoned are 0.
type Stats struct {
	Tasks     int // task records held (running or terminal, not yet dropped)
	Running   int // tasks not yet terminal (running or stopping)
	Agents    int // registered agents
	Actors    int // live actors of this runtime (registry, agents, tasks)
	Abandoned int // tasks recorded failed because they did not settle after cancel
}

// NewRuntime starts a runtime: its registry actor, in its own actor system unless
// WithActorSystem is given.
func NewRuntime(opts ...Option) (*Runtime, error) {
	cfg := config{ownerLimit: DefaultOwnerLimit, settleTimeout: DefaultSettleTimeout}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.settleTimeout <= 0 {
		return nil, fmt.Errorf("%w: settle timeout %s must be positive", messages.ErrInvalidArgument, cfg.settleTimeout)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	rt := &Runtime{cfg: cfg, log: cfg.logger, stopped: make(chan struct{}), replies: make(chan *reply, 256)}
	rt.abort, rt.abortCancel = context.WithCancel(context.Background())
	rt.tasks.rt = rt
	rt.agents.rt = rt
	rt.hub = newHub(rt)
	if cfg.system != nil {
		rt.system = cfg.system
	} else {
		logger := cfg.logger.With("lib", "protoactor")
		// A short dead-letter throttle interval: the throttle keeps a goroutine alive
		// for one interval after a dead letter, which would outlive Close.
		rt.system = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
			actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
		rt.ownSystem = true
	}
	rt.pool = newPool(poolWorkers, 300)
	props := actor.PropsFromProducer(func() actor.Actor { return newRegistry(rt) },
		actor.WithSupervisor(neverRestart), actor.WithDispatcher(rt.pool))
	rt.registry = rt.system.Root.SpawnPrefix(props, "taskrt-registry")
	return rt, nil
}

// poolWorkers is the number of long-lived dispatcher goroutines per runtime.
const poolWorkers = 8

// neverRestart stops a child that escaped the runtime's own panic containment: a
// restarted task actor would re-run nothing but would lose its state, and a restart
// could never be what a background task wants.
var neverRestart = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Tasks is the task half of the API.
func (rt *Runtime) Tasks() *Tasks { return &rt.tasks }

// Agents is the owner half of the API.
func (rt *Runtime) Agents() *Agents { return &rt.agents }

// Registry is the registry actor's PID, for actor-native access with the request
// types of package messages.
func (rt *Runtime) Registry() *actor.PID { return rt.registry }

// ActorSystem is the actor system the runtime runs in.
func (rt *Runtime) ActorSystem() *actor.ActorSystem { return rt.system }

// Stats reports the live counts. It costs a few atomic loads.
func (rt *Runtime) Stats() Stats {
	return Stats{
		Tasks:     int(rt.nRecords.Load()),
		Running:   int(rt.nRunning.Load()),
		Agents:    int(rt.nAgents.Load()),
		Actors:    int(rt.nActors.Load()),
		Abandoned: int(rt.nAbandoned.Load()),
	}
}

// Close cancels every live task (owned or not) with reason "runtime closed", disposes
// every agent (running its cleanups), awaits settlement, stops the actor tree, and
// waits for the runtime's goroutines and the OnDone listeners to finish. Listeners see
// the settlements Close causes, and nothing after Close returns. Afterwards every call
// returns ErrClosed. If ctx ends first, Close returns ctx.Err(), cancels the contexts
// of running cleanups, and the teardown goes on in the background; call Close again
// to wait for it.
func (rt *Runtime) Close(ctx context.Context) error {
	if rt.closed.Load() {
		return nil
	}
	r := newReply(rt)
	rt.system.Root.RequestWithCustomSender(rt.registry, &messages.CloseRuntime{}, r.pid)
	select {
	case <-r.ch:
	case <-rt.stopped:
	case <-ctx.Done():
		r.release()
		rt.abortCancel()
		return ctx.Err()
	}
	r.release()
	select {
	case <-rt.stopped:
	case <-ctx.Done():
		rt.abortCancel()
		return ctx.Err()
	}
	if err := rt.hub.close(ctx); err != nil {
		rt.abortCancel()
		return err
	}
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		rt.abortCancel()
		return ctx.Err()
	}
	rt.abortCancel()
	rt.pool.close()
	for {
		select {
		case r := <-rt.replies:
			r.release()
			continue
		default:
		}
		break
	}
	if rt.ownSystem {
		rt.system.Shutdown()
	}
	rt.closed.Store(true)
	return nil
}

// goSafe runs f on a goroutine the runtime owns (Close waits for it) and logs a
// panic instead of crashing the embedder's process.
func (rt *Runtime) goSafe(what string, f func()) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				rt.log.Error("taskrt: contained panic", "in", what, "panic", fmt.Sprint(p))
			}
		}()
		f()
	}()
}

// send delivers msg to pid from outside any actor.
func (rt *Runtime) send(pid *actor.PID, msg any) { rt.system.Root.Send(pid, msg) }

// reply is a one-shot actor.Process: the PID requests name as sender, so actors
// answer with an ordinary ctx.Respond, while the caller selects on a channel with its
// context. It costs one process-registry entry, like a protoactor Future, but no timer
// and no goroutine.
type reply struct {
	rt  *Runtime
	pid *actor.PID
	ch  chan any
}

// newReply takes a reply process from the runtime's free list, or registers a new
// one. Every request gets exactly one answer, so a reply whose answer was received is
// clean and can be reused (recycle); one whose caller gave up may still receive a late
// answer and is removed instead (release).
func newReply(rt *Runtime) *reply {
	select {
	case r := <-rt.replies:
		select { // defensive: a reply in the free list never has a pending answer
		case <-r.ch:
		default:
		}
		return r
	default:
	}
	r := &reply{rt: rt, ch: make(chan any, 1)}
	r.pid, _ = rt.system.ProcessRegistry.Add(r, "taskrt-reply"+rt.system.ProcessRegistry.NextId())
	return r
}

// recycle returns a reply whose one answer was received to the free list.
func (r *reply) recycle() {
	select {
	case r.rt.replies <- r:
	default:
		r.release()
	}
}

func (r *reply) SendUserMessage(_ *actor.PID, msg any) {
	_, m, _ := actor.UnwrapEnvelope(msg)
	select {
	case r.ch <- m:
	default: // a one-shot reply: anything after the first is dropped
	}
}
func (r *reply) SendSystemMessage(*actor.PID, any) {}
func (r *reply) Stop(*actor.PID)                   {}
func (r *reply) release()                          { r.rt.system.ProcessRegistry.Remove(r.pid) }

// call sends a request to the registry and waits for its reply, the context, or the
// runtime's end.
func (rt *Runtime) call(ctx context.Context, msg messages.RegistryMessage) (any, error) {
	if rt.closed.Load() {
		return nil, messages.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := newReply(rt)
	rt.system.Root.RequestWithCustomSender(rt.registry, msg, r.pid)
	select {
	case m := <-r.ch:
		r.recycle()
		return rt.checkReply(m)
	case <-ctx.Done():
		r.release()
		return nil, ctx.Err()
	case <-rt.stopped:
		r.release()
		select {
		case m := <-r.ch:
			return rt.checkReply(m)
		default:
			return nil, messages.ErrClosed
		}
	}
}

// callUntilReply is call for requests that must not be abandoned midway (a start's
// reserve and commit): it waits for the reply or the runtime's end only.
func (rt *Runtime) callUntilReply(msg messages.RegistryMessage) (any, error) {
	return rt.call(context.Background(), msg)
}

func (rt *Runtime) checkReply(m any) (any, error) {
	if _, ok := m.(*actor.DeadLetterResponse); ok {
		return nil, messages.ErrClosed
	}
	return m, nil
}
