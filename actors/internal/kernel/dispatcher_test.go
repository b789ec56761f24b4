package kernel

import (
	"testing"
	"testing/synctest"
)

// TestPoolKeepsFallbackWorkers pins the dispatcher's growth rule: a batch that finds
// no idle worker runs on a new goroutine, which then stays on as a worker (so a load
// with more mailboxes scheduled at once than workers stops paying for new goroutines),
// up to maxWorkers, until close, which waits for every worker.
func TestPoolKeepsFallbackWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(1, 10)
		synctest.Wait() // the base worker waits for work
		release := make(chan struct{})
		ran := make(chan int, 4)
		p.Schedule(func() { <-release; ran <- 1 }) // holds the only base worker
		synctest.Wait()
		p.Schedule(func() { ran <- 2 }) // no idle worker: a fallback goroutine
		if got := <-ran; got != 2 {
			t.Fatalf("first batch to finish: got %d, want 2 (the fallback)", got)
		}
		synctest.Wait()
		if got, want := p.size(), 2; got != want {
			t.Fatalf("workers after a fallback batch: got %d, want %d (it stays on)", got, want)
		}
		p.Schedule(func() { ran <- 3 }) // the extra worker is idle: it takes this one
		if got := <-ran; got != 3 {
			t.Fatalf("got %d, want 3", got)
		}
		synctest.Wait()
		if got, want := p.size(), 2; got != want {
			t.Fatalf("workers after a batch on the extra worker: got %d, want %d", got, want)
		}
		close(release)
		if got := <-ran; got != 1 {
			t.Fatalf("got %d, want 1", got)
		}
		p.close()
	})
}

// TestPoolBoundsItsWorkers pins maxWorkers: with every worker busy, more batches run
// on goroutines that end with their batch, and the pool never holds more than
// maxWorkers workers.
func TestPoolBoundsItsWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(1, 10)
		synctest.Wait()
		release := make(chan struct{})
		n := maxWorkers + 8
		done := make(chan struct{}, n)
		for range n {
			p.Schedule(func() { <-release; done <- struct{}{} })
		}
		synctest.Wait()
		close(release)
		for range n {
			<-done
		}
		synctest.Wait()
		if got, want := p.size(), maxWorkers; got != want {
			t.Fatalf("workers after %d concurrent batches: got %d, want %d", n, got, want)
		}
		p.close()
	})
}
