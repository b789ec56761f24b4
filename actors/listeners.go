package actors

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/taskrt/taskrt/messages"
)

// hub fans task settlements out to the OnDone listeners. The registry publishes from
// its mailbox goroutine, so publish only appends to per-listener queues; each
// listener has its own goroutine that drains its queue in order. A slow listener
// grows only its own queue; a panicking one is logged and keeps its subscription.
type hub struct {
	rt *Runtime

	mu     sync.Mutex // protects subs and closed
	subs   map[*sub]struct{}
	closed bool
}

type sub struct {
	fn func(messages.Snapshot)

	mu      sync.Mutex // protects queue and stopped
	queue   []messages.Snapshot
	stopped bool
	wake    chan struct{} // capacity 1: "the queue changed"
	exited  chan struct{} // closed when the goroutine returned
	started chan struct{} // closed once gid is set
	gid     atomic.Uint64 // the listener goroutine's id
	drain   bool          // a close asked for: deliver what is queued, then exit
}

func newHub(rt *Runtime) *hub { return &hub{rt: rt, subs: map[*sub]struct{}{}} }

func (h *hub) subscribe(fn func(messages.Snapshot)) func() {
	s := &sub{fn: fn, wake: make(chan struct{}, 1), exited: make(chan struct{}), started: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return func() {}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	h.rt.goSafe("listener", func() { s.run(h.rt) })
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
			s.stop(false)
			// Every caller but the listener itself waits for the listener's goroutine
			// to end, so no call is running or starts after unsubscribe returns. A
			// listener unsubscribing from inside its own call must not wait for itself.
			<-s.started
			if goroutineID() != s.gid.Load() {
				<-s.exited
			}
		})
	}
}

// publish queues a settlement for every listener. Called on the registry's goroutine;
// it never blocks on a listener.
func (h *hub) publish(snap messages.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for s := range h.subs {
		s.push(snap)
	}
}

// close delivers what is queued, then stops every listener goroutine.
func (h *hub) close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	subs := make([]*sub, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.subs = map[*sub]struct{}{}
	h.mu.Unlock()
	for _, s := range subs {
		s.stop(true)
	}
	for _, s := range subs {
		select {
		case <-s.exited:
		case <-ctx.Done():
			return fmt.Errorf("waiting for OnDone listeners: %w", ctx.Err())
		}
	}
	return nil
}

func (s *sub) push(snap messages.Snapshot) {
	s.mu.Lock()
	if !s.stopped {
		s.queue = append(s.queue, snap)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop ends the listener: at once (unsubscribe) or after its queue is delivered (drain).
func (s *sub) stop(drain bool) {
	s.mu.Lock()
	if drain {
		s.drain = true
	} else {
		s.stopped = true
		s.queue = nil
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// goroutineID is the current goroutine's id, read from its stack header. It is used
// once per listener goroutine and once per unsubscribe, never on a hot path.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

func (s *sub) run(rt *Runtime) {
	s.gid.Store(goroutineID())
	close(s.started)
	defer close(s.exited)
	for {
		s.mu.Lock()
		if s.stopped || (s.drain && len(s.queue) == 0) {
			s.mu.Unlock()
			return
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			<-s.wake
			continue
		}
		snap := s.queue[0]
		s.queue[0] = messages.Snapshot{}
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = nil // let the backing array go
		}
		s.mu.Unlock()
		s.call(rt, snap)
	}
}

func (s *sub) call(rt *Runtime, snap messages.Snapshot) {
	defer func() {
		if p := recover(); p != nil {
			rt.log.Error("taskrt: OnDone listener panicked", "task", snap.ID, "panic", fmt.Sprint(p))
		}
	}()
	s.fn(snap)
}
