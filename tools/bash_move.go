package tools

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// This file is bash's background_after_ms: a foreground command that runs long is
// moved to the background (Tasks.Adopt) instead of being waited on to its timeout.
//
//	start the command (the producer's Spec.Run: running work, no task, no id)
//	   │ finished before background_after_ms ──▶ a foreground answer, as without it
//	   │ background_after_ms passed
//	   ▼
//	Tasks.Adopt ──ok──▶ the handle a run_in_background start returns, with the output so far
//	   │ refused (the cap, a disposing owner, …)
//	   ▼
//	stays in the foreground under its timeout_ms, and the answer says why

// movedTail bounds the output so far that a move shows: its last bytes.
const movedTail = 8 << 10

// foregroundOrMove runs cmd in the foreground, moving it to the background as a task
// of caller once after has passed (see the file comment).
func (b *BashTool) foregroundOrMove(ctx context.Context, caller messages.AgentID, cmd bash.Command, timeoutMS int64, after time.Duration) Result {
	timeout, clamped := b.foregroundTimeout(timeoutMS)
	began := time.Now()
	spec := b.run.Spec(caller, cmd)
	h, err := contain.Value("run", spec.Run)
	if err != nil {
		return errResult(err) // nothing ran
	}
	if h.Done == nil || h.Cancel == nil {
		if h.Cancel != nil {
			_ = h.Cancel("invalid hooks")
		}
		return errResult(fmt.Errorf("%w: the bash runner returned hooks without Done or Cancel", messages.ErrInvalidSpec))
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var moveC <-chan time.Time
	if after < timeout {
		move := time.NewTimer(after)
		defer move.Stop()
		moveC = move.C
	}
	select {
	case o := <-h.Done:
		return b.foregroundAnswer(h, o, clamped, "")
	case <-deadline.C:
		return b.timedOut(h, timeout, clamped, "")
	case <-ctx.Done():
		return b.cancelled(ctx, h, clamped)
	case <-moveC:
	}
	task := h
	if timeoutMS > 0 { // an explicit timeout_ms still bounds the command in the background
		task = timeoutHooks(h, time.Until(began.Add(timeout)), timeout)
	}
	spec.Run = nil
	id, err := b.rt.Tasks().Adopt(ctx, spec, task)
	if err == nil {
		return Result{Text: movedText(id, spec, after, caller, h.Output), Data: Handle{Kind: "background", TaskID: id}}
	}
	// Not moved: it stays in the foreground under its timeout, and the answer says why.
	note := fmt.Sprintf("(not moved to the background after %d ms: %s; it stayed in the foreground under its timeout of %d ms)",
		after.Milliseconds(), oneLine(startErrResult(err).Text), timeout.Milliseconds())
	if timeoutMS == 0 {
		select {
		case o := <-h.Done:
			return b.foregroundAnswer(h, o, clamped, note)
		case <-deadline.C:
			return b.timedOut(h, timeout, clamped, note)
		case <-ctx.Done():
			return b.cancelled(ctx, h, clamped)
		}
	}
	// The wrapped hooks enforce the explicit timeout themselves (they own h.Done now).
	select {
	case o := <-task.Done:
		if rest, ok := strings.CutPrefix(o.Detail, fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())); ok && o.Status == messages.Killed {
			o.Detail = strings.TrimPrefix(rest, ", ")
			note += fmt.Sprintf("\n(timed out after %d ms; the command and its process group were killed)", timeout.Milliseconds())
		}
		return b.foregroundAnswer(h, o, clamped, note)
	case <-ctx.Done():
		return b.cancelled(ctx, task, clamped)
	}
}

// foregroundAnswer is the answer of a foreground command that ended: its whole
// output, then the notes and the status line, as bash.Producer.Run would give it;
// the work's resources are released.
func (b *BashTool) foregroundAnswer(h messages.Hooks, o messages.Outcome, lines ...string) Result {
	out := readAll(h)
	return Result{Text: joinLines(append(append([]string{out}, lines...), statusLine(o.Status, o.Detail))...)}
}

func (b *BashTool) timedOut(h messages.Hooks, timeout time.Duration, clamped, note string) Result {
	_ = contain.Call("cancel", func() error { return h.Cancel(fmt.Sprintf("timed out after %s", timeout)) })
	o := <-h.Done
	if o.Status == messages.Killed {
		note = strings.TrimSpace(note + "\n" + fmt.Sprintf("(timed out after %d ms; the command and its process group were killed)", timeout.Milliseconds()))
	}
	return b.foregroundAnswer(h, o, clamped, note)
}

func (b *BashTool) cancelled(ctx context.Context, h messages.Hooks, clamped string) Result {
	err := ctx.Err()
	_ = contain.Call("cancel", func() error { return h.Cancel("caller gave up: " + err.Error()) })
	o := <-h.Done
	r := b.foregroundAnswer(h, o, clamped, fmt.Sprintf("(cancelled: %s; the command and its process group were killed)", oneLine(err.Error())))
	r.IsError = true
	return r
}

// readAll reads a finished foreground command's whole output and releases it. The
// spill file goes first, so that a marker of omitted bytes names no file (as
// bash.Producer.Run does).
func readAll(h messages.Hooks) string {
	var out string
	_ = contain.Call("read output", func() error {
		switch {
		case h.Output != nil:
			if rs, ok := h.Output.(interface{ RemoveSpill(string) }); ok {
				rs.RemoveSpill("")
			}
			out = h.Output.Read()
		case h.ReadOutput != nil:
			out = h.ReadOutput()
		}
		return nil
	})
	if h.Release != nil {
		_ = contain.Call("release", func() error { h.Release(); return nil })
	}
	return out
}

// movedText is the answer of a command moved to the background: its output so far
// (the last movedTail bytes, read without consuming), then what happened.
func movedText(id messages.TaskID, spec messages.Spec, after time.Duration, caller messages.AgentID, out messages.Output) string {
	var sofar string
	if out != nil {
		_ = contain.Call("peek output", func() error {
			written := out.Written()
			off := max(written-movedTail, 0)
			data, _, _ := out.Peek(off, movedTail)
			for off > 0 && len(data) > 0 && !utf8.RuneStart(data[0]) {
				data, off = data[1:], off+1
			}
			sofar = strings.ToValidUTF8(string(data), "\uFFFD")
			if off > 0 {
				sofar = fmt.Sprintf("(%d earlier bytes not shown)\n", off) + sofar
			}
			return nil
		})
	}
	notice := "You will be notified when it finishes"
	if caller == "" {
		notice = "No completion notice will follow"
	}
	note := fmt.Sprintf("(still running after %d ms: moved to the background as task %s (%s: %s). %s; task_output returns its whole output, from the first line.)",
		after.Milliseconds(), id, spec.Kind, Label(spec.Label), notice)
	return joinLines(strings.TrimSuffix(sofar, "\n"), note, "[status: running]")
}
