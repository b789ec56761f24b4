package tools

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/taskrt/taskrt/messages"
)

// NoticeStats counts what the notice injector did with the settlements it saw.
type NoticeStats struct {
	// Delivered counts notices the owner's injector accepted.
	Delivered int64 `json:"delivered"`
	// Suppressed counts settlements that produced no notice: unowned tasks, tasks
	// the model killed or whose terminal state a read or wait returned, tasks ended
	// by their owner's disposal or the runtime's close.
	Suppressed int64 `json:"suppressed"`
	// Failed counts notices whose injection returned an error (the agent's injector
	// failed, or Close cancelled it).
	Failed int64 `json:"failed"`
}

// noticeCounters are NoticeStats as atomics: the listener goroutine writes, anyone
// reads; every count is followed by a signal on changed.
type noticeCounters struct {
	delivered, suppressed, failed atomic.Int64

	mu      sync.Mutex    // protects changed
	changed chan struct{} // closed (and replaced) after every count
}

// count adds one to c and wakes WaitHandled.
func (n *noticeCounters) count(c *atomic.Int64) {
	c.Add(1)
	n.mu.Lock()
	if n.changed != nil {
		close(n.changed)
		n.changed = nil
	}
	n.mu.Unlock()
}

// handled is how many settlements were counted, and the channel closed after the next.
func (n *noticeCounters) handled() (int64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.changed == nil {
		n.changed = make(chan struct{})
	}
	return n.delivered.Load() + n.suppressed.Load() + n.failed.Load(), n.changed
}

// Notices reports the notice counters.
func (t *TaskTools) Notices() NoticeStats {
	return NoticeStats{
		Delivered:  t.notices.delivered.Load(),
		Suppressed: t.notices.suppressed.Load(),
		Failed:     t.notices.failed.Load(),
	}
}

// WaitHandled blocks until the notice injector has handled at least n settlements
// (delivered, suppressed or failed: the sum of Notices), or ctx ends. The runtime's
// listeners are silent from the moment its Close begins, so a harness that knows n
// tasks settled can let their notices be handled, and counted, before it closes the
// runtime.
func (t *TaskTools) WaitHandled(ctx context.Context, n int64) error {
	for {
		got, changed := t.notices.handled()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d settlements handled by the notice injector: %w", got, n, ctx.Err())
		}
	}
}

// onDone is the OnDone listener: it turns each settlement of an owned, unreported
// task into exactly one notice in the owner's session. The runtime calls it once per
// settlement, in order, on a goroutine of its own, so it may call back into the
// runtime.
//
// The steps, each of which may end the notice:
//
//  1. An unowned task has no session to notify.
//  2. A task reported at settlement (killed by the model, a wait pending when it
//     settled, ended by teardown) gets no notice.
//  3. Let every task_output call on the task that was already under way finish: a
//     call the model made before the task settled, whose request reached the task
//     only after it settled, returns the terminal state — that wait was pending at
//     settlement as far as the model can tell. The calls end quickly: the task has
//     settled, so a wait on it returns at once.
//  4. Claim the notice from the registry and inject it (Tasks.Notify): a read or
//     wait that returned the terminal state after settlement marked the task
//     reported since — the model already has the news; a task that is gone (its
//     owner disposed, the runtime closed), or whose owner is being disposed, has no
//     session to notify; a notice another surface already claimed is not sent twice.
//     The claim and the injector come from the registry in one step, so a notice
//     can never reach a later registration of the same agent id.
func (t *TaskTools) onDone(s messages.Snapshot) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.active.Add(1)
	t.mu.Unlock()
	defer t.active.Done()
	if s.Owner == "" || s.Reported {
		t.notices.count(&t.notices.suppressed)
		return
	}
	t.calls.await(t.ctx, s.ID)
	delivered, err := t.rt.Tasks().Notify(t.ctx, s.ID, noticeText(s))
	switch {
	case err != nil:
		t.notices.count(&t.notices.failed)
	case delivered:
		t.notices.count(&t.notices.delivered)
	default:
		t.notices.count(&t.notices.suppressed)
	}
}

// inflight tracks the task_output calls under way, per task id, so that the notice
// injector can let the ones that started before it finish (step 3 of onDone).
type inflight struct {
	mu    sync.Mutex // protects calls
	calls map[messages.TaskID]map[*byte]chan struct{}
}

// begin records a call on id; the returned function marks it finished.
func (f *inflight) begin(id messages.TaskID) (end func()) {
	key, done := new(byte), make(chan struct{})
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[messages.TaskID]map[*byte]chan struct{}{}
	}
	if f.calls[id] == nil {
		f.calls[id] = map[*byte]chan struct{}{}
	}
	f.calls[id][key] = done
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.calls[id], key)
		if len(f.calls[id]) == 0 {
			delete(f.calls, id)
		}
		f.mu.Unlock()
		close(done)
	}
}

// await waits for the calls on id that are under way now (not for later ones), or
// for ctx.
func (f *inflight) await(ctx context.Context, id messages.TaskID) {
	f.mu.Lock()
	pending := make([]chan struct{}, 0, len(f.calls[id]))
	for _, done := range f.calls[id] {
		pending = append(pending, done)
	}
	f.mu.Unlock()
	for _, done := range pending {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}
