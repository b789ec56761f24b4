package messages

import (
	"regexp"
	"time"
)

// TaskID names a background task: "<kind>-N", with one counter per kind starting at 1
// ("bash-1", "bash-2", "subagent-1"). Ids are predictable; the owner fence, not the id,
// is the access boundary.
type TaskID string

// AgentID names an owning agent session. The empty AgentID means "no agent": as a
// task's owner it makes the task unowned (open to every caller, dying with the runtime);
// as a caller it can reach only unowned tasks.
type AgentID string

// Status is a task's lifecycle state. The set is closed; kind-specific meaning rides
// in Snapshot.Detail.
type Status string

// The task statuses. See the package documentation for the transitions.
const (
	Queued    Status = "queued"    // waiting for a slot (actors.WithQueue); its work has not started
	Running   Status = "running"   // the producer's work is live
	Stopping  Status = "stopping"  // cancel requested and accepted, Done not yet settled
	Completed Status = "completed" // the work ended on its own
	Killed    Status = "killed"    // the work ended because it was cancelled
	Failed    Status = "failed"    // the work, or the producer, failed
)

// Terminal reports whether s is one of the three settled statuses.
func (s Status) Terminal() bool {
	return s == Completed || s == Killed || s == Failed
}

// Outcome is what a producer's Done channel delivers, once, at quiescence.
type Outcome struct {
	// Status must be Completed, Killed or Failed; anything else is recorded as a
	// producer contract violation (the task becomes Failed).
	Status Status
	// Detail is rendered into the status line: "exit code: 0", "signal: SIGTERM",
	// "max-tokens".
	Detail string
	// Output is the final output of a final-output-only kind (Hooks.ReadOutput nil).
	// Stream kinds leave it empty; it is ignored for them.
	Output string
}

// Hooks is what a producer's Spec.Run hands back: the handles the runtime needs to
// observe, read and stop the work it started. The runtime never learns what the work
// is.
type Hooks struct {
	// Cancel requests termination. It must be idempotent, must not block for long,
	// and must lead to Done settling. The reason is the kill's reason ("owner
	// disposed", "runtime closed", or what the model gave task_kill). An error means
	// the request could not be made ("cancel threw"): the task is left untouched.
	// Required.
	Cancel func(reason string) error
	// Done delivers exactly one Outcome, at quiescence: after the producer released
	// every resource of the work (processes reaped, child agents disposed). Closing
	// it without a value is a contract violation the runtime records as a failure.
	// Required.
	Done <-chan Outcome
	// ReadOutput, when set, makes the task a stream kind: each call returns the
	// output produced since the previous call (a consuming delta read), formatted by
	// the producer. It must not block. Nil makes the task a final-output-only kind
	// whose output is Outcome.Output.
	ReadOutput func() string
	// Output, when set, makes the task a stream kind whose output the runtime reads
	// as an offset-keyed byte stream (producers/output.Buffer implements it): besides
	// consuming reads it then offers reads up to a pattern, observer reads by offset
	// that never move the model's cursor, and output events. It takes precedence over
	// ReadOutput. Optional.
	Output Output
	// Progress, when set on a final-output kind (no Output, no ReadOutput), is where
	// the work reports how it is going — a sub-agent's tool calls and its answer so far.
	// While the task runs, a read returns the progress since the previous read (a
	// consuming delta, so task_output shows where the work is); once it settled, a read
	// returns Outcome.Output, idempotently, as for any final-output kind. Observer
	// reads, reads up to a pattern and output events use it. Optional.
	Progress Output
	// Input, when set, makes the task interactive: it writes data to the work's
	// input (a process's stdin) and, with eof, closes it afterwards. The runtime calls
	// it off every mailbox, one call at a time per task and in the order the inputs
	// arrived, so it may block (a full pipe); it must return once the work has ended.
	// An error after the work ended is reported as ErrTaskEnded. Optional.
	Input func(data []byte, eof bool) error
	// Release, when set, is called once when the runtime drops the task's full
	// record (the task was evicted by retention, its owner was disposed, or the
	// runtime closed), after Done settled and every Cancel call returned. Producers
	// free what must outlive settlement for reads, such as a spill file. Optional.
	Release func()
	// Ref is the producer's name for the work (a remote command's key), kept in
	// Snapshot.Ref so that an embedder can find the work again. Optional.
	Ref string
}

// Output is a stream kind's output as the runtime reads it (Hooks.Output). The
// producer appends to it; the runtime calls the methods below from the task's actor,
// one at a time, so they must not block (reading a spill file is fine).
type Output interface {
	// Read returns the output since the previous Read or ReadMatch (a consuming
	// delta), formatted for a model.
	Read() string
	// ReadMatch looks for re in the unread output the producer still holds in
	// memory. On a match it consumes and returns, formatted as Read, the output up to
	// the end of the line that matched, and the matched text; otherwise it consumes
	// nothing and ok is false.
	ReadMatch(re *regexp.Regexp) (out, match string, ok bool)
	// Peek returns up to maxBytes raw bytes from offset off on without consuming anything:
	// next is the offset after them, missed how many bytes from off on are no longer
	// held and were skipped.
	Peek(off int64, maxBytes int) (data []byte, next, missed int64)
	// Written is how many bytes the work has written so far.
	Written() int64
	// OnGrow sets the function to call, from the writer's goroutine, after the
	// output grew (and when it was closed). It must not block.
	OnGrow(func())
}

// Spec declares a task to start. The runtime preflights everything that can fail,
// then calls Run exactly once, then commits; Run is never called when a preflight
// check fails or the start's context is already done.
type Spec struct {
	Kind  string  // id prefix and producer kind; must match KindPattern
	Label string  // one-line model-facing label (the command, the description); non-empty
	Owner AgentID // the spawning agent; "" = unowned
	// Key, when set, makes the start idempotent: a start whose Key matches a task of
	// the same owner that is running, stopping, or settled and still retained (not
	// evicted) starts nothing, calls no Run, and returns that task's id with an error
	// wrapping ErrDuplicate. A start with the same Key still in flight is answered
	// once it resolves (its id, or — if it failed — a start of its own). At most
	// MaxKey bytes. Optional.
	Key string
	// Run starts the work and returns its hooks. An error (or a panic) means nothing
	// was started: the start fails, no id is burned and nothing is recorded.
	Run func() (Hooks, error)
}

// MaxKey is the longest Spec.Key, in bytes.
const MaxKey = 256

// KindPattern is the shape of a valid Spec.Kind, `^[a-z][a-z0-9_-]*$`. It is a
// function so that nobody can replace the pattern the runtime checks starts with;
// the Regexp is shared: use it, do not change it (Longest).
func KindPattern() *regexp.Regexp { return kindPattern }

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Snapshot is the read-only projection of a task.
type Snapshot struct {
	ID       TaskID
	Kind     string
	Label    string
	Owner    AgentID
	Status   Status
	Detail   string
	Started  time.Time
	Finished time.Time // zero until terminal
	// Reported is true once the model has seen the task's end: it killed the task,
	// or a read or wait returned its terminal state, or teardown ended it. A
	// reported task gets no completion notice.
	Reported bool
	// Evicted is true for a tombstone: a settled task whose record the runtime no
	// longer keeps in full (retention keeps the most recently settled tasks of each
	// owner). A tombstone answers every call from this snapshot; its output is gone.
	Evicted bool
	// OutputFull is true while a running task's work waits for its owner to read:
	// its output is in block mode (bash.Command.BlockOutput) and a read's worth of it
	// is unread. A read clears it; waits and reads up to a pattern do not wait
	// through it (they return at once, since nothing can happen until a read).
	OutputFull bool
	// Ref is the producer's name for the work (Hooks.Ref); "" for none, and
	// while a queued task has not started.
	Ref string
}

// ReadResult is what a read returns: the output (a delta for stream kinds, the final
// output once terminal for final kinds) and the snapshot taken with it.
type ReadResult struct {
	Output   string
	Snapshot Snapshot
}

// KillResult says what a kill did.
type KillResult string

// The kill results.
const (
	KillRequested       KillResult = "requested"        // Cancel accepted; status is now stopping
	KillAlreadyTerminal KillResult = "already-terminal" // the task had already settled
)

// UntilReason says why a read up to a pattern returned.
type UntilReason string

// The reasons a read up to a pattern returns.
const (
	UntilMatched  UntilReason = "matched" // the output contains a match
	UntilEnded    UntilReason = "ended"   // the task settled first
	UntilTimedOut UntilReason = "timeout" // the timeout passed first
	// UntilFull: the task's output filled (Snapshot.OutputFull) with no match; the
	// unread output is consumed and returned so the work goes on, and the caller may
	// read up to the pattern again.
	UntilFull UntilReason = "output-full"
)

// UntilResult is what a read up to a pattern returns: the output it consumed (up to
// the end of the line that matched, or everything new when the task ended or the
// timeout passed), the snapshot, why it returned, and the matched text.
type UntilResult struct {
	ReadResult
	Reason UntilReason
	Match  string
}

// PeekResult is an observer read: raw output bytes from an offset on, read without
// moving the consuming cursor. Next is the offset after Data; Missed counts the bytes
// from the requested offset on that are no longer held and were skipped. A tombstone
// has no output: Data is empty and Snapshot.Evicted is set.
type PeekResult struct {
	Data     []byte
	Next     int64
	Missed   int64
	Written  int64 // the output's size now (0 for a tombstone)
	Snapshot Snapshot
}

// EventKind names what an Event reports.
type EventKind string

// The event kinds, in the order a task's events come: started, output and
// output-full (any number), stopping (when cancelled), settled, evicted. Overflow
// is the subscription's own.
const (
	EventAgentRegistered EventKind = "agent-registered"
	EventAgentDisposed   EventKind = "agent-disposed"
	EventTaskQueued      EventKind = "task-queued" // started at the cap and queued (actors.WithQueue); task-started follows when it runs
	EventTaskStarted     EventKind = "task-started"
	EventTaskOutput      EventKind = "task-output"   // the task's output grew; Bytes is its size now
	EventTaskStopping    EventKind = "task-stopping" // cancelled (killed or torn down), not yet settled
	// EventTaskOutputFull: Task.OutputFull changed — the task's work now waits for a
	// read, or goes on again after one.
	EventTaskOutputFull EventKind = "task-output-full"
	EventTaskSettled    EventKind = "task-settled"
	EventTaskEvicted    EventKind = "task-evicted" // retention dropped its record; a tombstone remains
	// EventOverflow says the subscriber was too slow: Missed events were dropped for
	// it (never for anyone else, and never blocking the runtime). Resynchronise with
	// List.
	EventOverflow EventKind = "overflow"
)

// Event is one thing that happened in the runtime, as a subscription delivers it.
// Events of one task come in the order they happened.
type Event struct {
	Kind EventKind
	Time time.Time
	// Agent is the agent an agent event is about, or the owner of a task event's task
	// ("" = unowned).
	Agent AgentID
	// Parent is a registered agent's parent (agent-registered).
	Parent AgentID
	// Task is the task's snapshot at the event (task events).
	Task Snapshot
	// Bytes is how many bytes the task's output holds in all (task-output; and
	// task-settled, for a task with an output stream).
	Bytes int64
	// Missed counts the events dropped before this one (overflow).
	Missed int
}
