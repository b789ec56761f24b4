package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The task tools' names.
const (
	TaskOutputName = "task_output"
	TaskListName   = "task_list"
	TaskKillName   = "task_kill"
)

// Defaults of the task_output wait.
const (
	defaultWaitTimeout = 30 * time.Second
	defaultMaxWait     = 600 * time.Second
)

// surfaceName is the name under which TaskTools attaches its control surface.
const surfaceName = "task tools"

// TaskTools is the control surface of a runtime: the task_output, task_list and
// task_kill tools, and the completion-notice path into the owning agents' sessions.
//
// Constructing it attaches the surface (so Tasks.Start works) and subscribes the
// notice listener; Close undoes both. Use one TaskTools per runtime: two would inject
// every notice twice.
type TaskTools struct {
	rt  *actors.Runtime
	cfg taskConfig

	output, list, kill, wait, input, watch Tool
	outputArgs                             *argSpec // task_output's, stating the configured wait bounds
	waitArgs                               *argSpec // task_wait's, likewise
	watchArgs                              *argSpec // task_watch's

	// ctx bounds the notice listener's runtime calls and injections; Close cancels it
	// so that a stuck injector cannot hold Close forever.
	ctx    context.Context
	cancel context.CancelFunc

	detach      func() // the surface
	unsubscribe func() // the notice listener
	closeOnce   sync.Once

	mu     sync.Mutex     // protects closed and the Add side of active
	closed bool           // Close began: the listener does nothing more
	active sync.WaitGroup // listener calls in progress; Close waits for them

	notices noticeCounters
	calls   inflight // task_output calls under way

	outputCallHook func(messages.TaskID) // tests only: a task_output call is under way
	afterWaitHook  func(messages.TaskID) // tests only: a task_output wait returned, the read is next
}

type taskConfig struct {
	waitTimeout time.Duration
	maxWait     time.Duration
	inputWait   time.Duration
}

// TaskOption configures TaskTools. Options are made by the With… functions below;
// a zero or negative duration keeps the default.
type TaskOption interface{ apply(*taskConfig) }

type taskOptionFunc func(*taskConfig)

func (f taskOptionFunc) apply(c *taskConfig) { f(c) }

// WithWaitTimeout sets how long task_output with wait: true blocks when the call gives
// no timeout_ms. Values <= 0 keep the default, 30 s; a value above the
// maximum wait is lowered to it.
func WithWaitTimeout(d time.Duration) TaskOption {
	return taskOptionFunc(func(c *taskConfig) {
		if d > 0 {
			c.waitTimeout = d
		}
	})
}

// WithMaxWait caps how long one task_output call may block; a larger timeout_ms is
// clamped, and the response says so. Values <= 0 keep the default, 600 s.
func WithMaxWait(d time.Duration) TaskOption {
	return taskOptionFunc(func(c *taskConfig) {
		if d > 0 {
			c.maxWait = d
		}
	})
}

// WithInputWait sets how long task_input waits for the task's first output after a
// write (default 1 s); values <= 0 keep the default.
func WithInputWait(d time.Duration) TaskOption {
	return taskOptionFunc(func(c *taskConfig) {
		if d > 0 {
			c.inputWait = d
		}
	})
}

// NewTaskTools attaches the task tools to rt as its control surface
// (Tasks.AttachSurface(surfaceName)) and subscribes the completion-notice injector
// (Tasks.OnDone). Call Close to detach both; closing the runtime also ends them.
func NewTaskTools(rt *actors.Runtime, opts ...TaskOption) *TaskTools {
	cfg := taskConfig{waitTimeout: defaultWaitTimeout, maxWait: defaultMaxWait, inputWait: defaultInputWait}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.waitTimeout > cfg.maxWait {
		cfg.waitTimeout = cfg.maxWait
	}
	t := &TaskTools{rt: rt, cfg: cfg}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.outputArgs = newArgSpec[outputArgs](minLength("task_id", 1), minimum("timeout_ms", 1),
		describe("timeout_ms", fmt.Sprintf(timeoutMSDescription, cfg.waitTimeout.Milliseconds(), cfg.maxWait.Milliseconds())))
	t.output = &simpleTool{name: TaskOutputName, desc: taskOutputDescription, args: t.outputArgs, call: t.callOutput}
	t.list = &simpleTool{name: TaskListName, desc: taskListDescription, args: listSpec, call: t.callList}
	t.kill = &simpleTool{name: TaskKillName, desc: taskKillDescription, args: killSpec, call: t.callKill}
	t.wait = t.newWaitTool()
	t.input = t.newInputTool()
	t.watch = t.newWatchTool()
	t.detach = rt.Tasks().AttachSurface(surfaceName)
	t.unsubscribe = rt.Tasks().OnDone(t.onDone)
	return t
}

// Tools returns task_output, task_list, task_kill, task_wait, task_input and
// task_watch, in that order.
func (t *TaskTools) Tools() []Tool { return []Tool{t.output, t.list, t.kill, t.wait, t.input, t.watch} }

// Close removes the notice injector's listener, waiting for a notice in flight (whose
// context it cancels), and detaches the surface, after which Tasks.Start fails unless
// another surface is attached. Tasks already running are untouched. Close is
// idempotent. Do not call it from an injector: it would wait for itself.
func (t *TaskTools) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.cancel()
		t.unsubscribe()
		// The runtime's unsubscribe promises only that no call starts after it; wait
		// for one that is still running, so that nothing is injected or counted after
		// Close returns.
		t.active.Wait()
		t.detach()
	})
}

// ---- task_output ----

// outputArgs are the arguments of task_output.
type outputArgs struct {
	TaskID    string `json:"task_id" jsonschema:"The id of the background task, as returned when it was started (for example bash-1)."`
	Wait      bool   `json:"wait,omitempty" jsonschema:"Block until the task finishes or timeout_ms passes. Default false: return at once with what is available."`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"With wait: the longest to block, in milliseconds. A wait that times out is not an error: the task keeps running."`
	Until     string `json:"until,omitempty" jsonschema:"A regular expression (RE2 syntax). Waits (wait is implied) until a line of the task's new output matches, then returns the output up to the end of that line; the rest stays for your next read. It also returns when the task ends or timeout_ms passes. Use it to wait for readiness, e.g. listening on."`
}

const taskOutputDescription = "Read the output of a background task started with run_in_background. " +
	"Non-blocking by default: a streaming task (bash) returns the output produced since your previous read; " +
	"a task that only has a final result (subagent) returns just its status until it finishes, then the result. " +
	"Set wait: true to block until the task finishes or timeout_ms passes — use it only when you cannot go on without the result. " +
	"Every response ends with a status line such as [status: running] or [status: completed, exit code: 0]."

// timeoutMSDescription describes timeout_ms with the configured default and cap.
const timeoutMSDescription = "With wait: the longest to block, in milliseconds (default %d, at most %d). A wait that times out is not an error: the task keeps running."

func (t *TaskTools) callOutput(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a outputArgs
	given, err := t.outputArgs.decode(raw, &a)
	if err != nil {
		return errResult(err)
	}
	if err := a.check(given); err != nil {
		return errResult(err)
	}
	id := messages.TaskID(a.TaskID)
	defer t.calls.begin(id)()
	if t.outputCallHook != nil {
		t.outputCallHook(id)
	}
	if given["until"] {
		return t.outputUntil(ctx, id, caller, a)
	}
	var (
		clamped string
		waited  messages.Snapshot // what the wait returned, if there was one
	)
	if a.Wait {
		timeout := t.cfg.waitTimeout
		if a.TimeoutMS > 0 {
			timeout, clamped = t.clampWait(a.TimeoutMS)
		}
		if waited, err = t.rt.Tasks().Wait(ctx, id, caller, timeout); interrupted(ctx, err) {
			return t.interruptedWait(ctx, id, caller, waited, clamped)
		} else if err != nil {
			return taskErrResult(a.TaskID, err)
		}
		if t.afterWaitHook != nil {
			t.afterWaitHook(id)
		}
	}
	// The read after a wait collects what the task produced and the freshest
	// snapshot; a terminal one marks the task reported, so no notice follows.
	r, err := t.rt.Tasks().Read(ctx, id, caller)
	if err != nil {
		// A wait that returned the task's end, whose record was dropped before the
		// read (the owner disposed, the runtime closed, both of which end the task
		// under a pending wait): the wait's snapshot is the answer. The output since
		// the previous read went with the record.
		// Likewise a wait that returned the task's end, whose read the caller's
		// interrupt cut short: the output stays for the next read.
		if waited.Status.Terminal() && (errors.Is(err, messages.ErrTaskNotFound) || errors.Is(err, messages.ErrClosed) || interrupted(ctx, err)) {
			return Result{Text: joinLines(clamped, StatusLine(waited))}
		}
		if a.Wait && interrupted(ctx, err) {
			return t.interruptedWait(ctx, id, caller, waited, clamped)
		}
		return taskErrResult(a.TaskID, err)
	}
	if r.Snapshot.Evicted {
		return Result{Text: joinLines(evictedText(t.rt.Retention()), clamped, StatusLine(r.Snapshot))}
	}
	return Result{Text: joinLines(r.Output, clamped, StatusLine(r.Snapshot))}
}

// check refuses task_output arguments that are out of range or contradict each
// other, before anything is read.
func (a *outputArgs) check(given map[string]bool) error {
	if err := checkTaskID(a.TaskID); err != nil {
		return err
	}
	if given["timeout_ms"] && a.TimeoutMS <= 0 {
		return errTimeout
	}
	if given["until"] {
		if given["wait"] && !a.Wait {
			return argErr("until waits for a match: it cannot be used with wait: false")
		}
		if _, err := regexp.Compile(a.Until); err != nil || a.Until == "" {
			return argErr("until is not a valid regular expression: %s", untilProblem(a.Until, err))
		}
	}
	return nil
}

// outputUntil is task_output with until: the output up to the end of the first
// line that matches, or what there is when the wait ends without one.
func (t *TaskTools) outputUntil(ctx context.Context, id messages.TaskID, caller messages.AgentID, a outputArgs) Result {
	timeout, clamped := t.cfg.waitTimeout, ""
	if a.TimeoutMS > 0 {
		timeout, clamped = t.clampWait(a.TimeoutMS)
	}
	r, err := t.rt.Tasks().ReadUntil(ctx, id, caller, a.Until, timeout)
	if interrupted(ctx, err) {
		return t.interruptedWait(ctx, id, caller, r.Snapshot, clamped)
	}
	if err != nil {
		return taskErrResult(a.TaskID, err)
	}
	return Result{Text: joinLines(r.Output, clamped, untilLine(r, timeout), StatusLine(r.Snapshot))}
}

// clampWait turns timeout_ms into a duration no longer than the maximum wait, and
// the clamping note when it had to be lowered.
func (t *TaskTools) clampWait(ms int64) (time.Duration, string) {
	maxMS := t.cfg.maxWait.Milliseconds()
	if ms > maxMS {
		return t.cfg.maxWait, clampedText(maxMS)
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// ---- task_list ----

// listArgs are the arguments of task_list: none.
type listArgs struct{}

const taskListDescription = "List your background tasks, one per line: <id> [<kind>] <status> — <label>. " +
	"Use it to recover a task id you lost track of; it does not return output (use task_output)."

var listSpec = newArgSpec[listArgs]()

func (t *TaskTools) callList(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a listArgs
	if _, err := listSpec.decode(raw, &a); err != nil {
		return errResult(err)
	}
	snaps, err := t.rt.Tasks().List(ctx, caller)
	if err != nil {
		return errResult(err)
	}
	// Running tasks and retained records, one line each; the evicted ones (whose
	// output is gone) are counted on a closing line.
	lines := make([]string, 0, len(snaps))
	evicted := 0
	for _, s := range snaps {
		if s.Evicted {
			evicted++
			continue
		}
		lines = append(lines, listLine(s, caller))
	}
	if evicted > 0 {
		lines = append(lines, olderNotShownText(evicted))
	}
	if len(lines) == 0 {
		return Result{Text: noTasks}
	}
	return Result{Text: strings.Join(lines, "\n")}
}

// ---- task_kill ----

// killArgs are the arguments of task_kill.
type killArgs struct {
	TaskID string `json:"task_id" jsonschema:"The id of the background task to stop."`
	Reason string `json:"reason,omitempty" jsonschema:"Why the task is no longer needed; logged and passed to the task."`
}

const taskKillDescription = "Stop a background task that is no longer needed. " +
	"Returns at once with \"requested cancellation of task <id>\"; the task then stops, and you get no completion notice for it. " +
	"For a task that already finished, returns its final status line instead."

var killSpec = newArgSpec[killArgs](minLength("task_id", 1))

func (t *TaskTools) callKill(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a killArgs
	if _, err := killSpec.decode(raw, &a); err != nil {
		return errResult(err)
	}
	if err := checkTaskID(a.TaskID); err != nil {
		return errResult(err)
	}
	id := messages.TaskID(a.TaskID)
	reason := a.Reason
	if strings.TrimSpace(reason) == "" {
		reason = "killed by task_kill"
	}
	res, s, err := t.rt.Tasks().Kill(ctx, id, caller, reason)
	if err != nil {
		return taskErrResult(a.TaskID, err)
	}
	if res == messages.KillRequested {
		return Result{Text: killRequestedText(id)}
	}
	return Result{Text: StatusLine(s)}
}

// ---- shared ----

// errTimeout rejects a timeout_ms that is zero or negative.
var errTimeout = argErr("timeout_ms must be a positive number of milliseconds")

func checkTaskID(id string) error {
	if strings.TrimSpace(id) == "" {
		return argErr("task_id must not be empty")
	}
	return nil
}

// simpleTool is a Tool made of its parts.
type simpleTool struct {
	name, desc string
	args       *argSpec
	call       func(ctx context.Context, caller messages.AgentID, args json.RawMessage) Result
}

func (s *simpleTool) Name() string           { return s.name }
func (s *simpleTool) Description() string    { return s.desc }
func (s *simpleTool) Schema() map[string]any { return s.args.schema() }

// Call runs the tool; a panic in it (a bug) becomes a tool error, never a crash of
// the embedder's agent loop.
func (s *simpleTool) Call(ctx context.Context, caller messages.AgentID, args json.RawMessage) Result {
	return contained(s.name, func() Result { return s.call(ctx, caller, args) })
}

var _ Tool = (*simpleTool)(nil)
