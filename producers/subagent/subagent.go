package subagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// Kind is the task kind (and id prefix) of sub-agent tasks: "subagent-1".
const Kind = "subagent"

// StopReason is why a child agent's run ended: the stop reason of its final model step,
// or StopAborted when the run was cancelled.
type StopReason string

// The stop reasons a Launcher reports. Any other value is treated like StopError.
const (
	StopCompleted StopReason = "completed"  // the child gave its final answer
	StopAborted   StopReason = "aborted"    // the run was cancelled
	StopError     StopReason = "error"      // the run failed
	StopMaxTokens StopReason = "max-tokens" // the model ran out of output budget
	StopRefusal   StopReason = "refusal"    // the model refused
)

// Brief is what a parent hands a sub-agent: the arguments of a subagent tool call.
type Brief struct {
	// Description is a short, model-facing summary of the delegated work; it becomes
	// the task's label. Required.
	Description string
	// Prompt is the child's instructions. Required.
	Prompt string
	// Model optionally names which model (or agent profile) the child runs; "" means
	// the Launcher's default. Its meaning belongs to the Launcher.
	Model string
}

// Request is one child run for a Launcher to start.
type Request struct {
	// Parent is the spawning agent; "" for a sub-agent started by the no-agent
	// caller. A non-empty Parent must be registered as the child's parent agent, so
	// that disposing the parent disposes the child.
	Parent messages.AgentID
	// Child is the child's own agent id, chosen by the producer: "<parent>/sub-N"
	// ("sub-N" without a parent). N counts up once per Producer.
	Child messages.AgentID
	Brief
	// Progress, when not nil (background runs), is where the Launcher reports how the
	// run is going, as lines of text: the child's tool calls and results, its answer
	// so far. task_output on the running sub-agent shows them. Writes must not block
	// for long (the producer's buffer never blocks).
	Progress io.Writer
}

// Result is how a child run ended.
type Result struct {
	Stop StopReason
	// Output is the child's final answer; for an aborted run, the partial answer it
	// had produced, if any.
	Output string
	// Detail is optional extra detail: the error message of StopError, the cancel
	// reason of StopAborted.
	Detail string
}

// Launcher starts child agent runs. It is the producer's only dependency.
type Launcher interface {
	// Launch registers req.Child (as a child agent of req.Parent when that is set),
	// starts its run on req.Prompt, and returns at once with the handle of the run.
	//
	// ctx governs only the launch (the registration): the run must not be tied to
	// it, because a background run outlives the call that started it; it ends only
	// through Run.Cancel or on its own. An error means nothing was registered and
	// nothing runs.
	Launch(ctx context.Context, req Request) (Run, error)
}

// Run is one launched child run.
type Run interface {
	// Cancel aborts the run; the reason is the kill's reason ("owner disposed",
	// "runtime closed", what the model gave task_kill). It must be idempotent, must
	// not block for long, and must make Wait return (with StopAborted, unless the
	// run had already ended).
	Cancel(reason string)
	// Wait blocks until the run has ended and returns its result. It may be called
	// more than once and from any goroutine.
	Wait() Result
	// Dispose disposes the child agent and returns once it, and every background
	// task it owned, is gone. The producer calls it once, after Wait returned. A
	// child that is already gone (its parent's disposal took it) is not an error.
	Dispose(ctx context.Context) error
}

// Producer turns sub-agent briefs into taskrt task specs (background) and runs them
// in the foreground. It is safe for concurrent use.
type Producer struct {
	launcher Launcher
	next     atomic.Uint64 // the last child number handed out
}

// New returns a Producer that runs its children through l.
func New(l Launcher) *Producer { return &Producer{launcher: l} }

// Spec returns the task spec of a background sub-agent owned by owner: kind
// "subagent", label b.Description, and a Run that launches the child and returns its
// hooks. Hand it to the runtime's Tasks.Start. A launch failure (a bad brief, an
// unknown model, a refused registration) is returned by Run, so no task is created.
func (p *Producer) Spec(owner messages.AgentID, b Brief) messages.Spec {
	return messages.Spec{
		Kind:  Kind,
		Label: b.Description,
		Owner: owner,
		Run:   func() (messages.Hooks, error) { return p.Start(context.Background(), owner, b) },
	}
}

// Start launches a child run for owner and returns the task hooks: Cancel aborts the
// run, and Done (buffered, capacity 1) delivers the mapped Outcome once the run ended
// and the child agent was disposed. A sub-agent is a final-output kind (its answer is
// Outcome.Output) with a progress stream: the Launcher reports the run's progress to
// Request.Progress, and a read of the running task shows it. Spec's Run calls Start;
// embedders that drive hooks themselves may too.
func (p *Producer) Start(ctx context.Context, owner messages.AgentID, b Brief) (messages.Hooks, error) {
	progress := output.New(output.WithoutSpill())
	run, err := p.launch(ctx, owner, b, progress)
	if err != nil {
		return messages.Hooks{}, err
	}
	done := make(chan messages.Outcome, 1)
	// This goroutine is owned by the task: the runtime awaits Done, and Done is sent
	// only when the goroutine is about to return.
	go func() {
		o := settle(run)
		_ = progress.Close()
		done <- o
	}()
	return messages.Hooks{
		Cancel:   func(reason string) error { return cancelRun(run, reason) },
		Done:     done,
		Progress: progress,
		Release:  progress.Release,
	}, nil
}

// Run runs a sub-agent in the foreground for owner: it returns the mapped Outcome once
// the child's run ended and the child agent was disposed. Cancelling ctx aborts the
// child (reason: the context's cause) and Run still waits for its disposal. The error
// is a launch failure only; how the run ended is in the Outcome.
func (p *Producer) Run(ctx context.Context, owner messages.AgentID, b Brief) (messages.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return messages.Outcome{}, fmt.Errorf("sub-agent not started: %w", err)
	}
	run, err := p.launch(ctx, owner, b, nil)
	if err != nil {
		return messages.Outcome{}, err
	}
	settled := make(chan messages.Outcome, 1)
	go func() { settled <- settle(run) }()
	select {
	case o := <-settled:
		return o, nil
	case <-ctx.Done():
		_ = cancelRun(run, context.Cause(ctx).Error())
		return <-settled, nil
	}
}

// launch validates the brief, names the child and hands it to the Launcher.
func (p *Producer) launch(ctx context.Context, owner messages.AgentID, b Brief, progress *output.Buffer) (run Run, err error) {
	if p == nil || p.launcher == nil {
		return nil, errors.New("sub-agent producer has no launcher")
	}
	if strings.TrimSpace(b.Description) == "" {
		return nil, errors.New("sub-agent description is empty")
	}
	if strings.TrimSpace(b.Prompt) == "" {
		return nil, errors.New("sub-agent prompt is empty")
	}
	req := Request{Parent: owner, Child: p.childID(owner), Brief: b}
	if progress != nil {
		req.Progress = progress
	}
	run, err = contain.Value("launcher", func() (Run, error) { return p.launcher.Launch(ctx, req) })
	if err != nil {
		return nil, fmt.Errorf("launch sub-agent %s: %w", req.Child, err)
	}
	if run == nil {
		return nil, fmt.Errorf("launch sub-agent %s: launcher returned no run", req.Child)
	}
	return run, nil
}

func (p *Producer) childID(owner messages.AgentID) messages.AgentID {
	n := p.next.Add(1)
	if owner == "" {
		return messages.AgentID(fmt.Sprintf("sub-%d", n))
	}
	return messages.AgentID(fmt.Sprintf("%s/sub-%d", owner, n))
}

// settle awaits the run's result, then the child's disposal, and maps both to an
// Outcome. A panicking Launcher becomes a failed Outcome rather than a lost one.
func settle(run Run) messages.Outcome {
	var o messages.Outcome
	err := contain.Call("sub-agent run", func() error {
		o = outcomeOf(run.Wait())
		if err := run.Dispose(context.Background()); err != nil {
			// Quiescence is not confirmed: the child may still own live work.
			o = messages.Outcome{Status: messages.Failed, Output: o.Output,
				Detail: fmt.Sprintf("disposing the child agent failed: %v", err)}
		}
		return nil
	})
	if err != nil {
		return messages.Outcome{Status: messages.Failed, Detail: err.Error()}
	}
	return o
}

func cancelRun(run Run, reason string) error {
	return contain.Call("sub-agent cancel", func() error { run.Cancel(reason); return nil })
}

// map turns a child's Result into a task Outcome: completed → Completed; aborted →
// Killed with detail "aborted" (": reason" when known); error, max-tokens, refusal and
// any other reason → Failed with the reason as detail ("error: message" when the
// error has one). The output is carried over in every case.
func outcomeOf(r Result) messages.Outcome {
	o := messages.Outcome{Output: r.Output}
	switch r.Stop {
	case StopCompleted:
		o.Status = messages.Completed
	case StopAborted:
		o.Status = messages.Killed
		o.Detail = withDetail("aborted", r.Detail)
	case "":
		o.Status = messages.Failed
		o.Detail = withDetail("unknown stop reason", r.Detail)
	case StopError:
		o.Status = messages.Failed
		o.Detail = withDetail(string(StopError), r.Detail)
	default:
		o.Status = messages.Failed
		o.Detail = string(r.Stop)
	}
	return o
}

func withDetail(head, detail string) string {
	if detail = strings.TrimSpace(detail); detail == "" {
		return head
	}
	return head + ": " + detail
}
