package actors

import (
	"sync"
	"time"
)

// pool is the protoactor Dispatcher of the runtime's actors. protoactor's default
// dispatcher starts a new goroutine for every mailbox batch; its call chain plus our
// Receive frames outgrow a new goroutine's stack, so almost every message paid for a
// stack copy (about a quarter of a task lifecycle's CPU in profiles). The pool hands a
// batch to an idle long-lived worker, whose stack has already grown, and falls back to
// a new goroutine when no worker is idle, so a busy or blocked worker never delays
// another mailbox.
//
// A fallback goroutine, once its batch is done, stays on as a worker (up to
// maxWorkers in all), so that a load that keeps more mailboxes scheduled at once than
// there are workers stops paying for new goroutines and their stack growth (a tenth
// of a lifecycle's CPU at 8 starters on 2 cores). Such an extra worker leaves after
// extraIdle without work; the first workers stay until close.
type pool struct {
	work       chan func() // unbuffered: a send succeeds only when a worker is idle
	throughput int
	base       int // workers that never leave before close

	mu      sync.RWMutex // protects closed and workers against concurrent Schedule
	closed  bool
	workers int            // live workers, base and extra
	wg      sync.WaitGroup // the workers
}

// maxWorkers bounds a pool's workers, base and extra; past it, a batch that finds no
// idle worker runs on a goroutine that ends with it.
const maxWorkers = 64

// extraIdle is how long an extra worker waits for work before it leaves.
const extraIdle = time.Second

func newPool(workers, throughput int) *pool {
	p := &pool{work: make(chan func()), throughput: throughput, base: workers, workers: workers}
	p.wg.Add(workers)
	for range workers {
		go func() {
			defer p.wg.Done()
			for fn := range p.work {
				fn()
			}
		}()
	}
	return p
}

// Schedule runs fn on an idle worker, or on a new goroutine when none is idle.
func (p *pool) Schedule(fn func()) {
	p.mu.RLock()
	if !p.closed {
		select {
		case p.work <- fn:
			p.mu.RUnlock()
			return
		default:
		}
	}
	p.mu.RUnlock()
	go p.fallback(fn)
}

// fallback runs fn, then serves as an extra worker while the pool has room for one.
// It counts in wg (close waits for it) only from then on, as a base worker does
// outside its batches.
func (p *pool) fallback(fn func()) {
	fn()
	p.mu.Lock()
	if p.closed || p.workers >= maxWorkers {
		p.mu.Unlock()
		return
	}
	p.workers++
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	idle := time.NewTimer(extraIdle)
	defer idle.Stop()
	for {
		select {
		case fn, ok := <-p.work:
			if !ok {
				p.left()
				return
			}
			fn()
			idle.Reset(extraIdle)
		case <-idle.C:
			p.left()
			return
		}
	}
}

// left accounts for an extra worker that leaves.
func (p *pool) left() {
	p.mu.Lock()
	p.workers--
	p.mu.Unlock()
}

// size is the number of live workers (for tests).
func (p *pool) size() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.workers
}

// Throughput is how many messages a mailbox processes before it yields its worker.
func (p *pool) Throughput() int { return p.throughput }

// close stops the workers once they finished what they run.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.work)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
