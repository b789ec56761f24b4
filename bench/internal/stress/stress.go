package stress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/internal/leakcheck"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// Config is one stress run.
type Config struct {
	Duration time.Duration // how long the agents operate; then the runtime is closed
	Agents   int           // concurrent top-level agents (default 16)
	Seed     uint64        // derives every agent's random stream
	// MinOps is a floor on the operations each agent performs: it keeps operating
	// past Duration until it did that many, so that a short run on a loaded machine
	// still exercises every kind of operation. Default 0: Duration alone decides.
	MinOps int
	// Progress, when set, receives a status line every ProgressEvery (default 10 s),
	// and a last one when the agents stop operating.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Run performs a stress run and checks its invariants. The error is for a run that
// could not be set up; violations are in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Agents = max(cfg.Agents, 1)
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 10 * time.Second
	}
	baseline := runtime.NumGoroutine()
	h, err := newHarness(cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Seed: cfg.Seed, Duration: cfg.Duration, Agents: cfg.Agents, Goroutines: [2]int{baseline, 0}}

	// 1. Operate until the duration ends (or ctx does).
	began := time.Now()
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	var wg sync.WaitGroup
	workers := make([]*worker, cfg.Agents)
	for i := range workers {
		w, err := h.newWorker(i)
		if err != nil {
			stop()
			h.violate("register agent %d: %v", i, err)
			break
		}
		workers[i] = w
		wg.Go(func() { w.loop(runCtx, cfg.MinOps) })
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.Progress != nil {
		progressWG.Go(func() { h.progress(cfg.Progress, began, cfg.ProgressEvery, progressDone) })
	}
	wg.Wait()
	stop()
	close(progressDone)
	progressWG.Wait()
	rep.Operated = time.Since(began)

	// 2. Close: every agent's disposal begins now, as far as notices are concerned.
	closeBegan := time.Now()
	h.markAllDisposing()
	closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.rt.Close(closeCtx); err != nil {
		h.violate("runtime Close: %v", err)
	}
	runsCtx, cancelRuns := context.WithTimeout(context.Background(), time.Minute)
	defer cancelRuns()
	if err := h.launcher.Close(runsCtx, "runtime closed"); err != nil {
		h.violate("sub-agent runs still running a minute after Close: %v", err)
	}
	h.unsubscribe()
	h.tt.Close()
	rep.Closed = time.Since(closeBegan)

	// 3. Check.
	for _, w := range workers {
		if w != nil {
			rep.mergeOps(w.ops)
		}
	}
	rep.mergeOps(h.childOps.snapshot())
	h.check(rep)
	rep.Goroutines[1] = settleGoroutines(baseline, 10*time.Second)
	if rep.Goroutines[1] > baseline {
		h.violate("goroutines: %d after Close, %d before the runtime started\n%s", rep.Goroutines[1], baseline, goroutineDump())
	}
	rep.Processes = settleProcesses(h.bash, 5*time.Second)
	rep.MachineProcesses = leakcheck.Machine()
	if rep.Processes != 0 {
		h.violate("%d processes of bash tasks still alive after Close:\n%s", rep.Processes, markedProcesses())
	}
	_ = os.RemoveAll(h.spillDir)
	h.mu.Lock()
	rep.Violations = append(rep.Violations, h.violations...)
	rep.RuntimeErrors = h.logs.snapshot()
	h.mu.Unlock()
	return rep, nil
}

// harness is the shared state of a run: the runtime and its tools and producers, and
// the record of every task, agent incarnation and notice.
type harness struct {
	cfg         Config
	rt          *actors.Runtime
	tt          *tools.TaskTools
	bash        *bash.Producer
	sub         *subagent.Producer
	launcher    *agentsim.Launcher
	spillDir    string
	unsubscribe func()
	logs        *logRecorder
	childOps    *opCounter

	mu         sync.Mutex // protects every field below and the records they point to
	tasks      map[messages.TaskID]*taskRec
	owned      []messages.TaskID // every owned task, for foreign operations
	unowned    []messages.TaskID // every unowned task
	live       map[messages.AgentID]*incarnation
	incs       []*incarnation
	settleSeq  int64
	violations []string
}

// taskRec is everything observed about one task.
type taskRec struct {
	id      messages.TaskID
	kind    string
	owner   messages.AgentID
	inc     *incarnation // the owner incarnation; nil for unowned
	started bool         // Start returned this id to the stress
	cancels *cancelLog

	settles int               // OnDone calls
	final   messages.Snapshot // the snapshot OnDone delivered
	seq     int64             // settlement order, 1-based, as every listener sees it

	notices    []*incarnation    // incarnations whose injector got a notice for it
	reportedBy string            // the first read or wait that returned its terminal state
	seen       []messages.Status // terminal statuses calls returned
	seenBy     []string          // which call returned each of seen
}

// incarnation is one registration of an agent id.
type incarnation struct {
	id       messages.AgentID
	gen      int
	parent   *incarnation
	children []*incarnation
	// disposeP is the notice listener's progress (settlements fully processed) when
	// this incarnation's disposal began, or -1. A settlement with a later sequence
	// number may legitimately find the owner disposing and get no notice.
	disposeP int64
}

// cancelLog records every reason a task's Cancel was called with.
type cancelLog struct {
	mu      sync.Mutex // protects reasons
	reasons []string
}

func (c *cancelLog) add(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reasons = append(c.reasons, reason)
}

func (c *cancelLog) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.reasons...)
}

func newHarness(cfg Config) (*harness, error) {
	h := &harness{
		cfg:      cfg,
		logs:     &logRecorder{},
		childOps: &opCounter{ops: map[string]*OpStat{}},
		tasks:    map[messages.TaskID]*taskRec{},
		live:     map[messages.AgentID]*incarnation{},
	}
	var err error
	if h.spillDir, err = os.MkdirTemp("", "taskrt-stress-"); err != nil {
		return nil, err
	}
	h.rt, err = actors.NewRuntime(
		actors.WithSettleTimeout(20*time.Second),
		actors.WithLogger(slog.New(h.logs)))
	if err != nil {
		return nil, err
	}
	// Both listeners subscribe before any task exists, so both see every settlement
	// in the same order: our sequence numbers are the notice listener's progress.
	h.tt = tools.NewTaskTools(h.rt)
	h.unsubscribe = h.rt.Tasks().OnDone(h.onDone)
	h.bash = bash.New(bash.WithGrace(300*time.Millisecond), bash.WithOutput(output.WithSpillDir(h.spillDir)))
	h.launcher = agentsim.NewLauncher(h.registerChild)
	h.sub = subagent.New(h.launcher)
	return h, nil
}

// rec returns the record of id, creating it. Called with h.mu held.
func (h *harness) rec(id messages.TaskID) *taskRec {
	r, ok := h.tasks[id]
	if !ok {
		r = &taskRec{id: id}
		h.tasks[id] = r
	}
	return r
}

func (h *harness) violate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violateLocked(format, args...)
}

func (h *harness) violateLocked(format string, args ...any) {
	const keep = 200
	if len(h.violations) < keep {
		h.violations = append(h.violations, fmt.Sprintf(format, args...))
	} else if len(h.violations) == keep {
		h.violations = append(h.violations, "… further violations not kept")
	}
}

// onDone is the stress's OnDone listener.
func (h *harness) onDone(s messages.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settleSeq++
	r := h.rec(s.ID)
	r.settles++
	if r.settles == 1 {
		r.final, r.seq = s, h.settleSeq
	}
}

// processed is how many settlements the notice listener has fully handled.
func (h *harness) processed() int64 {
	n := h.tt.Notices()
	return n.Delivered + n.Suppressed + n.Failed
}

var noticeRE = regexp.MustCompile(`^background task (\S+) \(`)

// injector returns the notice injector of inc: it counts the notice against its task.
func (h *harness) injector(inc *incarnation) messages.Injector {
	return func(_ context.Context, text string) error {
		m := noticeRE.FindStringSubmatch(text)
		h.mu.Lock()
		defer h.mu.Unlock()
		if m == nil {
			h.violateLocked("agent %s got a notice that names no task: %q", inc.id, text)
			return nil
		}
		r := h.rec(messages.TaskID(m[1]))
		r.notices = append(r.notices, inc)
		return nil
	}
}

// register registers id (a child agent of parent when parent is not empty) as a new
// incarnation.
func (h *harness) register(ctx context.Context, id, parent messages.AgentID) (*incarnation, error) {
	h.mu.Lock()
	inc := &incarnation{id: id, disposeP: -1}
	for _, old := range h.incs {
		if old.id == id {
			inc.gen++
		}
	}
	if parent != "" {
		inc.parent = h.live[parent]
	}
	h.mu.Unlock()
	opts := []actors.AgentOption{actors.WithInjector(h.injector(inc))}
	if parent != "" {
		opts = append(opts, actors.WithParent(parent))
	}
	if err := h.rt.Agents().Register(ctx, id, opts...); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[id] = inc
	h.incs = append(h.incs, inc)
	if p := inc.parent; p != nil {
		p.children = append(p.children, inc)
		// The parent's disposal may have begun between our marking and the runtime
		// accepting this registration; it takes this child with it.
		if p.disposeP >= 0 {
			inc.disposeP = p.disposeP
		}
	}
	return inc, nil
}

// markDisposing records that inc's disposal (and its descendants') begins now. Called
// with h.mu held.
func (h *harness) markDisposing(inc *incarnation, p int64) {
	if inc.disposeP < 0 {
		inc.disposeP = p
	}
	for _, c := range inc.children {
		h.markDisposing(c, p)
	}
}

func (h *harness) markAllDisposing() {
	p := h.processed()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, inc := range h.incs {
		h.markDisposing(inc, p)
	}
}

// dispose disposes inc. An agent already gone (its parent's disposal took it) is not
// an error.
func (h *harness) dispose(ctx context.Context, inc *incarnation) error {
	p := h.processed()
	h.mu.Lock()
	h.markDisposing(inc, p)
	h.mu.Unlock()
	err := h.rt.Agents().Dispose(ctx, inc.id)
	if errors.Is(err, messages.ErrOwnerUnknown) {
		err = nil
	}
	if err == nil {
		h.mu.Lock()
		h.forget(inc)
		h.mu.Unlock()
	}
	return err
}

// forget drops inc and its descendants from the live map. Called with h.mu held.
func (h *harness) forget(inc *incarnation) {
	if h.live[inc.id] == inc {
		delete(h.live, inc.id)
	}
	for _, c := range inc.children {
		h.forget(c)
	}
}

// start starts a task of kind for owner (inc is its incarnation, nil for unowned)
// and records it. For a sub-agent, behavior is what its child run does.
func (h *harness) start(ctx context.Context, inc *incarnation, owner messages.AgentID, kind string, rng *rand.Rand) (messages.TaskID, error) {
	var spec messages.Spec
	switch kind {
	case bash.Kind:
		spec = h.bash.Spec(owner, bash.Command{Command: pickCommand(rng)})
	default:
		b := pickBehavior(rng, depthOf(owner))
		spec = h.sub.Spec(owner, subagent.Brief{Description: "stress " + b, Prompt: b})
	}
	log := &cancelLog{}
	run := spec.Run
	spec.Run = func() (messages.Hooks, error) {
		hooks, err := run()
		if err != nil {
			return hooks, err
		}
		cancel := hooks.Cancel
		hooks.Cancel = func(reason string) error {
			log.add(reason)
			return cancel(reason)
		}
		return hooks, nil
	}
	id, err := h.rt.Tasks().Start(ctx, spec)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rec(id)
	r.kind, r.owner, r.inc, r.started, r.cancels = spec.Kind, owner, inc, true, log
	if owner == "" {
		h.unowned = append(h.unowned, id)
	} else {
		h.owned = append(h.owned, id)
	}
	return id, nil
}

// saw records a snapshot a call returned for id.
func (h *harness) saw(id messages.TaskID, s messages.Snapshot, by string, reports bool) {
	if !s.Status.Terminal() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rec(id)
	r.seen = append(r.seen, s.Status)
	r.seenBy = append(r.seenBy, by)
	if reports && r.reportedBy == "" {
		r.reportedBy = by
	}
}

// reported records that a call returned id's end to its caller (a kill of a
// terminal task), which marks the task reported.
func (h *harness) reported(id messages.TaskID, by string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rec(id); r.reportedBy == "" {
		r.reportedBy = by
	}
}

func (h *harness) progress(w io.Writer, began time.Time, every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for last := false; !last; {
		select {
		case <-done:
			last = true
		case <-t.C:
		}
		s := h.rt.Stats()
		h.mu.Lock()
		n, v := len(h.tasks), len(h.violations)
		h.mu.Unlock()
		fmt.Fprintf(w, "  %4.0fs  tasks started %d, running %d, records %d, agents %d, actors %d, processes %d, violations so far %d\n",
			time.Since(began).Seconds(), n, s.Running, s.Tasks, s.Agents, s.Actors, h.bash.Live(), v)
	}
}

// settleGoroutines polls the goroutine count until it is at most baseline or limit
// passes, and returns the last count.
func settleGoroutines(baseline int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settleProcesses polls the live processes of p's tasks until there are none or limit
// passes. (leakcheck.Machine would count every process on the machine that carries
// a bash task marker, including those of other programs' producers, such as a
// concurrent go test of producers/bash; p.Live counts this run's only.)
func settleProcesses(p *bash.Producer, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := p.Live()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goroutineDump() string {
	buf := make([]byte, 64<<10)
	return string(buf[:runtime.Stack(buf, true)])
}

// logRecorder is the runtime's slog handler: it keeps the error-level records (a
// contained panic, a contract violation, a failed cleanup), which a healthy run does
// not produce.
type logRecorder struct {
	mu   sync.Mutex // protects errs
	errs []string
}

func (l *logRecorder) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler             { return l }
func (l *logRecorder) WithGroup(string) slog.Handler                  { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 50 {
		l.errs = append(l.errs, s)
	}
	return nil
}

func (l *logRecorder) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// markedProcesses describes the live processes that carry a bash task marker of this
// process, for a violation message.
func markedProcesses() string {
	prefix := strconv.Itoa(os.Getpid()) + "."
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' || pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			continue
		}
		var marker string
		for kv := range strings.SplitSeq(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "TASKRT_BASH_TASK="); ok {
				marker = v
			}
		}
		if !strings.HasPrefix(marker, prefix) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + pid + "/stat")
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		fmt.Fprintf(&b, "    pid %s marker %s cmd %q stat %s\n", pid, marker,
			strings.ReplaceAll(string(cmd), "\x00", " "), strings.TrimSpace(string(stat)))
	}
	return b.String()
}
