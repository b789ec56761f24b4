package actors

import (
	"sync"
)

// pool is the protoactor Dispatcher of the runtime's actors. protoactor's default
// dispatcher starts a new goroutine for every mailbox batch; its call chain plus our
// Receive frames outgrow a new goroutine's stack, so almost every message paid for a
// stack copy (about a quarter of a task lifecycle's CPU in profiles). The pool hands a
// batch to an idle long-lived worker, whose stack has already grown, and falls back to
// a new goroutine when no worker is idle, so a busy or blocked worker never delays
// another mailbox.
type pool struct {
	work       chan func() // unbuffered: a send succeeds only when a worker is idle
	throughput int

	mu     sync.RWMutex // protects closed against concurrent Schedule
	closed bool
	wg     sync.WaitGroup // the workers
}

func newPool(workers, throughput int) *pool {
	p := &pool{work: make(chan func()), throughput: throughput}
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
	go fn()
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
