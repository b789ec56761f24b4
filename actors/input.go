package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file is a task's input (Tasks.Input): accepted writes queue in arrival order
// and go to the producer's Input hook one at a time, off the mailbox.

// inputReq is one accepted InputTask.
type inputReq struct {
	data   []byte
	eof    bool
	sender *actor.PID
}

// input accepts an InputTask: inputs are written one at a time, in arrival order, by
// a goroutine the runtime owns, so a full pipe never blocks the mailbox.
func (t *task) input(ctx actor.Context, m *messages.InputTask) {
	reply := func(err error) { ctx.Respond(&messages.InputReply{Snapshot: t.snap, Err: err}) }
	switch {
	case t.hooks.Input == nil:
		reply(fmt.Errorf("%w: %s", messages.ErrNoInput, t.snap.ID))
	case t.phase != phaseRunning:
		reply(t.endedErr())
	case t.inputShut:
		reply(fmt.Errorf("%w: %s", messages.ErrInputClosed, t.snap.ID))
	default:
		pr := t.pendingOf()
		pr.inputs = append(pr.inputs, &inputReq{data: m.Data, eof: m.EOF, sender: ctx.Sender()})
		t.inputShut = m.EOF
		t.writeNext()
	}
}

func (t *task) endedErr() error {
	if t.snap.Detail != "" {
		return fmt.Errorf("%w: %s is %s (%s)", messages.ErrTaskEnded, t.snap.ID, t.snap.Status, t.snap.Detail)
	}
	return fmt.Errorf("%w: %s is %s", messages.ErrTaskEnded, t.snap.ID, t.snap.Status)
}

// writeNext hands the first queued input to the producer, off the mailbox.
func (t *task) writeNext() {
	pr := t.pending
	if t.writing || pr == nil || pr.parked != nil || len(pr.inputs) == 0 {
		return
	}
	t.writing = true
	in, write, self, rt := pr.inputs[0], t.hooks.Input, t.self, t.rt
	t.calls.run(rt, "input", func() {
		err := contain.Call("input", func() error { return write(in.data, in.eof) })
		tellTask(rt.system.Root, self, &inputDone{err: err})
	})
}

func (t *task) inputDone(ctx actor.Context, m *inputDone) {
	t.calls.taken()
	t.writing = false
	pr := t.pending // made by the input being answered
	in := pr.inputs[0]
	pr.inputs = pr.inputs[1:]
	switch {
	case m.err == nil:
		ctx.Send(in.sender, &messages.InputReply{Snapshot: t.snap})
	case t.phase != phaseRunning:
		// The process exited between the check and the write.
		ctx.Send(in.sender, &messages.InputReply{Snapshot: t.snap, Err: t.endedErr()})
	default:
		// A failed write while the task still looks alive is most often a process
		// that is exiting (a broken pipe) whose settlement has not arrived yet: hold
		// the answer until the task ends, or for inputGrace, then give the write's
		// own error. The queue waits behind it.
		self, rt := t.self, t.rt
		pr.parked = &parkedInput{req: in, err: fmt.Errorf("input to task %s: %w", t.snap.ID, m.err),
			timer: time.AfterFunc(inputGrace, func() { tellTask(rt.system.Root, self, &inputGraceOver{}) })}
		return
	}
	if t.phase == phaseRunning {
		t.writeNext()
	} else {
		t.failQueuedInputs(ctx)
	}
	t.answerTeardown(ctx)
}

// inputGrace is how long a failed write's answer waits for the task to end.
const inputGrace = time.Second

// parkedInput is a failed write whose answer waits for the task's end.
type parkedInput struct {
	req   *inputReq
	err   error
	timer *time.Timer
}

func (t *task) inputGraceOver(ctx actor.Context) {
	pr := t.pending
	if pr == nil || pr.parked == nil {
		return
	}
	p := pr.parked
	pr.parked = nil
	ctx.Send(p.req.sender, &messages.InputReply{Snapshot: t.snap, Err: p.err})
	t.writeNext()
}

// failQueuedInputs answers the inputs not yet handed to the producer: the task is
// stopping or settled, so they would go nowhere.
func (t *task) failQueuedInputs(ctx actor.Context) {
	pr := t.pending
	if pr == nil {
		return // no input was ever accepted
	}
	if p := pr.parked; p != nil {
		pr.parked = nil
		p.timer.Stop()
		ctx.Send(p.req.sender, &messages.InputReply{Snapshot: t.snap, Err: t.endedErr()})
	}
	first := 0
	if t.writing {
		first = 1 // in flight: answered when the producer returns
	}
	for _, in := range pr.inputs[first:] {
		ctx.Send(in.sender, &messages.InputReply{Snapshot: t.snap, Err: t.endedErr()})
	}
	pr.inputs = pr.inputs[:first]
}

// Input writes data to a task's input (a process's stdin) and, when eof is set,
// closes it afterwards. It is routed like Read, Kill and Wait, with the same owner
// fence, to the task actor, which hands it to the producer's Input hook off its
// mailbox: inputs to one task are written one at a time, in the order they arrive, and
// a full pipe never blocks the runtime. It returns once the producer took the write.
// Errors: ErrNoInput (the producer takes no input), ErrInputClosed (eof was already
// sent), ErrTaskEnded (the task finished or is being stopped, even if it exited
// between the check and the write), ErrInvalidArgument (more than MaxInput bytes).
// Invalid UTF-8 is passed through as bytes.
func (t *Tasks) Input(ctx context.Context, id messages.TaskID, caller messages.AgentID, data []byte, eof bool) error {
	if len(data) > messages.MaxInput {
		return fmt.Errorf("%w: input of %d bytes is over the bound of %d bytes per call", messages.ErrInvalidArgument, len(data), messages.MaxInput)
	}
	m, err := t.rt.ask(ctx, &messages.InputTask{ID: id, Caller: caller, Data: data, EOF: eof})
	if err != nil {
		return taskErr(id, err)
	}
	return m.(*messages.InputReply).Err
}

// input is the registry's part of an input: the size bound and the owner fence
// checked, a tombstone's refusal (the task ended; nothing is reported), or the
// task's to write.
func (r *registry) input(ctx actor.Context, m *messages.InputTask) {
	if len(m.Data) > messages.MaxInput {
		ctx.Respond(&messages.InputReply{Err: fmt.Errorf("%w: input of %d bytes is over the bound of %d bytes per call",
			messages.ErrInvalidArgument, len(m.Data), messages.MaxInput)})
		return
	}
	e := r.reach(m.ID, m.Caller)
	switch {
	case e == nil:
		ctx.Respond(&messages.InputReply{Err: notFound(m.ID)})
	case e.tombstone():
		ctx.Respond(&messages.InputReply{Snapshot: e.snap,
			Err: fmt.Errorf("%w: %s is %s", messages.ErrTaskEnded, e.snap.ID, e.snap.Status)})
	default:
		ctx.Forward(e.pid)
	}
}

// inputsAtStop answers the inputs still pending when the actor stops (the task
// was evicted, or the runtime failed): a parked write's answer, and writes not yet
// taken, go nowhere any more.
func (t *task) inputsAtStop() {
	pr := t.pending
	if pr == nil {
		return
	}
	if p := pr.parked; p != nil {
		p.timer.Stop()
		t.rt.send(p.req.sender, &messages.InputReply{Snapshot: t.snap, Err: t.endedErr()})
		pr.parked = nil
	}
	for _, in := range pr.inputs {
		t.rt.send(in.sender, &messages.InputReply{Snapshot: t.snap, Err: t.endedErr()})
	}
	pr.inputs = nil
}
