package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// TaskInputName is the name of the tool that writes to a background task's input.
const TaskInputName = "task_input"

// Defaults of task_input's collection of the task's reply.
const (
	// defaultInputWait is how long task_input waits for the task's first output after
	// the write.
	defaultInputWait = time.Second
	// inputQuiet ends the collection once the task printed nothing new for this long.
	inputQuiet = 100 * time.Millisecond
	// inputCollectCap bounds the whole collection after the first output.
	inputCollectCap = 2 * time.Second
)

// inputArgs are the arguments of task_input.
type inputArgs struct {
	TaskID string `json:"task_id" jsonschema:"The id of the background task to write to (started with stdin pipe or tty)."`
	Text   string `json:"text" jsonschema:"The text to write to the task's standard input, as is: no newline is added, so end a line with \n."`
	EOF    bool   `json:"eof,omitempty" jsonschema:"Close the task's input after the text (end of input, like Ctrl-D). Default false."`
}

const taskInputDescription = "Write text to the standard input of a background task that reads it — one started with stdin \"pipe\" or \"tty\": a REPL, a prompt asking for confirmation, a server reading commands. " +
	"No newline is added: end a line with \\n. With eof: true the input is closed afterwards. " +
	"Returns the output the task printed in reply (collected until it goes quiet, for about a second at most) as task_output would, ending with the status line, so one call is one round trip."

var inputSpec = newArgSpec[inputArgs](minLength("task_id", 1))

func (t *TaskTools) newInputTool() Tool {
	return &simpleTool{name: TaskInputName, desc: taskInputDescription, args: inputSpec, call: t.callInput}
}

func (t *TaskTools) callInput(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a inputArgs
	if _, err := inputSpec.decode(raw, &a); err != nil {
		return errResult(err)
	}
	if err := checkTaskID(a.TaskID); err != nil {
		return errResult(err)
	}
	if a.Text == "" && !a.EOF {
		return errResult(argErr("nothing to send: give text, or eof: true"))
	}
	if len(a.Text) > messages.MaxInput {
		return errResult(argErr("text is %d bytes; at most %d per call", len(a.Text), messages.MaxInput))
	}
	id := messages.TaskID(a.TaskID)
	defer t.calls.begin(id)()
	err := t.write(ctx, id, caller, []byte(a.Text), a.EOF)
	switch {
	case errors.Is(err, messages.ErrNoInput):
		return Result{Text: fmt.Sprintf("task %s takes no input: start the command with stdin \"pipe\" or \"tty\" to write to it", id), IsError: true}
	case errors.Is(err, messages.ErrInputClosed):
		return Result{Text: fmt.Sprintf("the input of task %s is closed already (eof was sent)", id), IsError: true}
	case errors.Is(err, messages.ErrTaskEnded):
		if s, gerr := t.rt.Tasks().Get(ctx, id, caller); gerr == nil {
			return Result{Text: fmt.Sprintf("input not sent: task %s has ended %s", id, StatusLine(s)), IsError: true}
		}
		return errResult(err)
	case err != nil:
		return taskErrResult(a.TaskID, err)
	}
	out, snap, err := t.collectReply(ctx, id, caller)
	if interrupted(ctx, err) {
		if snap, err = t.statusNow(ctx, id, caller); err != nil {
			return taskErrResult(a.TaskID, err)
		}
		return Result{Text: joinLines(out, inputInterruptedText, StatusLine(snap))}
	}
	if err != nil {
		return taskErrResult(a.TaskID, err)
	}
	return Result{Text: joinLines(out, StatusLine(snap))}
}

// inputGrace is how long a write that task_input started may still take once its
// call is interrupted: long enough for the answer of a write that was already made
// to come back (it usually does within microseconds), short enough that an
// interrupt still ends a write blocked on a full pipe promptly.
const inputGrace = time.Second

// write is Tasks.Input for task_input. A write the process may already have read
// must not be reported as perhaps not sent — the model would send it again — so
// the interrupt of the call (ctx) ends the write only after inputGrace: a write
// that was made answers meanwhile, and the call then says "input sent" before the
// interruption. A write still blocked then is abandoned, and the error is ctx's.
func (t *TaskTools) write(ctx context.Context, id messages.TaskID, caller messages.AgentID, data []byte, eof bool) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		grace := time.NewTimer(inputGrace)
		defer grace.Stop()
		select {
		case <-grace.C:
			cancel()
		case <-wctx.Done(): // the write answered
		}
	})
	defer stop()
	err := t.rt.Tasks().Input(wctx, id, caller, data, eof)
	if err != nil && wctx.Err() != nil {
		return ctx.Err() // abandoned after the grace: in the caller's words
	}
	return err
}

// collectReply gathers what the task printed after a write: it waits for the first
// output (or the task's end) up to the input wait, then keeps reading until the
// output stays quiet for a moment, within a bound. A task without an output stream
// gets one plain read.
func (t *TaskTools) collectReply(ctx context.Context, id messages.TaskID, caller messages.AgentID) (string, messages.Snapshot, error) {
	const anything = `[\s\S]`
	var out strings.Builder
	r, err := t.rt.Tasks().ReadUntil(ctx, id, caller, anything, t.cfg.inputWait)
	if errors.Is(err, messages.ErrNoOutputStream) {
		rr, err := t.rt.Tasks().Read(ctx, id, caller)
		return rr.Output, rr.Snapshot, err
	}
	if err != nil {
		return "", messages.Snapshot{}, err
	}
	out.WriteString(r.Output)
	snap := r.Snapshot
	deadline := time.Now().Add(inputCollectCap)
	for r.Reason == messages.UntilMatched && time.Now().Before(deadline) {
		rr, err := t.rt.Tasks().Read(ctx, id, caller) // everything there now
		if err != nil {
			return out.String(), snap, err // what was read is the model's: keep it
		}
		out.WriteString(rr.Output)
		if r, err = t.rt.Tasks().ReadUntil(ctx, id, caller, anything, inputQuiet); err != nil {
			return out.String(), snap, err
		}
		out.WriteString(r.Output)
		snap = r.Snapshot
	}
	return out.String(), snap, nil
}
