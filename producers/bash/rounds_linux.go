//go:build linux

package bash

import (
	"sync"
	"time"
)

// rounds batches requests (of type T) into rounds that one goroutine at a time
// runs: the sweeper's and the reaper's. A request joins the next round of whoever
// runs them; when no one does, a loop goroutine is started for it (join), or the
// caller runs a round of its own first (claim, then handOff). The loop takes the
// requests that joined since its last round with next, and ends, handing the role
// back, once no request is left.
type rounds[T any] struct {
	mu      sync.Mutex    // protects queue, running and wake
	queue   []T           // waiting for their first round
	running bool          // rounds are run: by the loop goroutine, or by a caller that claimed them
	wake    chan struct{} // buffered 1; tells a waiting loop that queue grew
}

// join queues req for the next round. When no one runs rounds it starts loop in a
// new goroutine; otherwise it wakes the loop (see wait).
func (r *rounds[T]) join(req T, loop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	r.queue = append(r.queue, req)
	if !r.running {
		r.running = true
		go loop()
		return
	}
	notify(r.wake)
}

// claim makes the caller the one that runs rounds when no one does, and reports
// whether it did: the caller then runs its round and calls handOff. Otherwise req
// has joined the next round of the running loop, which it woke.
func (r *rounds[T]) claim(req T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if !r.running {
		r.running = true // no loop starts while the caller runs its round
		return true
	}
	r.queue = append(r.queue, req)
	notify(r.wake)
	return false
}

// handOff ends a claim: the requests still pending after the caller's round join
// the queue, and loop is started in a new goroutine when the queue holds any (they
// and the requests that joined meanwhile); otherwise no one runs rounds any more.
func (r *rounds[T]) handOff(loop func(), pending ...T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, pending...)
	if len(r.queue) > 0 {
		go loop()
		return
	}
	r.running = false
}

// next appends the requests that joined since the last round to active, the loop's
// requests still pending, and returns them. When none is left it returns false and
// the loop must return: no one runs rounds any more, and the next request starts a
// new loop.
func (r *rounds[T]) next(active []T) ([]T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	active = append(active, r.queue...)
	r.queue = nil
	if len(active) == 0 {
		r.running = false
		return active, false
	}
	return active, true
}

// wait blocks the loop for d, or until a request joins.
func (r *rounds[T]) wait(d time.Duration) {
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-r.wake:
		timer.Stop()
	}
}

func (r *rounds[T]) init() {
	if r.wake == nil {
		r.wake = make(chan struct{}, 1)
	}
}
