package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file is a task whose output is full: a producer in block mode
// (bash.Command.BlockOutput) holds its work back while a read's worth of output
// is unread, instead of dropping any. The task shows it (Snapshot.OutputFull, an
// EventTaskOutputFull), and what waits on the task's progress does not wait through
// it: nothing can happen until the owner reads.

// fullOutput is an output stream that can hold its writer back (output.Buffer).
type fullOutput interface{ Full() bool }

// outputFull: the producer's writer started waiting for a read (Output.OnGrow →
// task). Whether the output is still full is asked again on the mailbox.
type outputFull struct{}

func (*outputFull) isTaskMsg() {}

// tellFull is the growth callback's part for block mode: a writer that starts
// waiting calls OnGrow once, and the task is told.
func tellFull(rt *Runtime, self *actor.PID, out fullOutput) {
	if out != nil && out.Full() {
		tellTask(rt.system.Root, self, &outputFull{})
	}
}

// checkFull brings Snapshot.OutputFull up to date with the output stream, after
// the writer started waiting or a consuming read made room: one taskChanged per
// change. Once full, the waits and reads up to a pattern pending on the task are
// answered, since none of them can be met before a read.
func (t *task) checkFull(ctx actor.Context) {
	out, ok := t.stream().(fullOutput)
	if !ok {
		return
	}
	full := false
	if t.phase == phaseRunning {
		full, _ = contain.Value("output", func() (bool, error) { return out.Full(), nil })
	}
	if full == t.snap.OutputFull {
		return
	}
	t.snap.OutputFull = full
	t.toRegistry(ctx, &taskChanged{snap: t.snap})
	if full {
		t.endWaitsAtFull(ctx)
		t.endUntilsAtFull(ctx)
	}
}

// endWaitsAtFull answers every pending wait with the running snapshot that shows
// the output full.
func (t *task) endWaitsAtFull(ctx actor.Context) {
	for len(t.waiters) > 0 {
		t.endWait(ctx, func(*waiter) bool { return true })
	}
}

// endUntilsAtFull answers the pending reads up to a pattern that the full output
// does not match: the first takes the unread output (so the work goes on), the
// others what is left, each with reason UntilFull. The read made room, so the
// snapshot is brought up to date after.
func (t *task) endUntilsAtFull(ctx actor.Context) {
	pr := t.pending
	if pr == nil || len(pr.untils) == 0 {
		return
	}
	t.matchUntils(ctx)
	untils := pr.untils
	pr.untils = nil
	for _, w := range untils {
		w.timer.Stop()
		out, err := t.consume()
		if err != nil {
			ctx.Send(w.pid, &messages.ReadUntilReply{Err: fmt.Errorf("read output of task %s: %w", t.snap.ID, err)})
			continue
		}
		ctx.Send(w.pid, &messages.ReadUntilReply{Result: messages.UntilResult{
			ReadResult: messages.ReadResult{Output: out, Snapshot: t.snap}, Reason: messages.UntilFull}})
	}
	t.checkFull(ctx)
}
