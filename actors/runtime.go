package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/internal/contain"
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
	// kernel is the scheduling machinery of every actor of this runtime: mailboxes,
	// dispatcher, reply processes, the done selector, the stop queue.
	kernel *kernel.Kernel

	// closing is set when Close begins (or the registry faulted): listeners are
	// silent from then on.
	closing atomic.Bool
	// stopped is closed by the registry's Stopped handler: the tree is gone, and
	// every call still waiting for a reply returns ErrClosed.
	stopped chan struct{}
	// closed is set when Close completed; every call then returns ErrClosed.
	closed atomic.Bool
	// fault is the registry's panic, if it had one (*messages.PanicError).
	fault atomic.Pointer[messages.PanicError]
	// abort is cancelled when a Close gives up waiting (its ctx ended); it is the
	// parent of every cleanup's context.
	abort       context.Context
	abortCancel context.CancelFunc

	// wg owns every goroutine the runtime starts (done selectors, Cancel calls,
	// cleanups, deferred Releases); Close waits for it.
	wg sync.WaitGroup
	// lastDeadLetter is when the runtime's own actor system last had a dead letter
	// (UnixNano; 0: never): its dead-letter throttle then runs a goroutine for one
	// interval, which Close waits out (awaitDeadLetterThrottle).
	lastDeadLetter atomic.Int64
	deadLetters    *eventstream.Subscription

	// Counters, written by the actors and read by Stats without a round trip. They
	// are statistics about the state the actors own, never state anything acts on.
	nActors     atomic.Int64 // runtime actors between Started (an agent: its spawn) and Stopped
	nAgents     atomic.Int64 // registered agents not yet gone
	nRecords    atomic.Int64 // full task records held: running + retained
	nRunning    atomic.Int64 // tasks not yet terminal
	nRetained   atomic.Int64 // settled tasks whose full record is kept
	nTombstones atomic.Int64 // evicted tasks answered from a tombstone
	nAbandoned  atomic.Int64 // tasks failed by the settle timeout
	nextToken   atomic.Uint64
	// nSubscribers mirrors the registry's subscriber count, so that task actors
	// send output events only while someone listens.
	nSubscribers atomic.Int64

	metrics *instruments
}

// Stats is a point-in-time count of the runtime's live state. After Close (or after
// every agent was disposed and no unowned task remains) all fields but Abandoned are
// 0, and Actors is 1 (the registry) until Close.
type Stats struct {
	Tasks      int // full task records held: Running + Retained
	Running    int // tasks not yet terminal (running or stopping)
	Retained   int // settled tasks that keep their full record (output, actor)
	Tombstones int // evicted tasks still answered from their final snapshot
	Agents     int // registered agents
	Actors     int // live actors of the task tree (registry, agents, tasks)
	Abandoned  int // tasks recorded failed because they did not settle after cancel
}

// NewRuntime starts a runtime: its registry actor, in its own actor system unless
// WithActorSystem is given. It returns an error only if the registry cannot be
// spawned.
func NewRuntime(opts ...Option) (*Runtime, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	rt := &Runtime{cfg: cfg, log: cfg.logger, stopped: make(chan struct{})}
	rt.abort, rt.abortCancel = context.WithCancel(context.Background())
	in, err := newInstruments(rt, cfg.meters)
	if err != nil {
		return nil, fmt.Errorf("taskrt: metrics: %w", err)
	}
	rt.metrics = in
	rt.tasks.rt = rt
	rt.agents.rt = rt
	if cfg.system != nil {
		rt.system = cfg.system
	} else {
		logger := cfg.logger.With("lib", "protoactor")
		// A short dead-letter throttle interval: the throttle keeps a goroutine alive
		// for one interval after a dead letter, which Close waits out.
		rt.system = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
			actor.WithDeadLetterThrottleInterval(deadLetterThrottle))
		rt.ownSystem = true
		rt.deadLetters = rt.system.EventStream.Subscribe(func(m any) {
			if _, ok := m.(*actor.DeadLetterEvent); ok {
				rt.lastDeadLetter.Store(time.Now().UnixNano())
			}
		})
	}
	rt.kernel = kernel.New(kernel.Config{System: rt.system, Workers: poolWorkers, Throughput: 300, Go: rt.goSafe,
		Deliver: func(self *actor.PID, o messages.Outcome, ok bool) {
			tellTask(rt.system.Root, self, &outcomeMsg{outcome: o, ok: ok})
		}})
	props := rt.kernel.Props(func() actor.Actor { return newRegistry(rt) }, nil, actor.WithSupervisor(neverRestart))
	pid, err := rt.system.Root.SpawnNamed(props, "taskrt-registry"+rt.system.ProcessRegistry.NextId())
	if err != nil {
		rt.kernel.Close()
		return nil, fmt.Errorf("taskrt: spawn the registry: %w", err)
	}
	rt.registry = pid
	return rt, nil
}

// poolWorkers is the number of long-lived dispatcher goroutines per runtime.
const poolWorkers = 8

// neverRestart stops a child that escaped the runtime's own panic containment: a
// restarted actor would lose its state, and a restart could never be what a
// background task wants.
var neverRestart = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Tasks is the task half of the API.
func (rt *Runtime) Tasks() *Tasks { return &rt.tasks }

// Agents is the owner half of the API.
func (rt *Runtime) Agents() *Agents { return &rt.agents }

// Registry is the registry actor's PID, for actor-native access: send it the requests
// of package messages (messages.Request) with protoactor's Request or RequestFuture.
// See the messages package for the rules of that surface.
func (rt *Runtime) Registry() *actor.PID { return rt.registry }

// ActorSystem is the actor system the runtime runs in.
func (rt *Runtime) ActorSystem() *actor.ActorSystem { return rt.system }

// Stats reports the live counts. It costs a few atomic loads.
func (rt *Runtime) Stats() Stats {
	return Stats{
		Tasks:      int(rt.nRecords.Load()),
		Running:    int(rt.nRunning.Load()),
		Retained:   int(rt.nRetained.Load()),
		Tombstones: int(rt.nTombstones.Load()),
		Agents:     int(rt.nAgents.Load()),
		Actors:     int(rt.nActors.Load()),
		Abandoned:  int(rt.nAbandoned.Load()),
	}
}

// Retention is how many settled tasks per owner keep their full record
// (WithRetention); tools quote it when a task's output is no longer kept.
func (rt *Runtime) Retention() int { return rt.cfg.retention }

// Close cancels every live task (owned or not) with reason "runtime closed", disposes
// every agent (running its cleanups), awaits settlement, stops the actor tree, and
// waits for the runtime's goroutines. OnDone listeners are silent from the moment
// Close begins: no listener is called for a settlement Close causes, nor for any
// settlement during or after it. Afterwards every call returns ErrClosed.
//
// If ctx ends first, Close returns ctx.Err(), cancels the contexts of running
// cleanups, and the teardown goes on in the background; call Close again to wait for
// it. If the registry failed (a runtime bug), Close returns that failure.
func (rt *Runtime) Close(ctx context.Context) error {
	if rt.closed.Load() {
		return rt.faultErr()
	}
	rt.closing.Store(true)
	giveUp := func() error { rt.abortCancel(); return ctx.Err() }
	// The answer, or the runtime's end, means the teardown is under way.
	if _, err := rt.kernel.Call(ctx, rt.registry, &closeRuntime{}, rt.stopped); err != nil && !errors.Is(err, kernel.ErrStopped) {
		return giveUp()
	}
	select {
	case <-rt.stopped:
	case <-ctx.Done():
		return giveUp()
	}
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return giveUp()
	}
	rt.abortCancel()
	rt.kernel.Close()
	_ = rt.metrics.registration.Unregister()
	if rt.ownSystem {
		rt.system.Shutdown()
		rt.system.EventStream.Unsubscribe(rt.deadLetters)
		rt.awaitDeadLetterThrottle(ctx)
	}
	rt.closed.Store(true)
	return rt.faultErr()
}

// deadLetterThrottle is the dead-letter throttle interval of the runtime's own
// actor system. protoactor starts a goroutine at the first dead letter of each
// interval that ends one interval later; short, so that Close waits little for it.
const deadLetterThrottle = 10 * time.Millisecond

// awaitDeadLetterThrottle waits until the throttle goroutine of the last dead letter
// (if it was less than an interval ago) has had its interval, so that no goroutine
// of the runtime's own actor system outlives Close — under testing/synctest too,
// whose clock stops when the test's goroutine returns.
func (rt *Runtime) awaitDeadLetterThrottle(ctx context.Context) {
	last := rt.lastDeadLetter.Load()
	if last == 0 {
		return
	}
	wait := time.Until(time.Unix(0, last).Add(deadLetterThrottle + time.Millisecond))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// recordFault records the registry's first panic and marks the runtime closing. It
// reports false if a fault was already recorded.
func (rt *Runtime) recordFault(p *messages.PanicError) bool {
	rt.closing.Store(true)
	return rt.fault.CompareAndSwap(nil, p)
}

func (rt *Runtime) faultErr() error {
	if p := rt.fault.Load(); p != nil {
		return fmt.Errorf("taskrt: the runtime failed: %w", p)
	}
	return nil
}

// closedErr is ErrClosed, wrapping the fault that closed the runtime if there was one.
func (rt *Runtime) closedErr() error {
	if p := rt.fault.Load(); p != nil {
		return fmt.Errorf("%w: the runtime failed: %w", messages.ErrClosed, p)
	}
	return messages.ErrClosed
}

// goSafe runs f on a goroutine the runtime owns (Close waits for it) and logs a
// panic instead of crashing the embedder's process.
func (rt *Runtime) goSafe(what string, f func()) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if err := contain.Call(what, func() error { f(); return nil }); err != nil {
			rt.log.Error("taskrt: contained panic", "in", what, "err", err)
		}
	}()
}

// send delivers msg to pid from outside any actor.
func (rt *Runtime) send(pid *actor.PID, msg any) { rt.system.Root.Send(pid, msg) }

// alive reports whether pid names a live local process (an actor, a reply process, a
// future that has not timed out). Remote PIDs count as alive.
func (rt *Runtime) alive(pid *actor.PID) bool {
	if pid == nil {
		return false
	}
	_, ok := rt.system.ProcessRegistry.Get(pid)
	return ok
}
