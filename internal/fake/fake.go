package fake

import (
	"errors"
	"strings"
	"sync"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// Task is one piece of fake work. Its zero value is not usable; call New.
type Task struct {
	// Cancels receives every Cancel reason, in order (buffered: 64).
	Cancels chan string
	// Released is closed when the runtime calls Release.
	Released chan struct{}
	// Inputs receives every Input write, in order (buffered: 1024), for a task made
	// interactive with Interactive.
	Inputs chan Input

	stream bool
	done   chan messages.Outcome

	mu        sync.Mutex // protects everything below
	text      strings.Builder
	runs      int
	cancelErr error
	panics    bool
	hold      bool
	input     bool           // Hooks include Input
	buf       *output.Buffer // when set, Hooks include it as Output and Emit writes to it
	progress  *output.Buffer // when set, Hooks include it as Progress (a final-output kind)
	gate      chan struct{}  // when set, Input blocks until it is closed or the work settles
	settled   chan struct{}  // closed when an outcome is delivered
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
		Inputs:   make(chan Input, 1024),
		settled:  make(chan struct{}),
	}
}

// Input is one write to an interactive fake task.
type Input struct {
	Data string
	EOF  bool
}

// Buffered makes the task's output an output.Buffer handed to the runtime as
// Hooks.Output (reads up to a pattern, observer reads, output events) instead of a
// plain ReadOutput; Emit writes to it. Call it before the task starts.
func (t *Task) Buffered(opts ...output.Option) *output.Buffer {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = output.New(opts...)
	return t.buf
}

// WithProgress gives a final-output task (New(false)) a progress stream
// (Hooks.Progress) and returns it: write to it to report how the work is going.
func (t *Task) WithProgress() *output.Buffer {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.progress = output.New()
	return t.progress
}

// Interactive gives the task an Input hook: every write is sent to Inputs. Call it
// before the task starts.
func (t *Task) Interactive() {
	t.mu.Lock()
	t.input = true
	t.mu.Unlock()
}

// BlockInput makes Input block, like a write to a full pipe, until UnblockInput or
// until the work settles (then it fails, as a write to a dead process does).
func (t *Task) BlockInput() {
	t.mu.Lock()
	t.gate = make(chan struct{})
	t.mu.Unlock()
}

// UnblockInput lets blocked and later writes through.
func (t *Task) UnblockInput() {
	t.mu.Lock()
	if t.gate != nil {
		close(t.gate)
		t.gate = nil
	}
	t.mu.Unlock()
}

// ErrBrokenPipe is what Input returns once the work has settled.
var ErrBrokenPipe = errors.New("write |1: broken pipe")

func (t *Task) write(data []byte, eof bool) error {
	t.mu.Lock()
	gate := t.gate
	t.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-t.settled:
		}
	}
	select {
	case <-t.settled:
		return ErrBrokenPipe
	default:
	}
	t.Inputs <- Input{Data: string(data), EOF: eof}
	return nil
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
	t.mu.Lock()
	if t.input {
		h.Input = t.write
	}
	buf, progress := t.buf, t.progress
	t.mu.Unlock()
	if progress != nil {
		h.Progress = progress
		h.Release = func() { progress.Release(); t.relOnce.Do(func() { close(t.Released) }) }
	}
	if buf != nil {
		h.Output = buf
		h.Release = func() { buf.Release(); t.relOnce.Do(func() { close(t.Released) }) }
		return h
	}
	if t.stream {
		h.ReadOutput = func() string {
			t.mu.Lock()
			defer t.mu.Unlock()
			s := t.text.String()
			t.text.Reset()
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
	buf := t.buf
	if buf == nil {
		t.text.WriteString(s)
	}
	t.mu.Unlock()
	if buf != nil {
		_, _ = buf.WriteString(s)
	}
}

// Finish settles the work with o. Only the first call (or the first cancellation)
// delivers an outcome.
func (t *Task) Finish(o messages.Outcome) {
	t.once.Do(func() {
		t.mu.Lock()
		buf := t.buf
		t.mu.Unlock()
		if buf != nil {
			_ = buf.Close()
		}
		t.done <- o
		close(t.settled)
	})
}

// CloseDone closes Done without an outcome: a producer contract violation.
func (t *Task) CloseDone() { t.once.Do(func() { close(t.done); close(t.settled) }) }

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
		t.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"})
	}
	return nil
}
