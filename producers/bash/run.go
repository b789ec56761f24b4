package bash

import (
	"context"
	"fmt"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// Result is the result of a foreground Run.
type Result struct {
	// Output is the whole output, bounded like one background read: at most
	// WithMaxRead bytes, as head and tail around a marker line stating how many
	// bytes were left out. Run removes the spill file before returning, so the
	// marker names no file.
	Output string
	// ExitCode is the shell's exit code, or -1 when it did not exit on its own.
	ExitCode int
	// Outcome is what a background task would have settled with: completed with
	// "exit code: N", killed with "signal: SIGTERM" and so on.
	Outcome messages.Outcome
	// TimedOut is true when the timeout killed the command.
	TimedOut bool
}

// Run runs c in the foreground: it returns when the command and every process it
// started are gone. When timeout (if positive) passes, or ctx is done, the command
// is cancelled like a background task (SIGTERM to the group, SIGKILL after the
// grace period) and Run still waits for it to settle. On ctx's end Run returns the
// partial Result together with ctx's error. Errors from starting the command are
// returned as Start returns them, with a zero Result. A foreground command takes no
// input: c.Stdin must be StdinNone (else ErrStdin), and the command reads /dev/null.
func (p *Producer) Run(ctx context.Context, c Command, timeout time.Duration) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if c.Stdin != StdinNone {
		return Result{}, fmt.Errorf("%w: a foreground command takes no input (stdin %s is for background commands)", ErrStdin, c.Stdin)
	}
	t, err := p.start(c)
	if err != nil {
		return Result{}, err
	}
	var timeoutC <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timeoutC = timer.C
	}
	var (
		res    Result
		ctxErr error
	)
	select {
	case res.Outcome = <-t.done:
	case <-timeoutC:
		_ = t.cancel(fmt.Sprintf("timed out after %s", timeout))
		res.Outcome = <-t.done
		res.TimedOut = res.Outcome.Status == messages.Killed
	case <-ctx.Done():
		ctxErr = ctx.Err()
		_ = t.cancel("caller gave up: " + ctxErr.Error())
		res.Outcome = <-t.done
	}
	t.out.RemoveSpill("")
	res.Output = t.out.Read()
	res.ExitCode = t.exitCode
	return res, ctxErr
}
