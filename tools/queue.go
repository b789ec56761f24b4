package tools

import (
	"context"
	"fmt"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// queuedText is a background start's answer when the runtime queued it at the cap
// (actors.WithQueue): where it stands in its owner's queue, and that it starts by
// itself.
//
//	queued background task bash-5 (position 2 of 3); it starts when a slot frees. …
func queuedText(id messages.TaskID, kind, label string, pos, total int) string {
	return fmt.Sprintf("queued background task %s (position %d of %d); it starts when a slot frees. "+
		"%s: %s is listed as queued until then; you will be notified when it finishes, and task_kill takes it off the queue.",
		id, pos, total, kind, Label(label))
}

// startedResult is a successful background start's answer: started, or queued with
// its position, and the handle either way.
func startedResult(ctx context.Context, rt *actors.Runtime, caller messages.AgentID, id messages.TaskID, kind, label string) Result {
	h := Handle{Kind: "background", TaskID: id}
	if pos, total, err := rt.Tasks().QueuePosition(ctx, id, caller); err == nil && pos > 0 {
		return Result{Text: queuedText(id, kind, label, pos, total), Data: h}
	}
	if caller == "" {
		return Result{Text: startedUnownedText(id, kind, label), Data: h}
	}
	return Result{Text: startedText(id, kind, label), Data: h}
}
