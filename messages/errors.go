package messages

import (
	"errors"
	"fmt"
)

// Sentinel errors. Check them with errors.Is: the runtime wraps them with the
// specifics (the id, the limit, the producer's error). They state facts; advice meant
// for a model (which tool to call next) is added by package tools.
var (
	// ErrTaskNotFound is returned for an unknown id and, with the same text, for a
	// task the caller may not reach; the two are indistinguishable by design.
	ErrTaskNotFound = errors.New("task not found")
	// ErrNoSurface is returned by Start while no control surface is attached.
	ErrNoSurface = errors.New("background tasks unavailable: no control surface is attached")
	// ErrInvalidSpec is returned by Start for a malformed Spec or Hooks.
	ErrInvalidSpec = errors.New("invalid task spec")
	// ErrInvalidArgument is returned for a malformed argument such as a
	// non-positive wait timeout, or a request sent by value instead of by pointer.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrOwnerUnknown is returned when the named agent is not registered or is
	// being disposed.
	ErrOwnerUnknown = errors.New("owner agent unknown or disposing")
	// ErrOwnerLimit is returned by Start when the owner already holds its cap of
	// running and stopping tasks. The error is a *LimitError.
	ErrOwnerLimit = errors.New("background task limit reached")
	// ErrClosed is returned by every call once the runtime is closed (or closing,
	// for calls that would start something).
	ErrClosed = errors.New("task runtime closed")
	// ErrCancelFailed is returned by Kill when the producer's Cancel returned an
	// error or panicked; it wraps that error. The task is left untouched.
	ErrCancelFailed = errors.New("cancel failed")
	// ErrAborted is returned by Start when its context was done before the work
	// was started; it wraps the context's error.
	ErrAborted = errors.New("start aborted")
	// ErrAgentExists is returned by Register for an id that is already registered.
	ErrAgentExists = errors.New("agent already registered")
	// ErrNoInput is returned by Input for a task whose producer takes no input.
	ErrNoInput = errors.New("task takes no input")
	// ErrInputClosed is returned by Input once the task's input was closed (eof).
	ErrInputClosed = errors.New("task input already closed")
	// ErrNoOutputStream is returned by ReadUntil and Peek for a task whose producer
	// gives no output stream (Hooks.Output): a final-output kind, or a stream kind
	// that only has ReadOutput.
	ErrNoOutputStream = errors.New("task has no output stream")
	// ErrTaskEnded is returned by Input for a task that has finished (or is being
	// stopped): its input goes nowhere. The error names the task's status.
	ErrTaskEnded = errors.New("task has ended")
	// ErrDuplicate is returned by Start, with the id of the task already started,
	// when the Spec's Key names a task of the same owner that is live or still
	// retained (see Spec.Key): nothing was started.
	ErrDuplicate = errors.New("duplicate start")
	// ErrWatchLimit is returned by Watch when the task's owner already has its
	// bound of live watches.
	ErrWatchLimit = errors.New("watch limit reached")
)

// MaxInput is the most bytes one Input call may carry.
const MaxInput = 64 << 10

// LimitError is the error Start returns when the owner (or the unowned bucket)
// already holds its cap of live tasks: running ones, stopping ones (cancelled, not yet
// settled — each holds its slot until it settles) and starts in flight.
// errors.Is(err, ErrOwnerLimit) reports true for it.
type LimitError struct {
	Limit    int  // the cap
	Stopping int  // how many of the slots are held by stopping tasks
	Global   bool // the cap is the runtime's, across all owners (actors.WithGlobalLimit)
	Queue    int  // the owner's queue bound, when the queue is on and full (actors.WithQueue)
}

// Error names the limit, and the stopping tasks when there are any:
// "background task limit reached for this owner (limit: 10)", "background task
// limit reached across all owners (limit: 2); the queue is full (queue: 3)".
func (e *LimitError) Error() string {
	scope := "for this owner"
	if e.Global {
		scope = "across all owners"
	}
	s := fmt.Sprintf("%s %s (limit: %d)", ErrOwnerLimit, scope, e.Limit)
	if e.Stopping > 0 {
		s = fmt.Sprintf("%s %s (limit: %d; %d stopping)", ErrOwnerLimit, scope, e.Limit, e.Stopping)
	}
	if e.Queue > 0 {
		s += fmt.Sprintf("; the queue is full (queue: %d)", e.Queue)
	}
	return s
}

// Is makes errors.Is(err, ErrOwnerLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrOwnerLimit }
