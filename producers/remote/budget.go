package remote

import "sync"

// budget is a worker's bound on output in flight: the bytes of frames its tasks
// have sent (or are reading to send) and not had acknowledged, summed over every
// task. A frame is reserved before its bytes are read from the task's buffer, so
// the bytes a worker holds for sending never exceed the budget however many
// tasks stream at once; and since a task's unacknowledged bytes also sit in the
// network and at the owner node, the budget bounds those too.
//
// The tasks that stream share it: each may hold at most size / active, so that a
// flood cannot starve a task that writes a line, and every task makes progress
// while others hold the rest.
type budget struct {
	mu      sync.Mutex
	size    int64
	chunk   int64 // the largest frame
	used    int64
	peak    int64               // the most ever in use (tests)
	active  map[*wtask]struct{} // tasks with output to send or in flight
	waiting map[*wtask]struct{} // tasks that found too little free: poked on a release
}

func newBudget(size, chunk int64) *budget {
	return &budget{size: size, chunk: chunk, active: map[*wtask]struct{}{}, waiting: map[*wtask]struct{}{}}
}

// take reserves up to want bytes for t, which holds held already: no more than
// its share less what it holds, nor than is free. Less than floor (the smaller of
// want and minFrame) is not worth a frame: it reserves nothing then, and t is
// poked once more is free.
func (b *budget) take(t *wtask, want, held int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active[t] = struct{}{}
	share := max(1, b.size/int64(len(b.active)))
	n := min(want, share-held, b.size-b.used)
	if n < min(want, minFrame, share) {
		if b.size-b.used < min(want, minFrame, share) {
			b.waiting[t] = struct{}{} // short of free bytes; its own acknowledgements poke it otherwise
		}
		return 0
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return n
}

// give returns n bytes and pokes the tasks that waited for free bytes.
func (b *budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	var wake []*wtask
	for t := range b.waiting {
		wake = append(wake, t)
		delete(b.waiting, t)
	}
	b.mu.Unlock()
	for _, t := range wake {
		t.poke()
	}
}

// short reports whether a task holding held could not take a full frame more:
// its frames then ask the owner node for an acknowledgement at once.
func (b *budget) short(held int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	share := b.size / int64(max(1, len(b.active)))
	return share-held < b.chunk || b.size-b.used < b.chunk
}

// idle records that t has nothing to send and nothing in flight (or is gone).
func (b *budget) idle(t *wtask) {
	b.mu.Lock()
	delete(b.active, t)
	delete(b.waiting, t)
	b.mu.Unlock()
}

// inUse is the bytes reserved now, and the most ever.
func (b *budget) inUse() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
