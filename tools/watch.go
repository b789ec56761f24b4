package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// TaskWatchName is the name of the tool that watches a task's output for a pattern.
const TaskWatchName = "task_watch"

// watchArgs are the arguments of task_watch.
type watchArgs struct {
	TaskID     string `json:"task_id" jsonschema:"The id of the running background task to watch (for example bash-1)."`
	Pattern    string `json:"pattern" jsonschema:"A regular expression (RE2 syntax). Each new line of the task's output that matches becomes a notice in this session."`
	MaxNotices int64  `json:"max_notices,omitempty" jsonschema:"The most notices the watch sends (default 20); after them it sends one notice that it stopped."`
	TimeoutMS  int64  `json:"timeout_ms,omitempty" jsonschema:"Stop watching after this many milliseconds (default: when the task finishes)."`
}

const taskWatchDescription = "Watch a running background task's output for lines that match a pattern, without polling: " +
	"from now on each new matching line comes to you as a notice in this session (task <id> output matched <pattern>: <line>), " +
	"lines that match close together in one notice. The watch stops when the task finishes (its completion notice comes last), " +
	"after max_notices notices, or at timeout_ms, and says so. It reads nothing away: task_output still returns the whole output. " +
	"Use it for what you must react to while you keep working, e.g. ERROR lines of a dev server."

func (t *TaskTools) newWatchTool() Tool {
	t.watchArgs = newArgSpec[watchArgs](minLength("task_id", 1), minLength("pattern", 1),
		minimum("max_notices", 1), maximum("max_notices", actors.MaxWatchNotices), minimum("timeout_ms", 1))
	return &simpleTool{name: TaskWatchName, desc: taskWatchDescription, args: t.watchArgs, call: t.callWatch}
}

func (t *TaskTools) callWatch(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a watchArgs
	given, err := t.watchArgs.decode(raw, &a)
	if err != nil {
		return errResult(err)
	}
	if err := checkTaskID(a.TaskID); err != nil {
		return errResult(err)
	}
	if _, err := regexp.Compile(a.Pattern); err != nil || a.Pattern == "" {
		return errResult(argErr("pattern is not a valid regular expression: %s", untilProblem(a.Pattern, err)))
	}
	if given["max_notices"] && (a.MaxNotices < 1 || a.MaxNotices > actors.MaxWatchNotices) {
		return errResult(argErr("max_notices must be between 1 and %d", actors.MaxWatchNotices))
	}
	if given["timeout_ms"] && (a.TimeoutMS <= 0 || a.TimeoutMS > maxTimeoutMS) {
		return errResult(errTimeout)
	}
	opts := actors.WatchOptions{MaxNotices: int(a.MaxNotices), Timeout: time.Duration(a.TimeoutMS) * time.Millisecond}
	id := messages.TaskID(a.TaskID)
	switch err := t.rt.Tasks().Watch(ctx, id, caller, a.Pattern, opts); {
	case errors.Is(err, messages.ErrWatchLimit):
		return Result{Text: oneLine(err.Error()) + "; a watch ends when its task finishes, at its max_notices or its timeout_ms", IsError: true}
	case err != nil:
		return taskErrResult(a.TaskID, err)
	}
	return Result{Text: watchingText(id, a.Pattern, opts)}
}

// watchingText is task_watch's answer.
func watchingText(id messages.TaskID, pattern string, o actors.WatchOptions) string {
	n := o.MaxNotices
	if n == 0 {
		n = actors.DefaultWatchNotices
	}
	until := "until the task finishes"
	if o.Timeout > 0 {
		until = fmt.Sprintf("until the task finishes or %d ms have passed", o.Timeout.Milliseconds())
	}
	return fmt.Sprintf("watching task %s for lines matching %s: up to %d notices in this session, %s. Keep working; do not poll.",
		id, truncate(oneLine(pattern), 100), n, until)
}
