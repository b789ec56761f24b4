package mcpserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// runner is the bash tool's tools.BashRunner: the producer itself, except for a
// foreground command whose context carries a reporter. That one runs through the
// producer's task hooks, so that its output can be read while it runs: once per
// interval the runner reads what is new and reports the latest line.
//
// The tool formats the result as always, so every string the model sees is the
// same. The output text is too, up to one read's worth of output
// (bash.DefaultMaxRead bytes); beyond that it keeps the head and the tail like
// Producer.Run does, around a marker line of its own.
type runner struct {
	p        *bash.Producer
	interval time.Duration
}

func (r runner) Spec(owner messages.AgentID, c bash.Command) messages.Spec { return r.p.Spec(owner, c) }

func (r runner) Run(ctx context.Context, c bash.Command, timeout time.Duration) (bash.Result, error) {
	report, ok := ctx.Value(reporterKey{}).(reporter)
	if !ok {
		return r.p.Run(ctx, c, timeout)
	}
	return runReporting(ctx, r.p, c, timeout, r.interval, report)
}

// runReporting is Producer.Run with progress reports. Like Run it returns only once
// the command and every process it started are gone: on its own end, at timeout
// (cancelled, TimedOut set) or when ctx ends (cancelled, partial result and ctx's
// error).
func runReporting(ctx context.Context, p *bash.Producer, c bash.Command, timeout, interval time.Duration, report reporter) (bash.Result, error) {
	if err := ctx.Err(); err != nil {
		return bash.Result{}, err
	}
	h, err := p.Start(c)
	if err != nil {
		return bash.Result{}, err
	}
	if h.Release != nil {
		defer h.Release()
	}

	// The reports go out on a goroutine of their own, latest first, so that a
	// client slow to read them never holds up the timeout or the cancellation.
	type progress struct {
		n    int
		line string
	}
	latest := make(chan progress, 1)
	var sender sync.WaitGroup
	sender.Go(func() {
		for p := range latest {
			report(p.n, p.line)
		}
	})
	defer func() {
		close(latest)
		sender.Wait()
	}()

	out := newCollector(bash.DefaultMaxRead)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var timeoutC <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timeoutC = timer.C
	}
	var (
		res    bash.Result
		ctxErr error
		n      int
	)
wait:
	for {
		select {
		case res.Outcome = <-h.Done:
			break wait
		case <-tick.C:
			out.add(h.ReadOutput())
			n++
			select { // only this goroutine sends: after the drain, the send cannot block
			case <-latest:
			default:
			}
			latest <- progress{n, out.lastLine()}
		case <-timeoutC:
			_ = h.Cancel(fmt.Sprintf("timed out after %s", timeout))
			res.Outcome = <-h.Done
			res.TimedOut = res.Outcome.Status == messages.Killed
			break wait
		case <-ctx.Done():
			ctxErr = ctx.Err()
			_ = h.Cancel("caller gave up: " + ctxErr.Error())
			res.Outcome = <-h.Done
			break wait
		}
	}
	out.add(h.ReadOutput())
	res.Output = out.String()
	res.ExitCode = exitCode(res.Outcome)
	return res, ctxErr
}

// exitCode reads N from an outcome's "exit code: N", or -1.
func exitCode(o messages.Outcome) int {
	if s, ok := strings.CutPrefix(o.Detail, "exit code: "); ok {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return -1
}

// collector gathers the output deltas of a foreground command. Up to max bytes it
// keeps all of them; past that, the first and the latest max/2 bytes.
type collector struct {
	max     int
	head    []byte // the first bytes, up to max (max/2 once the output outgrew max)
	tail    []byte // the latest bytes after head, at most max/2, once the output outgrew max
	omitted int64  // bytes between head and tail that are no longer held

	partial string // the output after the last line end, at most maxLine bytes
	last    string // the last non-blank complete line
}

const maxLine = 1024

func newCollector(max int) *collector { return &collector{max: max} }

func (c *collector) add(s string) {
	if s == "" {
		return
	}
	c.track(s)
	if c.tail == nil {
		if len(c.head)+len(s) <= c.max {
			c.head = append(c.head, s...)
			return
		}
		// The output outgrew max: the head keeps its first max/2 bytes (cut on a
		// rune boundary), the rest starts the tail.
		all := append(c.head, s...)
		cut := c.max / 2
		for cut > 0 && !utf8.RuneStart(all[cut]) {
			cut--
		}
		c.tail = append([]byte{}, all[cut:]...)
		c.head = all[:cut:cut]
	} else {
		c.tail = append(c.tail, s...)
	}
	if over := len(c.tail) - c.max/2; over > 0 {
		for over < len(c.tail) && !utf8.RuneStart(c.tail[over]) {
			over++
		}
		c.omitted += int64(over)
		c.tail = append([]byte{}, c.tail[over:]...)
	}
}

// track follows the line structure: a line ends at \n or \r (progress bars redraw
// their line with \r).
func (c *collector) track(s string) {
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			c.partial = clip(c.partial + s)
			return
		}
		if line := strings.TrimSpace(c.partial + s[:i]); line != "" {
			c.last = clip(line)
		}
		c.partial, s = "", s[i+1:]
	}
}

// clip bounds a line to its last maxLine bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxLine {
		return s
	}
	s = s[len(s)-maxLine:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// lastLine is the latest output line, on one line and at most tools.MaxLabel runes:
// the line being written if it is not blank, else the last complete one.
func (c *collector) lastLine() string {
	if p := strings.TrimSpace(c.partial); p != "" {
		return tools.Label(p)
	}
	return tools.Label(c.last)
}

// String is the collected output; when some was dropped, the head ends and the
// tail starts at a line boundary where there is one, around a marker line.
func (c *collector) String() string {
	if c.tail == nil {
		return string(c.head)
	}
	if c.omitted == 0 {
		return string(c.head) + string(c.tail)
	}
	head, tail := c.head, c.tail
	left := c.omitted
	if i := strings.LastIndexByte(string(head), '\n'); i >= 0 {
		left += int64(len(head) - i - 1)
		head = head[:i+1]
	} else {
		head = append(head[:len(head):len(head)], '\n')
	}
	if i := strings.IndexByte(string(tail), '\n'); i >= 0 && i < len(tail)-1 {
		left += int64(i + 1)
		tail = tail[i+1:]
	}
	return fmt.Sprintf("%s[... %d bytes of output left out ...]\n%s", head, left, tail)
}
