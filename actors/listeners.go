package actors

import (
	"runtime"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// listener is one OnDone listener. Each listener has an actor, a child of the
// registry: the registry sends it every settlement, its mailbox is the listener's
// queue (unbounded, so a slow listener delays only itself), and its Receive calls the
// listener, one settlement at a time, in settlement order. A panic is contained and
// logged; the listener stays.
//
// A listener actor is the one kind of actor in the runtime that may block: it runs
// the embedder's code, and nothing in the runtime ever waits for it except
// remove and Close. Listener actors are not counted in Stats.Actors, which
// counts the actors of the task tree (registry, agents, tasks).
type listener struct {
	rt *Runtime
	fn func(messages.Snapshot)

	// removed is set by remove: no call starts once it is set.
	removed atomic.Bool
	// callThread is the OS thread of the call in progress (0: none; -1: a call on a
	// platform without thread ids). A call runs with its goroutine locked to its
	// thread, so a goroutine that finds its own thread id here is that call: no other
	// goroutine may run on that thread until the call returns.
	callThread atomic.Int64
	// stopped is closed when the listener actor has stopped.
	stopped chan struct{}
}

func newListenerProps(rt *Runtime, l *listener) *actor.Props {
	return rt.kernel.Props(func() actor.Actor { return l }, nil, actor.WithSupervisor(neverRestart))
}

func (l *listener) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *settlement:
		// Silent once removed, and from the moment Close begins.
		if l.removed.Load() || l.rt.closing.Load() {
			return
		}
		l.call(m.snap)
	case *actor.Stopped:
		close(l.stopped)
	}
}

func (l *listener) call(snap messages.Snapshot) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	id := threadID()
	if id == 0 {
		id = -1
	}
	l.callThread.Store(id)
	defer l.callThread.Store(0)
	if err := contain.Call("listener", func() error { l.fn(snap); return nil }); err != nil {
		l.rt.log.Error("taskrt: OnDone listener panicked", "task", snap.ID, "err", err)
	}
}

// insideCall reports whether the calling goroutine is this listener's call in
// progress (a listener removing itself). Without thread ids, any call in
// progress counts: remove then returns without waiting rather than risk waiting
// for itself.
func (l *listener) insideCall() bool {
	switch cur := l.callThread.Load(); cur {
	case 0:
		return false
	case -1:
		return true
	default:
		return cur == threadID()
	}
}

// addListener adds a listener actor and returns its remove function. Once the
// runtime is closing, the listener is never called and remove does nothing.
func (rt *Runtime) addListener(fn func(messages.Snapshot)) func() {
	l := &listener{rt: rt, fn: fn, stopped: make(chan struct{})}
	m, err := rt.call(rt.abort, &addListener{l: l})
	if err != nil || m.(*addListenerReply).pid == nil {
		return func() {}
	}
	pid := m.(*addListenerReply).pid
	return func() {
		if l.removed.Swap(true) {
			return
		}
		if !rt.closed.Load() {
			tellRegistry(rt.system.Root, rt, &dropListener{pid: pid})
		}
		// Wait for a call in progress to return, so that no listener code runs after
		// remove returned — unless this is that call removing itself.
		if !l.insideCall() {
			select {
			case <-l.stopped:
			case <-rt.stopped:
			}
		}
	}
}

// OnDone adds a listener of every task settlement, in settlement order. Each
// listener has its own actor, whose mailbox is its queue, so a slow or panicking
// listener (the panic is logged) harms neither the registry nor other listeners. The
// returned function removes it: no call starts after it returns, and it waits for a
// call in progress unless it is called from inside that call. Listeners are silent
// from the moment Close begins.
func (t *Tasks) OnDone(fn func(messages.Snapshot)) (remove func()) {
	return t.rt.addListener(fn)
}

// addListener spawns the actor of an OnDone listener (none once the runtime
// closes).
func (r *registry) addListener(ctx actor.Context, m *addListener) {
	if r.phase != runtimeOpen {
		ctx.Respond(&addListenerReply{})
		return
	}
	pid := ctx.Spawn(newListenerProps(r.rt, m.l))
	r.listeners[pid.Id] = pid
	ctx.Respond(&addListenerReply{pid: pid})
}

// dropListener stops the actor of a removed listener.
func (r *registry) dropListener(ctx actor.Context, m *dropListener) {
	if _, ok := r.listeners[m.pid.Id]; ok {
		delete(r.listeners, m.pid.Id)
		ctx.Poison(m.pid)
	}
}
