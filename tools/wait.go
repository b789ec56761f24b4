package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// TaskWaitName is the name of the tool that waits on several tasks at once.
const TaskWaitName = "task_wait"

// waitArgs are the arguments of task_wait.
type waitArgs struct {
	TaskIDs   []string `json:"task_ids" jsonschema:"The ids of the background tasks to wait on (1 to 32)."`
	Mode      string   `json:"mode,omitempty" jsonschema:"any: return as soon as one of the tasks has finished (the default); all: return once every one has."`
	TimeoutMS int64    `json:"timeout_ms,omitempty" jsonschema:"The longest to block, in milliseconds. A wait that times out is not an error: the tasks keep running."`
}

const taskWaitDescription = "Wait on several background tasks at once: mode any returns as soon as one of them finishes, mode all once every one has. " +
	"Use it when you fanned work out and cannot go on until the first (or the last) result is in; you are notified of finished tasks anyway, so do not use it to poll. " +
	"Returns one line per task, finished ones first, then the ids still running; read a finished task's output with task_output."

// timeoutMSWaitDescription describes task_wait's timeout_ms with the configured values.
const timeoutMSWaitDescription = "The longest to block, in milliseconds (default %d, at most %d). A wait that times out is not an error: the tasks keep running."

func (t *TaskTools) newWaitTool() Tool {
	t.waitArgs = newArgSpec[waitArgs](items("task_ids", 1, messages.MaxWaitSet), enum("mode", "any", "all"), minimum("timeout_ms", 1),
		describe("timeout_ms", fmt.Sprintf(timeoutMSWaitDescription, t.cfg.waitTimeout.Milliseconds(), t.cfg.maxWait.Milliseconds())))
	return &simpleTool{name: TaskWaitName, desc: taskWaitDescription, args: t.waitArgs, call: t.callWait}
}

func (t *TaskTools) callWait(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a waitArgs
	given, err := t.waitArgs.decode(raw, &a)
	if err != nil {
		return errResult(err)
	}
	if len(a.TaskIDs) == 0 || len(a.TaskIDs) > messages.MaxWaitSet {
		return errResult(argErr("task_ids must name 1 to %d tasks", messages.MaxWaitSet))
	}
	ids := make([]messages.TaskID, len(a.TaskIDs))
	for i, id := range a.TaskIDs {
		if err := checkTaskID(id); err != nil {
			return errResult(argErr("task_ids must not contain an empty id"))
		}
		ids[i] = messages.TaskID(id)
	}
	mode := messages.WaitAny
	switch a.Mode {
	case "", "any":
	case "all":
		mode = messages.WaitAll
	default:
		return errResult(argErr("mode must be \"any\" or \"all\", not %s", quoteName(a.Mode)))
	}
	if given["timeout_ms"] && a.TimeoutMS <= 0 {
		return errResult(errTimeout)
	}
	timeout, clamped := t.cfg.waitTimeout, ""
	if a.TimeoutMS > 0 {
		timeout, clamped = t.clampWait(a.TimeoutMS)
	}
	wait := t.rt.Tasks().WaitAny
	if mode == messages.WaitAll {
		wait = t.rt.Tasks().WaitAll
	}
	snaps, err := wait(ctx, ids, caller, timeout)
	if interrupted(ctx, err) {
		return t.interruptedSet(ctx, ids, caller, snaps, clamped)
	}
	if err != nil {
		return errResult(err) // an unknown or foreign id: "task not found: <id>", naming it
	}
	return Result{Text: waitSetText(snaps, clamped, timeout)}
}

// interruptedSet is task_wait's answer when the caller's interrupt cut the wait
// short: that it was interrupted, then the tasks as a wait reports them (finished
// ones first, then the ids still running). snaps is what the wait returned, nil when
// it never reached the tasks.
func (t *TaskTools) interruptedSet(ctx context.Context, ids []messages.TaskID, caller messages.AgentID, snaps []messages.Snapshot, clamped string) Result {
	if snaps == nil {
		for _, id := range ids {
			s, err := t.statusNow(ctx, id, caller)
			if err != nil {
				return taskErrResult(string(id), err)
			}
			snaps = append(snaps, s)
		}
	}
	return Result{Text: joinLines(clamped, waitSetInterruptedText, waitSetText(snaps, "", 0))}
}

// waitSetText is task_wait's answer: one line per task, finished ones first (in the
// order asked), then the ids still running (with the timeout when none finished
// within it; timeout 0 names none), the ids whose output is full (block mode: the
// wait ended because nothing happens before a read), and where to read the output.
//
//	bash-2 (bash: go test ./b) finished [status: completed, exit code: 0]
//	still running: bash-1, bash-3
//	Read a finished task's output with task_output.
func waitSetText(snaps []messages.Snapshot, clamped string, timeout time.Duration) string {
	var lines, running, full []string
	for _, s := range snaps {
		switch {
		case s.Status.Terminal():
			lines = append(lines, fmt.Sprintf("%s (%s: %s) finished %s", s.ID, s.Kind, Label(s.Label), StatusLine(s)))
		case s.OutputFull:
			full = append(full, string(s.ID))
		default:
			running = append(running, string(s.ID))
		}
	}
	finished := len(lines)
	switch {
	case len(running) > 0 && finished == 0 && len(full) == 0 && timeout > 0:
		lines = append(lines, fmt.Sprintf("still running: %s (none finished within %d ms)", strings.Join(running, ", "), timeout.Milliseconds()))
	case len(running) > 0:
		lines = append(lines, "still running: "+strings.Join(running, ", "))
	}
	if len(full) > 0 {
		lines = append(lines, "output full, waiting for task_output: "+strings.Join(full, ", "))
	}
	if finished > 0 {
		lines = append(lines, "Read a finished task's output with task_output.")
	}
	return joinLines(append([]string{clamped}, lines...)...)
}
