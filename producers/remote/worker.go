package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// WorkerEnv is the environment variable that tells a command which worker runs it.
const WorkerEnv = "TASKRT_WORKER"

// Worker runs the commands that owner nodes place on it, with a bash producer of
// its own (cgroup containment, limits, stdin modes as for local tasks). Create it
// with NewWorker; Close it to kill its commands and end its lease.
type Worker struct {
	nc    *nats.Conn
	cfg   config
	subj  subjects
	name  string
	dir   string
	bash  *bash.Producer
	kv    jetstream.KeyValue
	lease *holder
	watch *watcher
	stop  context.CancelFunc // ends the lease, the watch and pending reports
	wg    sync.WaitGroup     // every goroutine of the worker
	subs  []*nats.Subscription
	out   *budget // output in flight, over every task
	chunk int64   // the most output bytes in a frame
	// Tests: loseGrant drops grants as if lost on the way; goBacks counts the
	// times a task sent its output again from what its owner holds.
	loseGrant atomic.Pointer[func(grant) bool]
	goBacks   atomic.Int64

	mu       sync.Mutex // protects tasks, running, idle, startSub, closing, started and order
	tasks    map[string]*wtask
	running  int                // tasks whose processes may live: the slots taken
	idle     chan struct{}      // closed while tasks is empty
	startSub *nats.Subscription // nil while every slot is taken (or closing)
	closing  bool
	shut     chan struct{}   // closed when Close begins: kept scope-owned tasks are dropped
	started  map[string]bool // the last maxRemembered task keys started here: a replayed start never runs twice
	order    []string        // started's keys, oldest first
	exits    sync.WaitGroup  // one per task until its processes are gone
	ctx      context.Context // ends at Close, after the reports had their chance
}

// wtask is the worker's side of one command.
type wtask struct {
	w      *Worker
	key    string
	wepoch uint64 // this worker's lease epoch when the task started
	h      messages.Hooks
	wake   chan struct{} // 1-buffered: output grew, a grant came, or budget was freed
	exited chan struct{} // closed once Done delivered (the processes are gone)
	inputs chan inputJob // StdinPipe, StdinTTY: input in arrival order
	gone   chan struct{} // closed when the task is dropped (its owner ended, an orphan expired): report nothing
	once   sync.Once     // closes gone
	flow   flow          // what was sent, acknowledged and granted; where frames go
	rd     *outReader    // reads the output for frames; the stream goroutine's
	blk    blockOutput   // the output in block mode; nil otherwise
	fin    chan struct{} // closed when the task is gone from the worker
	// fenced is set by the worker's self-fence before it kills the command: the
	// outcome it then reports is "worker lost", as the owner would settle it on the
	// lapse, not the kill's own (the model never asked for one).
	fenced atomic.Bool

	// As started: what an adoption reports.
	scope   string // "" for a command of the owner node; else its scope (scope.go)
	label   string
	block   bool
	stdin   bash.Stdin
	rel     chan struct{} // closed when the owner released a kept scope-owned task
	relOnce sync.Once

	// protected by w.mu: an adoption changes the owner
	owner      string
	epoch      uint64 // the owner node's lease epoch
	scopeEpoch uint64
	state      ownState
	timer      *time.Timer // orphaned or awaiting: drops the task when it fires
	timerGen   uint64      // which timer is current
	outcome    *messages.Outcome
}

type inputJob struct {
	msg *nats.Msg
	req inputReq
}

// NewWorker starts a worker on nc: a bash producer, the lease worker.<name>
// (waiting up to twice the lease for a previous holder of the name to lapse), and
// the subscriptions. It is ready when NewWorker returns.
func NewWorker(nc *nats.Conn, opts ...Option) (*Worker, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.name == "" {
		cfg.name = defaultName()
	}
	for _, c := range []struct{ what, v string }{{"prefix", cfg.prefix}, {"worker name", cfg.name}} {
		if err := checkName(c.what, c.v); err != nil {
			return nil, err
		}
	}
	dir := cfg.dir
	if dir == "" {
		d, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("remote: worker directory: %w", err)
		}
		dir = d
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("remote: worker directory %s is not a directory", dir)
	}
	grace := cfg.grace
	if grace == 0 {
		grace = min(bash.DefaultGrace, cfg.lease/4)
	}
	bopts := append([]bash.Option{bash.WithLogger(cfg.logger)}, cfg.bashOpts...)
	bopts = append(bopts, bash.WithGrace(grace))
	w := &Worker{nc: nc, cfg: cfg, subj: subjects{cfg.prefix}, name: cfg.name, dir: dir,
		bash: bash.New(bopts...), tasks: map[string]*wtask{}, idle: make(chan struct{}), shut: make(chan struct{})}
	close(w.idle)
	w.chunk = min(maxChunk, nc.MaxPayload()-maxFrameHeader)
	w.out = newBudget(cfg.budget, w.chunk)
	log := cfg.logger.With("worker", w.name)
	ctx, cancel := context.WithCancel(context.Background())
	w.stop, w.ctx = cancel, ctx
	fail := func(err error) (*Worker, error) {
		cancel()
		w.wg.Wait()
		for _, s := range w.subs {
			_ = s.Unsubscribe()
		}
		return nil, fmt.Errorf("remote: worker %s: %w", w.name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	sctx, scancel := context.WithTimeout(ctx, max(2*lapseAfter(cfg.lease), cfg.startTimeout))
	defer scancel()
	if w.kv, err = ensureBucket(sctx, js, w.subj.bucket(), cfg.replicas); err != nil {
		return fail(err)
	}
	w.watch = newWatcher(w.kv, renewEvery(cfg.lease)/2, log, w.leaseGone)
	kw, err := watchAll(ctx, sctx, w.kv)
	if err != nil {
		return fail(err)
	}
	w.wg.Go(func() { w.watch.run(ctx, kw) })
	w.lease = &holder{kv: w.kv, key: workerKey(w.name), d: cfg.lease, log: log, fence: w.fence,
		value: leaseValue{Kind: "worker", Name: w.name, DurationMS: cfg.lease.Milliseconds()}}
	if err := w.lease.acquire(sctx); err != nil {
		return fail(fmt.Errorf("%w (is another worker of that name running?)", err))
	}
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{w.subj.kill(w.name), w.onKill}, {w.subj.input(w.name), w.onInput}, {w.subj.ack(w.name), w.onAck},
		{w.subj.release(w.name), w.onRelease}, {w.subj.adopt(), w.onAdopt}} {
		sub, err := nc.Subscribe(s.subj, s.h)
		if err != nil {
			return fail(err)
		}
		w.subs = append(w.subs, sub)
	}
	w.mu.Lock()
	err = w.offerSlotLocked()
	w.mu.Unlock()
	if err == nil {
		err = nc.FlushTimeout(cfg.startTimeout)
	}
	if err != nil {
		w.lease.release(context.Background())
		return fail(err)
	}
	w.wg.Go(func() { w.lease.run(ctx) })
	log.Info("remote: worker ready", "max_tasks", cfg.maxTasks, "dir", dir, "lease", cfg.lease, "containment", w.bash.Containment().String())
	return w, nil
}

// defaultName is a worker's default name: the host name, with every character a
// subject token cannot hold replaced by "-".
func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "worker"
	}
	b := []byte(h)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.name }

// Containment is the containment mode of the worker's bash producer.
func (w *Worker) Containment() bash.Containment { return w.bash.Containment() }

// Live counts the commands the worker holds (running, reporting their end, or
// scope-owned and kept after it until released).
func (w *Worker) Live() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.tasks)
}

// Drained returns a channel that is closed once the worker holds no command (at
// once when it holds none now).
func (w *Worker) Drained() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idle
}

// Processes counts the live processes of the worker's commands (a /proc scan).
func (w *Worker) Processes() int { return w.bash.Live() }

// Close stops taking work, kills every command (SIGTERM, SIGKILL after the grace),
// waits until their processes are gone and their owners were told (within ctx),
// ends the lease and returns when every goroutine of the worker has. Idempotent.
func (w *Worker) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	close(w.shut)
	if w.startSub != nil {
		_ = w.startSub.Unsubscribe()
		w.startSub = nil
	}
	live := make([]*wtask, 0, len(w.tasks))
	for _, t := range w.tasks {
		live = append(live, t)
		t.stopTimerLocked()
	}
	w.mu.Unlock()
	for _, t := range live {
		t.lift()
		_ = t.h.Cancel("worker shutting down")
	}
	w.exits.Wait() // every process is gone
	reported := make(chan struct{})
	go func() {
		for _, t := range live {
			<-t.finished()
		}
		close(reported)
	}()
	// The owners had a lease's worth of time to take the outcomes; past it they
	// will see this worker's lease end instead.
	bound := time.NewTimer(w.cfg.lease)
	select {
	case <-reported:
	case <-ctx.Done():
	case <-bound.C:
	}
	bound.Stop()
	w.stop()
	<-reported
	w.wg.Wait()
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.lease.release(context.Background())
	return w.bash.Close() // the empty cgroups it kept for later commands
}

// offerSlotLocked subscribes to starts while a slot is free: the queue group then
// hands a start only to workers that can take it. w.mu must be held.
func (w *Worker) offerSlotLocked() error {
	if w.closing || w.startSub != nil || w.running >= w.cfg.maxTasks {
		return nil
	}
	sub, err := w.nc.QueueSubscribe(w.subj.start(), w.subj.startQueue(), w.onStart)
	if err != nil {
		return err
	}
	w.startSub = sub
	return nil
}

// onStart answers P.start: check the slot, this worker's lease and the owner
// node's epoch, start the command, answer with this worker's name and epoch.
func (w *Worker) onStart(msg *nats.Msg) {
	var r startReq
	answer := func(rep startReply) { _ = msg.Respond(encode(rep)) }
	if err := json.Unmarshal(msg.Data, &r); err != nil || checkName("owner node", r.Owner) != nil {
		answer(startReply{Err: "remote: malformed start request"})
		return
	}
	epoch, err := w.lease.current()
	if err != nil {
		answer(startReply{Full: true}) // another worker may hold its lease
		return
	}
	w.mu.Lock()
	full := w.closing || w.running >= w.cfg.maxTasks
	dup := w.started[r.Task]
	w.mu.Unlock()
	switch {
	case full:
		answer(startReply{Full: true})
		return
	case dup:
		answer(startReply{Err: "remote: task " + r.Task + " already ran or is already running on worker " + w.name + " (a replayed start)"})
		return
	}
	if err := w.checkOwner(r.Owner, r.Epoch); err != nil {
		answer(startReply{Err: err.Error()})
		return
	}
	if err := checkName("task key", r.Task); err != nil { // it names the task in the output's subjects
		answer(startReply{Err: err.Error()})
		return
	}
	stdin, err := bash.ParseStdin(r.Stdin)
	if err != nil {
		answer(startReply{Err: err.Error()})
		return
	}
	dir := w.dir
	if r.Dir != "" {
		dir = r.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(w.dir, dir)
		}
	}
	env := append(append([]string(nil), r.Env...), WorkerEnv+"="+w.name)
	h, err := w.bash.Start(bash.Command{Command: r.Command, Dir: dir, Env: env, Stdin: stdin, Limits: r.Limits, BlockOutput: r.Block})
	if err != nil {
		answer(startReply{Err: err.Error()})
		return
	}
	t := &wtask{w: w, key: r.Task, owner: r.Owner, epoch: r.Epoch, wepoch: epoch, h: h, wake: make(chan struct{}, 1),
		exited: make(chan struct{}), gone: make(chan struct{}), fin: make(chan struct{}), rel: make(chan struct{}),
		rd: newOutReader(h.Output), scope: r.Scope, scopeEpoch: r.ScopeEpoch, label: label(r.Command), block: r.Block, stdin: stdin}
	t.flow.head, t.flow.osubj = frameHead(r.Task, w.name, epoch, r.Epoch), w.subj.out(r.Owner)
	if b, ok := h.Output.(blockOutput); ok && r.Block {
		t.blk = b
	}
	t.flow.start(r.Grant)
	if h.Input != nil {
		t.inputs = make(chan inputJob, 4)
	}
	h.Output.OnGrow(t.poke)
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		_ = h.Cancel("worker shutting down")
		<-h.Done
		h.Release()
		answer(startReply{Err: "remote: worker " + w.name + " is shutting down"})
		return
	}
	if len(w.tasks) == 0 {
		w.idle = make(chan struct{})
	}
	w.tasks[r.Task] = t
	w.remember(r.Task)
	w.running++
	if w.running >= w.cfg.maxTasks && w.startSub != nil {
		_ = w.startSub.Unsubscribe()
		w.startSub = nil
	}
	w.exits.Add(1)
	w.wg.Go(t.stream)
	if t.inputs != nil {
		w.wg.Go(t.inputLoop)
	}
	w.mu.Unlock()
	if w.watch.ended(ownerKey(r.Owner), r.Epoch) {
		t.ownerGone() // the owner's lease ended while the command started
	}
	answer(startReply{Worker: w.name, Epoch: epoch})
}

// checkOwner refuses work under an epoch that is not the owner node's current
// lease: a stale command (the node was fenced, or lapsed, and holds a newer lease
// or none).
func (w *Worker) checkOwner(node string, epoch uint64) error {
	cur, gone, known := w.watch.state(ownerKey(node))
	if !known || cur < epoch {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.startTimeout)
		defer cancel()
		e, ok, err := lookup(ctx, w.kv, ownerKey(node))
		if err != nil {
			return fmt.Errorf("remote: worker %s: reading the lease of owner node %s: %w", w.name, node, err)
		}
		cur, gone = e, !ok
	}
	if gone || cur != epoch {
		return fmt.Errorf("remote: worker %s refuses the start: owner node %s's lease epoch %d is not current (stale command)", w.name, node, epoch)
	}
	return nil
}

// task finds a task for a request of node under epoch: the node's own task, under
// its epoch or an older one (a node that was fenced may still kill what it left),
// and the epoch the task runs under. A task that an adoption moved to another node
// is not the node's any more: its requests find nothing.
func (w *Worker) task(key, node string, epoch uint64) (*wtask, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tasks[key]
	if t == nil || t.owner != node || epoch < t.epoch {
		return nil, 0
	}
	return t, t.epoch
}

// onKill answers P.w.<name>.kill: Cancel the command (SIGTERM, SIGKILL after the
// grace); its outcome follows on P.o.<node>.done.
func (w *Worker) onKill(msg *nats.Msg) {
	var r killReq
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return
	}
	t, _ := w.task(r.Task, r.Owner, r.Epoch)
	if t == nil {
		_ = msg.Respond(encode(reply{Unknown: true}))
		return
	}
	if err := t.h.Cancel(r.Reason); err != nil {
		_ = msg.Respond(encode(reply{Err: err.Error()}))
		return
	}
	_ = msg.Respond(encode(reply{}))
}

// onInput answers P.w.<name>.input once the data is written (the task's input
// goroutine does the writing, in order).
func (w *Worker) onInput(msg *nats.Msg) {
	var r inputReq
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return
	}
	t, epoch := w.task(r.Task, r.Owner, r.Epoch)
	switch {
	case t == nil:
		_ = msg.Respond(encode(reply{Unknown: true}))
	case r.Epoch != epoch:
		_ = msg.Respond(encode(reply{Err: "remote: input under a stale owner epoch"}))
	case t.inputs == nil:
		_ = msg.Respond(encode(reply{Err: "remote: the command takes no input"}))
	default:
		select {
		case t.inputs <- inputJob{msg, r}:
		case <-t.exited:
			_ = msg.Respond(encode(reply{Ended: true}))
		default:
			_ = msg.Respond(encode(reply{Err: "remote: too many inputs in flight"}))
		}
	}
}

// leaseGone is the watcher's report of an ended lease. An owner node's: kill every
// command it placed here under that epoch (or an older one), and report nothing to
// it; a scope-owned one is orphaned instead (scope.go), for another node to adopt.
func (w *Worker) leaseGone(kind, name string, epoch uint64) {
	if kind != "owner" {
		return
	}
	w.mu.Lock()
	var dead []*wtask
	for _, t := range w.tasks {
		if t.owner == name && t.epoch <= epoch {
			if t.scope != "" {
				t.orphanLocked()
				continue
			}
			dead = append(dead, t)
		}
	}
	w.mu.Unlock()
	for _, t := range dead {
		t.ownerGone()
	}
}

// fence is the lease holder's self-fence: this worker may no longer hold its
// lease, so it kills every command now; their owners will treat this worker as
// lost.
func (w *Worker) fence(epoch uint64, why string) {
	w.mu.Lock()
	live := make([]*wtask, 0, len(w.tasks))
	for _, t := range w.tasks {
		live = append(live, t)
	}
	w.mu.Unlock()
	for _, t := range live {
		t.fenced.Store(true)
		_ = t.h.Cancel("worker fenced: " + why)
	}
}

// maxRemembered bounds the task keys a worker remembers against replayed starts.
// A start is replayed only from a reconnect buffer (which Connect disables) or a
// resent request, within moments; the owner's epoch fences anything older.
const maxRemembered = 4096

// remember records a started task key. w.mu must be held.
func (w *Worker) remember(key string) {
	if w.started == nil {
		w.started = map[string]bool{}
	}
	w.started[key] = true
	w.order = append(w.order, key)
	if len(w.order) > maxRemembered {
		delete(w.started, w.order[0])
		w.order = w.order[1:]
	}
}

// freeSlot gives back the slot of a task whose processes are gone.
func (w *Worker) freeSlot() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	if err := w.offerSlotLocked(); err != nil {
		w.cfg.logger.Warn("remote: cannot offer a slot", "worker", w.name, "err", err)
	}
}

func (t *wtask) ownerGone() {
	t.once.Do(func() {
		close(t.gone)
		_ = t.h.Cancel("owner node lease lapsed")
	})
}

func (t *wtask) finished() <-chan struct{} { return t.fin }

// inputLoop writes the task's input in arrival order until the command exits.
func (t *wtask) inputLoop() {
	answer := func(j inputJob, err error) {
		var r reply
		switch {
		case err == nil:
		case errors.Is(err, messages.ErrTaskEnded):
			r.Ended = true
		case errors.Is(err, messages.ErrInputClosed):
			r.Closed = true
		default:
			r.Err = err.Error()
		}
		_ = j.msg.Respond(encode(r))
	}
	for {
		select {
		case j := <-t.inputs:
			answer(j, t.h.Input(j.req.Data, j.req.EOF))
		case <-t.exited:
			for {
				select {
				case j := <-t.inputs:
					answer(j, messages.ErrTaskEnded)
				default:
					return
				}
			}
		}
	}
}

// exitCode is the shell's exit code in an outcome's detail ("exit code: N"), or -1.
func exitCode(o messages.Outcome) int {
	var n int
	if rest, ok := strings.CutPrefix(o.Detail, "exit code: "); ok {
		if _, err := fmt.Sscanf(rest, "%d", &n); err == nil {
			return n
		}
	}
	return -1
}
