package bash

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
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
// input: c.Stdin must be StdinNone (else errStdin), and the command reads /dev/null;
// nor does it block on its output (c.BlockOutput: errBlockForeground).
func (p *Producer) Run(ctx context.Context, c Command, timeout time.Duration) (Result, error) {
	return p.RunWithProgress(ctx, c, timeout, Progress{})
}

// Progress is how a foreground run reports how its command is getting on
// (RunWithProgress). The zero value reports nothing.
type Progress struct {
	// Every is the interval between reports; ≤ 0: none.
	Every time.Duration
	// Report is called every interval on the runner's goroutine with n, the number
	// of intervals so far (1, 2, …), and the command's latest output line — the
	// line being written if it is not blank, else the last complete one that is not
	// ("" before any). A line ends at \n or \r (a progress bar redraws its line with
	// \r); it is trimmed of surrounding space and comes from the output's last 4 KiB,
	// read without consuming. Report should return quickly: the timeout and ctx are
	// watched between its calls. Nil: none.
	Report func(n int, line string)
}

// RunWithProgress is Run that also reports how the command is getting on (see
// Progress). The Result is exactly Run's.
func (p *Producer) RunWithProgress(ctx context.Context, c Command, timeout time.Duration, pr Progress) (Result, error) {
	interval, progress := pr.Every, pr.Report
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if c.Stdin != StdinNone {
		return Result{}, fmt.Errorf("%w: a foreground command takes no input (stdin %s is for background commands)", errStdin, c.Stdin)
	}
	if c.BlockOutput {
		return Result{}, errBlockForeground
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
	var tickC <-chan time.Time
	if interval > 0 && progress != nil {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		tickC = tick.C
	}
	var (
		res    Result
		ctxErr error
		n      int
	)
wait:
	for {
		select {
		case res.Outcome = <-t.done:
			break wait
		case <-tickC:
			n++
			progress(n, latestLine(t.out))
		case <-timeoutC:
			_ = t.cancel(fmt.Sprintf("timed out after %s", timeout))
			res.Outcome = <-t.done
			res.TimedOut = res.Outcome.Status == messages.Killed
			break wait
		case <-ctx.Done():
			ctxErr = ctx.Err()
			_ = t.cancel("caller gave up: " + ctxErr.Error())
			res.Outcome = <-t.done
			break wait
		}
	}
	t.out.RemoveSpill("")
	res.Output = t.out.Read()
	res.ExitCode = t.exitCode
	return res, ctxErr
}

// progressWindow is how many of the output's last bytes RunWithProgress looks at
// for the latest line.
const progressWindow = 4 << 10

// latestLine is the latest line in the last progressWindow bytes of out, read
// without consuming (see RunWithProgress).
func latestLine(out *output.Buffer) string {
	data, _, _ := out.Peek(out.Written()-progressWindow, progressWindow)
	return lastLine(data)
}

// lastLine is the line being written at the end of b if it is not blank, else the
// last complete line that is not; lines end at \n or \r. A window that starts in
// the middle of a rune skips the rune's rest.
func lastLine(b []byte) string {
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	s := string(b)
	for {
		i := strings.LastIndexAny(s, "\r\n")
		if line := strings.TrimSpace(s[i+1:]); line != "" {
			return line
		}
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
}
