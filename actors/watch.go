package actors

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file is watches (Tasks.Watch): a pattern over a running task's new output
// whose matching lines become notices in the task owner's session.
//
// A watch lives in three places, each doing one thing:
//
//   - the registry checks the fence and the owner's bound, counts the task's live
//     watches, and holds the task's completion-notice claim (notifyTask) while any
//     is live, so that no watch notice ever follows the completion notice;
//   - the task actor scans the output with observer reads (Output.Peek — the
//     model's consuming cursor never moves), line by line, and hands matching lines
//     to the watch's delivery; it ends the watch at settlement (after a last scan),
//     at its timeout, or when the delivery reached its cap;
//   - the delivery, a goroutine per watch, calls the owner's injector, one notice
//     at a time: lines that match while a notice is being delivered wait and go
//     out together in the next one (coalesced), so a slow injector never blocks the
//     task and a burst of matches costs one notice. After the last notice it tells
//     the registry (watchEnded), which releases a held claim.
//
//	registry: watchTask ──fence, bound──▶ task: scan on every output growth ──match──▶ delivery: inject
//	                                          │ settled / timeout / cap                 │ last notice
//	                                          ▼                                         ▼
//	                                       delivery closed ─────────────────────▶ watchEnded ──▶ registry

// Bounds of watches.
const (
	// DefaultWatchNotices is a watch's notice cap when WatchOptions.MaxNotices is 0.
	DefaultWatchNotices = 20
	// MaxWatchNotices is the largest notice cap a watch may have.
	MaxWatchNotices = 1000
	// defaultWatchLimit is how many live watches one owner's tasks may have in all
	// (WithWatchLimit).
	defaultWatchLimit = 16
	// watchLines is the most matching lines one notice shows; the rest are counted.
	watchLines = 5
	// watchLineRunes bounds one line in a notice.
	watchLineRunes = 200
	// watchPatternRunes bounds the pattern as a notice repeats it.
	watchPatternRunes = 100
	// watchPartial bounds the unfinished line a watch holds between two scans.
	watchPartial = 4 << 10
)

// WatchOptions tunes a watch. The zero value is the default.
type WatchOptions struct {
	// MaxNotices caps the notices the watch sends (default DefaultWatchNotices, at
	// most MaxWatchNotices); after the last one it sends one closing notice and
	// stops. Negative is an error.
	MaxNotices int
	// Timeout ends the watch, with a closing notice, once it has passed; 0 means
	// the watch runs until the task settles (or the cap). Negative is an error.
	Timeout time.Duration
}

// Watch watches a stream task's output from now on: each new line that matches
// pattern (RE2 syntax) becomes a notice in the session of the task's owner, through
// the owner's injector, as completion notices do:
//
//	task bash-3 output matched ERROR: ERROR connection refused
//
// Lines that match while a notice is being delivered go out together in the next one
// (at most 5 shown, the rest counted). After MaxNotices notices the watch sends one
// closing notice and stops; it also stops, with a closing notice, at its Timeout,
// and silently when the task settles — every line printed before settlement is
// matched, and its notice delivered, before the task's completion notice, and none
// comes after it. The watch reads with observer reads only: the model's task_output
// reads are unchanged. It never blocks the task: matching is a scan of the new
// bytes on the task's actor, delivery runs on a goroutine of its own.
//
// The owner fence applies as to every call (an ancestor may watch its sub-agent's
// task; the notices still go to the task's owner). A task may have several watches;
// one owner's tasks at most WithWatchLimit in all (ErrWatchLimit). Errors: a task
// that has settled (ErrTaskEnded), one without an output stream (ErrNoOutputStream),
// an unowned one — there is no session to notify — or a bad pattern or option
// (ErrInvalidArgument).
func (t *Tasks) Watch(ctx context.Context, id messages.TaskID, caller messages.AgentID, pattern string, opts WatchOptions) error {
	switch {
	case opts.MaxNotices < 0 || opts.MaxNotices > MaxWatchNotices:
		return fmt.Errorf("%w: max notices %d must be between 1 and %d", messages.ErrInvalidArgument, opts.MaxNotices, MaxWatchNotices)
	case opts.Timeout < 0:
		return fmt.Errorf("%w: watch timeout %s must not be negative", messages.ErrInvalidArgument, opts.Timeout)
	case pattern == "":
		return fmt.Errorf("%w: pattern is empty", messages.ErrInvalidArgument)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("%w: pattern: %v", messages.ErrInvalidArgument, err)
	}
	if opts.MaxNotices == 0 {
		opts.MaxNotices = DefaultWatchNotices
	}
	m, err := t.rt.call(ctx, &watchTask{id: id, caller: caller, pattern: pattern, re: re, opts: opts})
	if err != nil {
		return taskErr(id, err)
	}
	return m.(*errReply).err
}

// Watches returns how many live watches (Tasks.Watch) each of owner's own tasks has,
// for the tasks that have any: a watch counts from the call that started it until it
// ended (its closing notice sent, its task settled, or refused by the task). It is
// the embedder's view, as Stats is (the live page marks watched tasks with it): one
// round trip to the registry, which reads the counts it keeps for the owner bound;
// an unknown owner, or one with no watches, has none (a nil map).
func (t *Tasks) Watches(ctx context.Context, owner messages.AgentID) (map[messages.TaskID]int, error) {
	m, err := t.rt.call(ctx, &countWatches{owner: owner})
	if err != nil {
		return nil, t.rt.noActorErr(err)
	}
	return m.(*countWatchesReply).counts, nil
}

// WithWatchLimit bounds the live watches (Tasks.Watch) of one owner's tasks, in all
// (default 16); over it, Watch fails with ErrWatchLimit. n <= 0 keeps
// the default.
func WithWatchLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.watchLimit = n
		}
	})
}

// ---- registry ----

// watchCounts are the registry's counts of live watches (requested and not yet
// ended), for a task (taskEntry) and an owner (agentEntry).
type watchCounts struct {
	watches int
	claims  []*actor.PID // notifyTask requesters held until the task's watches ended
}

// watch checks a watch request and forwards it to the task actor.
func (r *registry) watch(ctx actor.Context, m *watchTask) {
	e, ok := r.tasks[m.id]
	if !ok || !r.visible(e.snap.Owner, m.caller) {
		ctx.Respond(&errReply{err: notFound(m.id)})
		return
	}
	a := r.agents[e.snap.Owner]
	switch {
	case e.snap.Owner == "":
		ctx.Respond(&errReply{err: fmt.Errorf("%w: %s is unowned: a watch has no session to notify", messages.ErrInvalidArgument, m.id)})
	case e.pid == nil || e.snap.Status.Terminal():
		ctx.Respond(&errReply{err: fmt.Errorf("%w: %s is %s: there is no new output to watch", messages.ErrTaskEnded, m.id, e.snap.Status)})
	case a == nil || a.phase != agentOpen:
		ctx.Respond(&errReply{err: fmt.Errorf("%w: %s", messages.ErrOwnerUnknown, e.snap.Owner)})
	case a.watches >= r.rt.cfg.watchLimit:
		ctx.Respond(&errReply{err: fmt.Errorf("%w for the owner of %s (limit: %d)", messages.ErrWatchLimit, m.id, r.rt.cfg.watchLimit)})
	default:
		a.watches++
		e.watches++
		ctx.Forward(e.pid)
	}
}

// countWatches answers Tasks.Watches from the owner's task list: only an owner with
// live watches costs a walk of its tasks.
func (r *registry) countWatches(ctx actor.Context, m *countWatches) {
	rep := &countWatchesReply{}
	a := r.agents[m.owner]
	if a == nil || a.watches == 0 {
		ctx.Respond(rep)
		return
	}
	for _, id := range a.bucket.ids {
		if e, ok := r.tasks[id]; ok && e.watches > 0 {
			if rep.counts == nil {
				rep.counts = map[messages.TaskID]int{}
			}
			rep.counts[id] = e.watches
		}
	}
	ctx.Respond(rep)
}

// watchEnded takes a watch off the counts and, once the task has none, hands out
// the completion-notice claims held for it.
func (r *registry) watchEnded(ctx actor.Context, m *watchEnded) {
	e, ok := r.tasks[m.id]
	if !ok {
		return // dropped with its owner: the counts went with it
	}
	if a := r.agents[m.owner]; a != nil && a.watches > 0 {
		a.watches--
	}
	if e.watches > 0 {
		e.watches--
	}
	if e.watches > 0 {
		return
	}
	claims := e.claims
	e.claims = nil
	for _, c := range claims {
		ctx.Send(c, r.claimNotice(m.id))
	}
}

// holdClaim holds a completion-notice claim while the task has live watches: their
// notices must all be delivered before the completion notice. It reports false when
// there is nothing to wait for.
func (r *registry) holdClaim(ctx actor.Context, id messages.TaskID) bool {
	e, ok := r.tasks[id]
	if !ok || e.watches == 0 {
		return false
	}
	e.claims = append(e.claims, ctx.Sender())
	return true
}

// releaseClaims answers the claims held for a record that is dropped: there is no
// notice to give.
func (r *registry) releaseClaims(ctx actor.Context, e *taskEntry) {
	for _, c := range e.claims {
		ctx.Send(c, &agentReply{})
	}
	e.claims = nil
}

// ---- task actor ----

// outputWatch is one live watch on a task actor.
type outputWatch struct {
	n       uint64
	re      *regexp.Regexp
	off     int64  // the next byte to scan
	partial []byte // the unfinished line after off's predecessor bytes (bounded)
	cut     bool   // partial was cut at watchPartial
	d       *delivery
	matched bool        // the scan in progress handed d a line: wake it once the scan ends
	timer   *time.Timer // nil without a timeout
	timeout time.Duration
}

func (t *task) startWatch(ctx actor.Context, m *watchTask) {
	refuse := func(err error) {
		ctx.Respond(&errReply{err: err})
		t.toRegistry(ctx, &watchEnded{id: t.snap.ID, owner: t.snap.Owner})
	}
	out := t.stream()
	switch {
	case t.phase == phaseQueued:
		refuse(fmt.Errorf("%w: %s is queued: watch it once it runs", messages.ErrInvalidArgument, t.snap.ID))
		return
	case out == nil:
		refuse(fmt.Errorf("%w: %s (%s) gives no output to watch", messages.ErrNoOutputStream, t.snap.ID, t.snap.Kind))
		return
	case t.phase == phaseSettled:
		refuse(fmt.Errorf("%w: %s is %s: there is no new output to watch", messages.ErrTaskEnded, t.snap.ID, t.snap.Status))
		return
	}
	t.listening.Store(true) // before the offset is taken: a write after it wakes the task
	off, err := contain.Value("output", func() (int64, error) { return out.Written(), nil })
	if err != nil {
		refuse(fmt.Errorf("watch task %s: %w", t.snap.ID, err))
		return
	}
	t.nextWaiter++
	w := &outputWatch{n: t.nextWaiter, re: m.re, off: off, timeout: m.opts.Timeout}
	w.d = newDelivery(t.rt, t.self, t.snap.ID, t.snap.Owner, m.pattern, w.n, m.opts.MaxNotices)
	if m.opts.Timeout > 0 {
		self, rt, n := t.self, t.rt, w.n
		w.timer = time.AfterFunc(m.opts.Timeout, func() { tellTask(rt.system.Root, self, &watchTimeout{n: n}) })
	}
	pr := t.pendingOf()
	pr.watches = append(pr.watches, w)
	ctx.Respond(&errReply{})
}

// scanWatches matches the output written since each watch's last scan, line by
// line; final treats an unfinished last line as a line (the task settled).
func (t *task) scanWatches(final bool) {
	out := t.stream()
	pr := t.pending
	if out == nil || pr == nil || len(pr.watches) == 0 {
		return
	}
	for _, w := range pr.watches {
		err := contain.Call("peek output", func() error {
			for {
				data, next, missed := out.Peek(w.off, maxPeek)
				if missed > 0 { // bytes no longer held: the line they were part of is lost
					w.partial, w.cut = w.partial[:0], false
					w.d.skipped(missed)
				}
				if len(data) == 0 {
					w.off = max(w.off, next)
					break
				}
				w.off = next
				w.feed(data)
			}
			return nil
		})
		if err != nil {
			t.rt.log.Error("taskrt: a watch's observer read panicked", "task", t.snap.ID, "err", err)
		}
		if final && len(w.partial) > 0 {
			w.line(w.partial)
			w.partial = w.partial[:0]
		}
		// One wake-up per scan: the lines one scan matched go out together (in one
		// notice, unless the delivery is still injecting the previous one).
		if w.matched {
			w.matched = false
			w.d.signal()
		}
	}
}

// feed splits data into lines, matching each complete one.
func (w *outputWatch) feed(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			w.keep(data)
			return
		}
		if len(w.partial) > 0 {
			w.keep(data[:i])
			w.line(w.partial)
			w.partial, w.cut = w.partial[:0], false
		} else {
			w.line(data[:i])
		}
		data = data[i+1:]
	}
}

// keep appends to the unfinished line, up to its bound.
func (w *outputWatch) keep(b []byte) {
	if room := watchPartial - len(w.partial); room < len(b) {
		b, w.cut = b[:max(room, 0)], true
	}
	w.partial = append(w.partial, b...)
}

func (w *outputWatch) line(b []byte) {
	b = bytes.TrimSuffix(b, []byte("\r"))
	if w.re.Match(b) {
		w.matched = true
		w.d.add(string(b))
	}
}

// endWatch removes watch n and closes its delivery with the closing text ("" for
// none).
func (t *task) endWatch(n uint64, closing string) {
	pr := t.pending
	if pr == nil {
		return
	}
	for i, w := range pr.watches {
		if w.n == n {
			if w.timer != nil {
				w.timer.Stop()
			}
			w.d.close(closing)
			pr.watches = append(pr.watches[:i], pr.watches[i+1:]...)
			return
		}
	}
}

// endWatches ends every watch silently, after a last scan: the task settled (its
// completion notice says so) or its actor stopped.
func (t *task) endWatches() {
	t.scanWatches(true)
	for pr := t.pending; pr != nil && len(pr.watches) > 0; {
		t.endWatch(pr.watches[0].n, "")
	}
}

func (t *task) watchTimedOut(m *watchTimeout) {
	t.scanWatches(false)
	if pr := t.pending; pr != nil {
		for _, w := range pr.watches {
			if w.n == m.n {
				t.endWatch(m.n, fmt.Sprintf("its timeout of %d ms passed", w.timeout.Milliseconds()))
				return
			}
		}
	}
}

// ---- delivery ----

// delivery is the notice side of one watch: matching lines in, notices out through
// the owner's injector, one at a time, on a goroutine of its own.
type delivery struct {
	rt      *Runtime
	task    *actor.PID
	id      messages.TaskID
	owner   messages.AgentID
	pattern string
	n       uint64
	max     int

	mu      sync.Mutex // protects the fields below
	lines   []string   // matching lines not yet delivered (at most watchLines)
	more    int        // matching lines beyond lines
	missed  int64      // output bytes that went by unscanned since the last notice
	closed  bool       // no more lines: deliver what is left, then end
	closing string     // the closing notice's reason ("" for none)
	wake    chan struct{}
}

func newDelivery(rt *Runtime, task *actor.PID, id messages.TaskID, owner messages.AgentID, pattern string, n uint64, maxNotices int) *delivery {
	d := &delivery{rt: rt, task: task, id: id, owner: owner, pattern: pattern, n: n, max: maxNotices, wake: make(chan struct{}, 1)}
	rt.goSafe("watch delivery", d.run)
	return d
}

func (d *delivery) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// add queues a matched line; the scan that found it wakes the delivery when it ends
// (signal), so that one scan's lines are delivered together.
func (d *delivery) add(line string) {
	d.mu.Lock()
	if !d.closed {
		if len(d.lines) < watchLines {
			d.lines = append(d.lines, line)
		} else {
			d.more++
		}
	}
	d.mu.Unlock()
}

// skipped counts n output bytes the watch could not scan (the output dropped them
// before the scan reached them): the next notice says so, since a line in them
// may have matched.
func (d *delivery) skipped(n int64) {
	d.mu.Lock()
	d.missed += n
	d.mu.Unlock()
}

func (d *delivery) close(closing string) {
	d.mu.Lock()
	if !d.closed {
		d.closed, d.closing = true, closing
	}
	d.mu.Unlock()
	d.signal()
}

// run delivers notices until the watch is closed or capped, then tells the
// registry the watch ended.
func (d *delivery) run() {
	defer d.ended()
	sent := 0
	for range d.wake {
		d.mu.Lock()
		lines, more, closed, closing, missed := d.lines, d.more, d.closed, d.closing, d.missed
		d.lines, d.more = nil, 0
		if len(lines) > 0 || closed && closing != "" {
			d.missed = 0 // this notice says it
		}
		d.mu.Unlock()
		if len(lines) > 0 {
			d.inject(WatchNotice{Task: d.id, Pattern: d.pattern, Lines: lines, More: more, Missed: missed}.String())
			missed = 0
			sent++
			if sent == d.max {
				d.inject(WatchNotice{Task: d.id, Pattern: d.pattern,
					Stopped: fmt.Sprintf("it sent its %d notices (max_notices)", d.max)}.String())
				tellTask(d.rt.system.Root, d.task, &watchCapped{n: d.n})
				return
			}
		}
		if closed {
			if closing != "" {
				d.inject(WatchNotice{Task: d.id, Pattern: d.pattern, Stopped: closing, Missed: missed}.String())
			}
			return
		}
	}
}

// ended tells the registry the watch ended — unless the runtime is closing. A close
// does not wait for the deliveries its teardown closed, so the last one may end
// after the registry stopped, and a message to a stopped registry is a dead letter
// (which keeps protoactor's dead-letter throttle goroutine alive for its interval
// after Close returned: a synctest bubble then ends with a goroutine left). Once a
// close began the counts have no use: notices are over, and the claims held for
// the task are answered when its record is dropped (releaseClaims).
func (d *delivery) ended() {
	if d.rt.closing.Load() {
		return
	}
	tellRegistry(d.rt.system.Root, d.rt, &watchEnded{id: d.id, owner: d.owner})
}

// inject delivers one notice to the owner, if it is still live and open.
func (d *delivery) inject(text string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.rt.cfg.settleTimeout)
	defer cancel()
	m, err := d.rt.call(ctx, &lookupAgent{id: d.owner})
	if err != nil {
		return
	}
	r := m.(*agentReply)
	if !r.live || r.injector == nil {
		return
	}
	if err := inject(ctx, r.injector, text); err != nil {
		d.rt.log.Warn("taskrt: a watch notice could not be injected", "task", d.id, "err", err)
		return
	}
}
