package mcpserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// reporter receives the progress of a foreground command: n counts the intervals
// it has run (1, 2, …), line is its latest output line ("" before any).
type reporter func(n int, line string)

type reporterKey struct{}

// withReporter marks a call's context: a foreground bash command run under it
// reports its progress to r.
func withReporter(ctx context.Context, r reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// runner is the bash tool's tools.BashRunner: the producer itself, and for a
// foreground command whose context carries a reporter, the producer's RunWithProgress:
// once per interval the reporter gets the latest output line. The result is the
// producer's, so every string the model sees is the same with or without progress.
type runner struct {
	p        *bash.Producer
	interval time.Duration
}

func (r runner) Spec(owner messages.AgentID, c bash.Command) messages.Spec { return r.p.Spec(owner, c) }

func (r runner) Run(ctx context.Context, c bash.Command, timeout time.Duration) (res bash.Result, err error) {
	defer func() { captured(ctx, res) }() // a protocol task's outcome (tasks.go)
	report, ok := ctx.Value(reporterKey{}).(reporter)
	if !ok {
		return r.p.Run(ctx, c, timeout)
	}
	// The reports go out on a goroutine of their own, latest first, so that a
	// client slow to read them never holds up the command's timeout or cancellation.
	type progress struct {
		n    int
		line string
	}
	latest := make(chan progress, 1)
	var ended atomic.Bool // the command ended: a report still queued goes nowhere
	var sender sync.WaitGroup
	sender.Go(func() {
		for p := range latest {
			// A report that comes after the command ended would reach the client
			// around the call's own result, whose progress token it may have
			// forgotten by then (Claude Code logs it as unknown).
			if !ended.Load() {
				report(p.n, p.line)
			}
		}
	})
	defer func() {
		ended.Store(true)
		close(latest)
		sender.Wait()
	}()
	return r.p.RunWithProgress(ctx, c, timeout, bash.Progress{Every: r.interval, Report: func(n int, line string) {
		select { // only this goroutine sends: after the drain, the send cannot block
		case <-latest:
		default:
		}
		latest <- progress{n, tools.Label(line)}
	}})
}
