package fake

import (
	"strings"
	"sync"

	"github.com/taskrt/taskrt/messages"
)

// Task is one piece of fake work. Its zero value is not usable; call New.
type Task struct {
	// Cancels receives every Cancel reason, in order (buffered: 64).
	Cancels chan string
	// Released is closed when the runtime calls Release.
	Released chan struct{}

	stream bool
	done   chan messages.Outcome

	mu        sync.Mutex // protects everything below
	buf       strings.Builder
	runs      int
	cancelErr error
	panics    bool
	hold      bool
	once      sync.Once
	relOnce   sync.Once
}

// New returns fake work. A stream task has a consuming ReadOutput that returns what
// Emit added since the previous read; a final-output task (stream false) has none and
// reports Outcome.Output once settled.
func New(stream bool) *Task {
	return &Task{
		Cancels:  make(chan string, 64),
		Released: make(chan struct{}),
		stream:   stream,
		done:     make(chan messages.Outcome, 1),
	}
}

// Spec returns a Spec whose Run hands out the task's hooks.
func (t *Task) Spec(kind, label string, owner messages.AgentID) messages.Spec {
	return messages.Spec{Kind: kind, Label: label, Owner: owner, Run: func() (messages.Hooks, error) {
		t.mu.Lock()
		t.runs++
		t.mu.Unlock()
		return t.Hooks(), nil
	}}
}

// Hooks returns the producer hooks: Cancel, Done, Release, and ReadOutput for a stream
// task.
func (t *Task) Hooks() messages.Hooks {
	h := messages.Hooks{
		Cancel:  t.cancel,
		Done:    t.done,
		Release: func() { t.relOnce.Do(func() { close(t.Released) }) },
	}
	if t.stream {
		h.ReadOutput = func() string {
			t.mu.Lock()
			defer t.mu.Unlock()
			s := t.buf.String()
			t.buf.Reset()
			return s
		}
	}
	return h
}

// Runs reports how many times a Spec's Run was called.
func (t *Task) Runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

// Emit appends output for the next read.
func (t *Task) Emit(s string) {
	t.mu.Lock()
	t.buf.WriteString(s)
	t.mu.Unlock()
}

// Finish settles the work with o. Only the first call (or the first cancellation)
// delivers an outcome.
func (t *Task) Finish(o messages.Outcome) { t.once.Do(func() { t.done <- o }) }

// CloseDone closes Done without an outcome: a producer contract violation.
func (t *Task) CloseDone() { t.once.Do(func() { close(t.done) }) }

// FailCancel makes every later Cancel return err (nil: succeed again).
func (t *Task) FailCancel(err error) {
	t.mu.Lock()
	t.cancelErr = err
	t.mu.Unlock()
}

// PanicOnCancel makes every later Cancel panic.
func (t *Task) PanicOnCancel() {
	t.mu.Lock()
	t.panics = true
	t.mu.Unlock()
}

// HoldCancel makes every later Cancel succeed without settling the work, so a
// cancelled task stays stopping until Finish.
func (t *Task) HoldCancel() {
	t.mu.Lock()
	t.hold = true
	t.mu.Unlock()
}

func (t *Task) cancel(reason string) error {
	t.Cancels <- reason
	t.mu.Lock()
	err, panics, hold := t.cancelErr, t.panics, t.hold
	t.mu.Unlock()
	switch {
	case panics:
		panic("cancel exploded")
	case err != nil:
		return err
	case !hold:
		t.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM", Output: "partial"})
	}
	return nil
}
