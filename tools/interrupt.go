package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// A call cut short by an interrupt — the caller's context cancelled (a user's
// Ctrl-C, an MCP request cancelled) or past its deadline — answers in the tools'
// own words, never with a Go error string such as "context canceled": a model
// cannot act on that, and it does not say whether the task it asked about ended.
//
//   - a wait (task_output with wait or until, task_wait) says it was interrupted
//     and gives the task's current status line; if the task ended meanwhile, its
//     terminal status line is the answer, as for any wait;
//   - a foreground command says the call was interrupted and that the command and
//     its process group were killed, then its status line;
//   - anything else is a tool error whose reason names the interruption.

// waitInterruptedText is the line before the status line of a wait that was
// interrupted before the task ended.
const waitInterruptedText = "(wait interrupted before the task finished)"

// waitSetInterruptedText is task_wait's line for the same.
const waitSetInterruptedText = "(wait interrupted before the tasks finished)"

// inputInterruptedText is task_input's line, before the status line, when the
// input was written and the wait for the task's reply was interrupted.
const inputInterruptedText = "(input sent; the wait for the task's reply was interrupted)"

// interruptWords renders the end of a caller's context: "the call was interrupted"
// (cancelled) or "the call's deadline passed"; "" for any other error.
func interruptWords(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the call's deadline passed"
	case errors.Is(err, context.Canceled):
		return "the call was interrupted"
	}
	return ""
}

// ownWords replaces Go's context error strings in a model-facing text (an error's
// text, a producer's detail) with interruptWords.
var ownWords = strings.NewReplacer(
	context.Canceled.Error(), interruptWords(context.Canceled),
	context.DeadlineExceeded.Error(), interruptWords(context.DeadlineExceeded),
)

// inOwnWords is s with every Go context error string put in the tools' words.
func inOwnWords(s string) string { return ownWords.Replace(s) }

// interrupted reports whether err ended a call because its context ended.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// statusBound bounds the look-up of a task's status after its caller's context
// ended (the look-up runs without it, so that the answer can say where the task is).
const statusBound = 10 * time.Second

// statusNow is the task's current snapshot, read without consuming anything and
// without ctx's cancellation.
func (t *TaskTools) statusNow(ctx context.Context, id messages.TaskID, caller messages.AgentID) (messages.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusBound)
	defer cancel()
	return t.rt.Tasks().Get(ctx, id, caller)
}

// interruptedWait is the answer of a task_output wait on id that ctx's end cut
// short: the task's terminal status line if it ended, else that the wait was
// interrupted and its current status line. snap is what the wait returned (zero
// when the wait never reached the task). Nothing is consumed: the output stays for
// the next read.
func (t *TaskTools) interruptedWait(ctx context.Context, id messages.TaskID, caller messages.AgentID, snap messages.Snapshot, clamped string) Result {
	if snap.ID == "" {
		var err error
		if snap, err = t.statusNow(ctx, id, caller); err != nil {
			return taskErrResult(string(id), err)
		}
	}
	if snap.Status.Terminal() {
		return Result{Text: joinLines(clamped, StatusLine(snap))}
	}
	return Result{Text: joinLines(clamped, waitInterruptedText, StatusLine(snap))}
}
