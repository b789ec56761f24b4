package kernel

import (
	"sync"
)

// pool is the protoactor Dispatcher of the runtime's actors (Kernel.Props).
// protoactor's default dispatcher starts a new goroutine for every mailbox batch;
// its call chain plus the actors' Receive frames outgrow a new goroutine's stack, so
// almost every message pays for a stack copy. The pool hands a batch to an idle
// long-lived worker, whose stack has already grown, and falls back to a new goroutine
// when no worker is idle, so a busy or blocked worker never delays another mailbox.
//
// A fallback goroutine, once its batch is done, stays on as a worker (up to
// maxWorkers in all), so that a load that keeps more mailboxes scheduled at once than
// there are workers stops paying for new goroutines and their stack growth. Workers
// stay until close; an idle one costs its parked goroutine (the GC shrinks its
// stack). They wait on the work channel alone. Rejected: a per-batch idle timer to
// let extra workers leave — its select and timer reset on every batch cost more than
// the goroutines it would save.
//
// The known limit: a mass stop (a disposal of thousands of tasks) makes many
// mailboxes due at once; there the hand-off attempt and the bound on workers make
// the pool slower than protoactor's dispatcher, which only starts goroutines. Every
// other path (a start, a routed request, a waiter's wake-up) is faster with it.
type pool struct {
	work       chan func() // unbuffered: a send succeeds only when a worker is idle
	throughput int

	mu      sync.RWMutex // protects closed and workers against concurrent Schedule
	closed  bool
	workers int            // live workers, base and extra
	wg      sync.WaitGroup // the workers
}

// maxWorkers bounds a pool's workers; past it, a batch that finds no idle worker
// runs on a goroutine that ends with it.
const maxWorkers = 32

func newPool(workers, throughput int) *pool {
	p := &pool{work: make(chan func()), throughput: throughput, workers: workers}
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

// fallback runs fn, then serves as a worker while the pool has room for one. It
// counts in wg (close waits for it) only from then on, as a worker does outside its
// batches.
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
	for fn := range p.work {
		fn()
	}
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
