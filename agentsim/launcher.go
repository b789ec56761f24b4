package agentsim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

// Child is one registered child agent as a Launcher runs it: the work of its run and
// the way to dispose of it.
type Child struct {
	// Run is the child's whole run. It must return once ctx ends, normally with
	// subagent.StopAborted and context.Cause(ctx) as detail: the cause is an error
	// whose text is the reason the run was cancelled with ("owner disposed", what the
	// model gave task_kill). Required.
	Run func(ctx context.Context) subagent.Result
	// Dispose disposes the child agent and returns once it and every task it owned,
	// transitively, are gone. A child that is already gone is not an error: the
	// Launcher treats messages.ErrOwnerUnknown (its parent's disposal took it) and
	// messages.ErrClosed (the runtime's close took it) as success. Required.
	Dispose func(ctx context.Context) error
}

// Launcher is the sub-agent run adapter: a subagent.Launcher that registers each
// child through a register function and runs it on a goroutine it owns, so that a
// harness writes only what its children do. The simulator (Sim), the stress command
// and the soak command all launch their sub-agents through it.
//
// What it guarantees, for the subagent producer's contract: Launch returns at once
// (the run is not tied to Launch's context); Cancel is idempotent, never blocks, and
// makes the run's context end with the reason as its cause; Wait may be called any
// number of times from any goroutine; Dispose tolerates a child already gone. Close
// refuses new launches, cancels the runs still going and waits for their goroutines.
//
// A Launcher is safe for concurrent use. Create it with NewLauncher.
type Launcher struct {
	register func(ctx context.Context, req subagent.Request) (Child, error)

	runs sync.WaitGroup // one per launch in progress or run goroutine; Close waits

	mu     sync.Mutex // protects live, closed and reason; orders runs.Add before Close's Wait
	live   map[*childRun]struct{}
	closed bool
	reason string // Close's reason
}

// NewLauncher returns a Launcher that registers children with register: it
// registers req.Child — as a child agent of req.Parent when that is set, so that
// disposing the parent disposes the child — and returns the Child to run. An error
// means nothing was registered; it fails the launch.
func NewLauncher(register func(ctx context.Context, req subagent.Request) (Child, error)) *Launcher {
	return &Launcher{register: register, live: map[*childRun]struct{}{}}
}

// Launch implements subagent.Launcher: it registers req.Child and starts its run on a
// goroutine the Launcher owns. ctx bounds only the registration. After Close it fails
// with messages.ErrClosed.
func (l *Launcher) Launch(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, messages.ErrClosed
	}
	l.runs.Add(1) // before Close can Wait: this launch, then its run goroutine
	l.mu.Unlock()
	child, err := l.register(ctx, req)
	if err == nil && (child.Run == nil || child.Dispose == nil) {
		err = fmt.Errorf("child %s: the register function returned no Run or Dispose", req.Child)
		if child.Dispose != nil {
			_ = child.Dispose(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		l.runs.Done()
		return nil, err
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	r := &childRun{child: child, cancel: cancel, done: make(chan struct{})}
	l.mu.Lock()
	l.live[r] = struct{}{}
	if l.closed {
		// Close began while the child was being registered, after it cancelled the
		// runs it knew of: this one must not outlive it either.
		r.Cancel(l.reason)
	}
	l.mu.Unlock()
	go func() {
		defer l.runs.Done()
		r.result = child.Run(runCtx)
		cancel(nil)
		l.mu.Lock()
		delete(l.live, r)
		l.mu.Unlock()
		close(r.done)
	}()
	return r, nil
}

// Close refuses further launches, cancels every run still going with reason (a
// foreground run whose caller never returned, a run that outlived its task), and
// waits for every run goroutine, or for ctx. It is idempotent.
func (l *Launcher) Close(ctx context.Context, reason string) error {
	l.mu.Lock()
	if !l.closed {
		l.closed, l.reason = true, reason
	}
	runs := make([]*childRun, 0, len(l.live))
	for r := range l.live {
		runs = append(runs, r)
	}
	l.mu.Unlock()
	for _, r := range runs {
		r.Cancel(reason)
	}
	done := make(chan struct{})
	go func() { l.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for sub-agent runs: %w", ctx.Err())
	}
}

// childRun is one launched run: the subagent.Run the producer drives.
type childRun struct {
	child  Child
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once result is set
	result subagent.Result
}

// Cancel aborts the run; the reason becomes its context's cause.
func (r *childRun) Cancel(reason string) { r.cancel(errors.New(reason)) }

// Wait returns the run's result once it ended.
func (r *childRun) Wait() subagent.Result {
	<-r.done
	return r.result
}

// Dispose disposes the child agent; one that is already gone is not an error.
func (r *childRun) Dispose(ctx context.Context) error {
	err := r.child.Dispose(ctx)
	if errors.Is(err, messages.ErrOwnerUnknown) || errors.Is(err, messages.ErrClosed) {
		return nil
	}
	return err
}

var _ subagent.Launcher = (*Launcher)(nil)
