package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// MutexRegistry is the baseline a user would write by hand instead of adopting the
// runtime: one mutex over a map of tasks, and one goroutine per task that waits for
// the producer's Done. It keeps the contract the figures exercise — per-kind ids
// allocated at commit (a failed start burns none), the owner fence (a foreign or
// unknown id gives the same ErrTaskNotFound), consuming stream reads and idempotent
// final reads, waits with a timeout that return the running snapshot, kill that
// forwards its reason to Cancel and leaves the task untouched when Cancel fails,
// reported flags, and Dispose that cancels and awaits an owner's tasks and child
// owners.
//
// It deliberately leaves out what the runtime adds beyond that: completion notices
// and OnDone listeners, owner caps, surfaces, cleanups, the settle timeout, panic
// containment of listeners. Dispose and Close ignore their context (they always wait
// for settlement). Use NewMutexRegistry; the zero value is not usable.
type MutexRegistry struct {
	mu       sync.Mutex // protects every field below, and every mutexTask's snap and output
	counters map[string]int
	tasks    map[messages.TaskID]*mutexTask
	owners   map[messages.AgentID]*mutexOwner
	unowned  []messages.TaskID
	closed   bool

	watchers sync.WaitGroup // one per task, until its Done delivered
}

type mutexTask struct {
	snap    messages.Snapshot
	hooks   messages.Hooks
	output  string        // final output of a final-only kind
	settled chan struct{} // closed at settlement
	readMu  sync.Mutex    // serializes ReadOutput: one consuming cursor per task
}

type mutexOwner struct {
	parent    messages.AgentID
	children  map[messages.AgentID]struct{}
	tasks     []messages.TaskID
	disposing bool
	gone      chan struct{} // closed when its Dispose finished
}

// NewMutexRegistry returns an empty registry.
func NewMutexRegistry() *MutexRegistry {
	return &MutexRegistry{
		counters: map[string]int{},
		tasks:    map[messages.TaskID]*mutexTask{},
		owners:   map[messages.AgentID]*mutexOwner{},
	}
}

// Register registers an owner; a non-empty parent must be registered and makes the
// owner part of the parent's disposal.
func (r *MutexRegistry) Register(_ context.Context, id, parent messages.AgentID) error {
	if strings.TrimSpace(string(id)) == "" {
		return fmt.Errorf("%w: agent id is empty", messages.ErrInvalidArgument)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return messages.ErrClosed
	}
	if _, ok := r.owners[id]; ok {
		return fmt.Errorf("%w: %s", messages.ErrAgentExists, id)
	}
	if parent != "" {
		p, ok := r.owners[parent]
		if !ok || p.disposing {
			return fmt.Errorf("%w: parent %s", messages.ErrOwnerUnknown, parent)
		}
		p.children[id] = struct{}{}
	}
	r.owners[id] = &mutexOwner{parent: parent, children: map[messages.AgentID]struct{}{}, gone: make(chan struct{})}
	return nil
}

// admit checks that a task of owner may start. Called with r.mu held.
func (r *MutexRegistry) admit(owner messages.AgentID) error {
	if r.closed {
		return messages.ErrClosed
	}
	if owner != "" {
		if o, ok := r.owners[owner]; !ok || o.disposing {
			return fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, owner)
		}
	}
	return nil
}

// Start preflights the spec and the owner, calls Run on the caller's goroutine, then
// commits under the lock, allocating the id, and starts the task's watcher goroutine.
func (r *MutexRegistry) Start(ctx context.Context, s messages.Spec) (messages.TaskID, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", messages.ErrAborted, err)
	}
	if s.Run == nil || !messages.KindPattern().MatchString(s.Kind) || strings.TrimSpace(s.Label) == "" {
		return "", fmt.Errorf("%w: kind %q, label %q", messages.ErrInvalidSpec, s.Kind, s.Label)
	}
	r.mu.Lock()
	err := r.admit(s.Owner)
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	hooks, err := runContained(s.Run)
	if err != nil {
		return "", fmt.Errorf("start %s task: %w", s.Kind, err)
	}
	if hooks.Done == nil || hooks.Cancel == nil {
		return "", fmt.Errorf("%w: Run returned hooks without Done or Cancel", messages.ErrInvalidSpec)
	}
	r.mu.Lock()
	if err := r.admit(s.Owner); err != nil {
		// The owner went away while Run ran: stop the work and drop it.
		r.watchers.Add(1)
		r.mu.Unlock()
		_ = cancelContained(hooks.Cancel, "start aborted")
		go func() { defer r.watchers.Done(); <-hooks.Done }()
		return "", err
	}
	r.counters[s.Kind]++
	id := messages.TaskID(s.Kind + "-" + strconv.Itoa(r.counters[s.Kind]))
	t := &mutexTask{
		snap: messages.Snapshot{ID: id, Kind: s.Kind, Label: s.Label, Owner: s.Owner,
			Status: messages.Running, Started: time.Now()},
		hooks:   hooks,
		settled: make(chan struct{}),
	}
	r.tasks[id] = t
	if s.Owner == "" {
		r.unowned = append(r.unowned, id)
	} else {
		o := r.owners[s.Owner]
		o.tasks = append(o.tasks, id)
	}
	r.watchers.Add(1)
	r.mu.Unlock()
	go r.watch(t)
	return id, nil
}

// watch is a task's goroutine: it waits for Done and settles the task.
func (r *MutexRegistry) watch(t *mutexTask) {
	defer r.watchers.Done()
	o, ok := <-t.hooks.Done
	switch {
	case !ok:
		o = messages.Outcome{Status: messages.Failed, Detail: "producer contract violation: Done closed without an outcome"}
	case !o.Status.Terminal():
		o = messages.Outcome{Status: messages.Failed, Detail: fmt.Sprintf("producer contract violation: outcome status %q is not terminal", o.Status)}
	}
	r.settle(t, o)
}

// settle records the first terminal outcome and wakes the waiters.
func (r *MutexRegistry) settle(t *mutexTask, o messages.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.snap.Status.Terminal() {
		return
	}
	t.snap.Status, t.snap.Detail, t.snap.Finished = o.Status, o.Detail, time.Now()
	if t.hooks.ReadOutput == nil {
		t.output = o.Output
	}
	close(t.settled)
}

// lookup applies the owner fence. Called with r.mu held.
func (r *MutexRegistry) lookup(id messages.TaskID, caller messages.AgentID) (*mutexTask, error) {
	t, ok := r.tasks[id]
	if !ok || (t.snap.Owner != "" && t.snap.Owner != caller) {
		return nil, fmt.Errorf("%w: %s", messages.ErrTaskNotFound, id)
	}
	return t, nil
}

// Get returns a task's snapshot.
func (r *MutexRegistry) Get(_ context.Context, id messages.TaskID, caller messages.AgentID) (messages.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.lookup(id, caller)
	if err != nil {
		return messages.Snapshot{}, err
	}
	return t.snap, nil
}

// Read returns the output since the previous read (stream kinds) or the final output
// once terminal (final kinds), with the snapshot. The snapshot is taken first: a
// terminal snapshot means the producer wrote everything before Done, so the read
// that follows returns all of it.
func (r *MutexRegistry) Read(_ context.Context, id messages.TaskID, caller messages.AgentID) (messages.ReadResult, error) {
	r.mu.Lock()
	t, err := r.lookup(id, caller)
	if err != nil {
		r.mu.Unlock()
		return messages.ReadResult{}, err
	}
	if t.snap.Status.Terminal() {
		t.snap.Reported = true
	}
	res := messages.ReadResult{Snapshot: t.snap}
	if t.hooks.ReadOutput == nil && t.snap.Status.Terminal() {
		res.Output = t.output
	}
	r.mu.Unlock()
	if t.hooks.ReadOutput != nil {
		t.readMu.Lock()
		out, err := readContained(t.hooks.ReadOutput)
		t.readMu.Unlock()
		if err != nil {
			return messages.ReadResult{}, fmt.Errorf("read output of task %s: %w", id, err)
		}
		res.Output = out
	}
	return res, nil
}

// Kill calls the producer's Cancel with reason (outside the lock, so that a Cancel
// may call back into the registry) and marks the task stopping and reported. A Cancel
// that fails leaves the task untouched.
func (r *MutexRegistry) Kill(_ context.Context, id messages.TaskID, caller messages.AgentID, reason string) (messages.KillResult, error) {
	r.mu.Lock()
	t, err := r.lookup(id, caller)
	if err != nil {
		r.mu.Unlock()
		return "", err
	}
	if t.snap.Status.Terminal() {
		r.mu.Unlock()
		return messages.KillAlreadyTerminal, nil
	}
	r.mu.Unlock()
	if err := cancelContained(t.hooks.Cancel, reason); err != nil {
		return "", fmt.Errorf("%w for task %s: %w", messages.ErrCancelFailed, id, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.snap.Status.Terminal() {
		return messages.KillAlreadyTerminal, nil
	}
	t.snap.Status, t.snap.Reported = messages.Stopping, true
	return messages.KillRequested, nil
}

// Wait blocks until the task settles (returning the terminal snapshot, now reported),
// the timeout passes (returning the running snapshot and no error) or ctx ends
// (returning the current snapshot and ctx's error, unless the task had settled).
func (r *MutexRegistry) Wait(ctx context.Context, id messages.TaskID, caller messages.AgentID, timeout time.Duration) (messages.Snapshot, error) {
	if timeout <= 0 {
		return messages.Snapshot{}, fmt.Errorf("%w: invalid wait timeout %s: it must be positive", messages.ErrInvalidArgument, timeout)
	}
	r.mu.Lock()
	t, err := r.lookup(id, caller)
	r.mu.Unlock()
	if err != nil {
		return messages.Snapshot{}, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case <-t.settled:
	case <-timer.C:
	case <-ctx.Done():
		cause = ctx.Err()
	}
	s := r.current(t)
	if s.Status.Terminal() {
		return s, nil
	}
	return s, cause
}

// current returns the task's snapshot, marking it reported if terminal.
func (r *MutexRegistry) current(t *mutexTask) messages.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.snap.Status.Terminal() {
		t.snap.Reported = true
	}
	return t.snap
}

func (r *MutexRegistry) waitRegistered(_ context.Context, id messages.TaskID, caller messages.AgentID) (func() (messages.Snapshot, error), error) {
	r.mu.Lock()
	t, err := r.lookup(id, caller)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func() (messages.Snapshot, error) {
		<-t.settled
		return r.current(t), nil
	}, nil
}

// Dispose refuses new starts for the owner, cancels its live tasks with reason "owner
// disposed" (a Cancel that fails force-fails its task), waits until each settled,
// disposes its child owners, then drops its tasks and unregisters it. Concurrent
// calls for one owner all wait for the same disposal.
func (r *MutexRegistry) Dispose(ctx context.Context, id messages.AgentID) error {
	return r.dispose(ctx, id, "owner disposed")
}

func (r *MutexRegistry) dispose(ctx context.Context, id messages.AgentID, reason string) error {
	r.mu.Lock()
	o, ok := r.owners[id]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, id)
	}
	if o.disposing {
		r.mu.Unlock()
		<-o.gone
		return nil
	}
	o.disposing = true
	ids := append([]messages.TaskID(nil), o.tasks...)
	r.mu.Unlock()

	r.teardown(ids, reason)
	r.mu.Lock()
	children := make([]messages.AgentID, 0, len(o.children))
	for c := range o.children {
		children = append(children, c)
	}
	r.mu.Unlock()
	for _, c := range children {
		_ = r.dispose(ctx, c, reason) // a child disposed meanwhile is not an error
	}

	r.mu.Lock()
	for _, tid := range o.tasks {
		delete(r.tasks, tid)
	}
	delete(r.owners, id)
	if p, ok := r.owners[o.parent]; ok {
		delete(p.children, id)
	}
	close(o.gone)
	r.mu.Unlock()
	return nil
}

// teardown cancels every live task of ids and waits until all have settled.
func (r *MutexRegistry) teardown(ids []messages.TaskID, reason string) {
	var live []*mutexTask
	r.mu.Lock()
	for _, tid := range ids {
		if t := r.tasks[tid]; t != nil && !t.snap.Status.Terminal() {
			t.snap.Reported = true // no notice goes to a dying owner
			live = append(live, t)
		}
	}
	r.mu.Unlock()
	for _, t := range live {
		if err := cancelContained(t.hooks.Cancel, reason); err != nil {
			r.settle(t, messages.Outcome{Status: messages.Failed,
				Detail: fmt.Sprintf("cancel threw during teardown; work may be orphaned: %v", err)})
			continue
		}
		r.mu.Lock()
		if t.snap.Status == messages.Running {
			t.snap.Status = messages.Stopping
		}
		r.mu.Unlock()
	}
	for _, t := range live {
		<-t.settled
	}
}

// Close disposes every owner, cancels and awaits every unowned task, and waits for
// every watcher goroutine. Afterwards every Start fails with ErrClosed.
func (r *MutexRegistry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	var top []messages.AgentID
	for id, o := range r.owners {
		if o.parent == "" {
			top = append(top, id)
		}
	}
	unowned := r.unowned
	r.unowned = nil
	r.mu.Unlock()
	for _, id := range top {
		_ = r.dispose(ctx, id, "runtime closed")
	}
	r.teardown(unowned, "runtime closed")
	r.mu.Lock()
	for _, id := range unowned {
		delete(r.tasks, id)
	}
	r.mu.Unlock()
	r.watchers.Wait()
	return nil
}

// Live counts the tasks not yet terminal.
func (r *MutexRegistry) Live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.tasks {
		if !t.snap.Status.Terminal() {
			n++
		}
	}
	return n
}

func runContained(run func() (messages.Hooks, error)) (messages.Hooks, error) {
	return contain.Value("run", run)
}

func cancelContained(cancel func(string) error, reason string) error {
	return contain.Call("cancel", func() error { return cancel(reason) })
}

func readContained(read func() string) (string, error) {
	return contain.Value("producer", func() (string, error) { return read(), nil })
}
