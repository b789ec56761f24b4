package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// kind is the task kind of remote commands: they are bash commands, and the model
// sees them as such ("bash-N").
const kind = bash.Kind

// ErrNoWorker is what a start fails with when no worker has a free slot. Nothing
// was started and, through the runtime, no id was burned.
var ErrNoWorker = errors.New("remote: no worker with a free slot")

// ErrClosed is what a start on a closed Producer fails with.
var ErrClosed = errors.New("remote: producer closed")

// Producer is an owner node's remote producer: it runs bash commands on workers
// (taskrt-worker), while the runtime that holds its tasks keeps every record,
// fence, buffer and notice here. It is a tools.BashRunner (Spec, Run) like
// *bash.Producer. Create it with New; it is safe for concurrent use; Close it after
// the runtime that uses it.
type Producer struct {
	nc    *nats.Conn
	cfg   config
	subj  subjects
	node  string
	lease *holder
	watch *watcher
	stop  context.CancelFunc
	wg    sync.WaitGroup // the lease and watch goroutines and every task's killer
	subs  []*nats.Subscription

	// Tests: lose drops frames as if lost on the way; dups counts the bytes of
	// frames that arrived again (retransmissions) and were not taken twice.
	lose atomic.Pointer[func(frame) bool]
	dups atomic.Int64

	mu     sync.Mutex // protects tasks, seq and closed
	tasks  map[string]*rtask
	seq    uint64
	closed bool

	cbMu         sync.Mutex // protects the callbacks below
	onFence      []func(epoch uint64)
	onOwnerEnded []func(node string, epoch uint64)
}

// rtask is the owner node's side of one remote command.
type rtask struct {
	p      *Producer
	key    string
	epoch  uint64 // the owner lease epoch it runs under
	stdin  bash.Stdin
	block  bool // bash.Command.BlockOutput
	out    *output.Buffer
	done   chan messages.Outcome // buffered; exactly one Outcome
	ended  chan struct{}         // closed at settlement
	ctx    context.Context       // ends at settlement: bounds input requests
	endCtx context.CancelFunc

	// held: the worker said that the command waits for credit at what this node
	// holds now (block mode). Atomic: Full reads it from the buffer's growth
	// callback, which runs under wmu when a frame is written.
	held atomic.Bool

	cancelOnce sync.Once
	cancelled  chan struct{} // closed by the first Cancel

	// scope-owned (WithScopes, Adopt): the scope and its epoch; "" for a command
	// of this node
	scope      string
	scopeEpoch uint64
	detached   atomic.Bool // scope-owned, and this node's lease was lost: its next home adopts it

	// protected by p.mu
	worker   string
	wepoch   uint64
	reason   string
	settled  bool
	exitCode int

	wmu       sync.Mutex // protects the fields below: output writes against settlement, grants
	next      int64      // the worker-side offset of the next output byte expected
	outClosed bool
	granted   int64       // the limit of the last grant: it never goes back
	ackSent   int64       // the acknowledgement of the last grant
	ackTimer  *time.Timer // sends a grant ackDelay after output that did not ask for one at once
	ackArmed  bool        // ackTimer is set to fire
	wworker   string      // the worker: where grants go
	resentAt  int64       // next when a resend was last asked for (-1: never)
	onGrow    func()      // the runtime's growth callback (rout.OnGrow): also told when the task becomes full

	// Scope-owned tasks only (cursor.go): the read cursor and the adoption.
	rc         int64             // this node's consuming read cursor in out
	marks      []offMark         // where out's offsets and the worker's part (markers of dropped bytes)
	cursorSent int64             // the worker-side cursor of the last grant
	blockCap   int64             // out's room when empty (block mode)
	pending    *messages.Outcome // adopted after it ended: settles once the output up to pendingAt is here
	pendingAt  int64
	heard      bool        // a frame came from the worker since the adoption
	confirm    *time.Timer // resends an adopter's first grant until a frame comes
}

// New connects an owner node to the workers on nc: it makes sure the lease bucket
// exists, acquires this node's lease (a new node id, a new epoch) and subscribes
// to its subjects. nc should be made with Connect's options (or the same settings:
// no reconnect buffer). Close the Producer to end its lease.
func New(nc *nats.Conn, opts ...Option) (*Producer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := checkName("prefix", cfg.prefix); err != nil {
		return nil, err
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	p := &Producer{nc: nc, cfg: cfg, subj: subjects{cfg.prefix}, node: hex.EncodeToString(idb[:]), tasks: map[string]*rtask{}}
	log := cfg.logger.With("node", p.node)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	fail := func(err error) (*Producer, error) {
		cancel()
		p.wg.Wait()
		for _, s := range p.subs {
			_ = s.Unsubscribe()
		}
		return nil, fmt.Errorf("remote: owner node: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	sctx, scancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer scancel()
	kv, err := ensureBucket(sctx, js, p.subj.bucket(), cfg.replicas)
	if err != nil {
		return fail(err)
	}
	p.watch = newWatcher(kv, renewEvery(cfg.lease)/2, log, p.leaseGone)
	kw, err := watchAll(ctx, sctx, kv)
	if err != nil {
		return fail(err)
	}
	p.wg.Go(func() { p.watch.run(ctx, kw) })
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{{p.subj.out(p.node), p.onOut}, {p.subj.done(p.node), p.onDone}} {
		sub, err := nc.Subscribe(s.subj, s.h)
		if err != nil {
			return fail(err)
		}
		p.subs = append(p.subs, sub)
	}
	if err := nc.FlushTimeout(cfg.startTimeout); err != nil {
		return fail(err)
	}
	p.lease = &holder{kv: kv, key: ownerKey(p.node), d: cfg.lease, log: log, fence: p.fence,
		value: leaseValue{Kind: "owner", Name: p.node, DurationMS: cfg.lease.Milliseconds()}}
	if err := p.lease.acquire(sctx); err != nil {
		return fail(err)
	}
	p.wg.Go(func() { p.lease.run(ctx) })
	log.Info("remote: owner node ready", "lease", cfg.lease)
	return p, nil
}

// Node is this owner node's id, as in its lease key (owner.<node>) and subjects.
func (p *Producer) Node() string { return p.node }

// Epoch is the epoch of this node's current lease, or an error while it holds none.
func (p *Producer) Epoch() (uint64, error) { return p.lease.current() }

// Live counts the remote commands of this node that have not settled.
func (p *Producer) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tasks)
}

// Close ends the node: every command still live settles failed (their workers
// kill them once they see the lease end, at once), the lease is deleted, and every
// goroutine of the Producer has returned. Close the runtime first: its tasks then
// end cleanly through Cancel. Idempotent.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	live := make([]*rtask, 0, len(p.tasks))
	for _, t := range p.tasks {
		live = append(live, t)
	}
	p.mu.Unlock()
	for _, t := range live {
		t.settle(messages.Outcome{Status: messages.Failed, Detail: "remote producer closed"})
	}
	p.stop()
	p.wg.Wait()
	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
	p.lease.release(ctx)
	return nil
}

// Spec declares c as a background task of owner, run on a worker: kind "bash", the
// command's first line as its label, Start as Run; with WithScopes, a command of
// a scope's owner belongs to the scope.
func (p *Producer) Spec(owner messages.AgentID, c bash.Command) messages.Spec {
	return messages.Spec{
		Kind:  kind,
		Label: label(c.Command),
		Owner: owner,
		Run: func() (messages.Hooks, error) {
			var scope string
			var epoch uint64
			if p.cfg.scopeOf != nil {
				if s, e, ok := p.cfg.scopeOf(owner); ok {
					scope, epoch = s, e
				}
			}
			t, err := p.start(c, scope, epoch)
			if err != nil {
				return messages.Hooks{}, err
			}
			return t.hooks(), nil
		},
	}
}

// Start runs c on a worker with a free slot and returns the hooks of the task.
// An error means nothing runs: no worker had a free slot (ErrNoWorker), the
// node holds no lease, or the worker could not start the command (its error).
//
// The hooks: Output is the node's copy of the command's output, streamed from the
// worker with flow control; Cancel asks the worker to kill the command (retrying
// until it answers or is lost) and never fails; Done delivers the worker's
// outcome once the command's processes are gone there, or failed with "worker
// lost: <name>" when the worker's lease ends first, or failed with "owner lease
// lost" when this node's own lease does; Input (StdinPipe, StdinTTY) writes to the
// command's input on the worker; Release frees the output; Ref is the command's
// key, unique in the deployment. Start's commands are this node's: Spec's may
// belong to a scope (WithScopes).
func (p *Producer) Start(c bash.Command) (messages.Hooks, error) {
	t, err := p.start(c, "", 0)
	if err != nil {
		return messages.Hooks{}, err
	}
	return t.hooks(), nil
}

// hooks are the task's hooks for the runtime.
func (t *rtask) hooks() messages.Hooks {
	out := rout{t.out, t}
	h := messages.Hooks{
		Cancel:     t.cancel,
		Done:       t.done,
		ReadOutput: out.Read,
		Output:     out,
		Release:    t.release,
		Ref:        t.key,
	}
	if t.stdin != bash.StdinNone {
		h.Input = t.input
	}
	return h
}

// Run runs c on a worker in the foreground, as bash.Producer.Run does locally: it
// returns when the command's processes are gone on the worker (or the worker is
// lost); timeout and ctx cancel it like a kill.
func (p *Producer) Run(ctx context.Context, c bash.Command, timeout time.Duration) (bash.Result, error) {
	if err := ctx.Err(); err != nil {
		return bash.Result{}, err
	}
	if c.Stdin != bash.StdinNone {
		return bash.Result{}, fmt.Errorf("%w: a foreground command takes no input (stdin %s is for background commands)", bash.ErrInvalidCommand, c.Stdin)
	}
	if c.BlockOutput {
		// Nobody reads a foreground command's output before it ends.
		return bash.Result{}, fmt.Errorf("%w: BlockOutput is for background commands: a foreground run reads its output only at the end", bash.ErrInvalidCommand)
	}
	t, err := p.start(c, "", 0)
	if err != nil {
		return bash.Result{}, err
	}
	var timeoutC <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timeoutC = timer.C
	}
	var res bash.Result
	var ctxErr error
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
	p.mu.Lock()
	res.ExitCode = t.exitCode
	p.mu.Unlock()
	t.out.Release()
	return res, ctxErr
}

// start places c on a worker: it registers the task (so that output arriving
// before the answer is kept), asks P.start, and tries again when the worker that
// answered was full after all.
func (p *Producer) start(c bash.Command, scope string, scopeEpoch uint64) (*rtask, error) {
	if len(c.Command) > bash.MaxCommand || strings.TrimSpace(c.Command) == "" {
		return nil, fmt.Errorf("remote: invalid command: empty or over %d bytes", bash.MaxCommand)
	}
	if c.Stdin > bash.StdinTTY {
		return nil, fmt.Errorf("%w: %s", bash.ErrInvalidCommand, c.Stdin)
	}
	epoch, err := p.lease.current()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	p.seq++
	key := p.node + "-" + strconv.FormatUint(p.seq, 10)
	t := p.newTask(key, epoch, c.Stdin, c.BlockOutput, scope, scopeEpoch, 0)
	p.tasks[key] = t
	p.mu.Unlock()
	fail := func(err error) (*rtask, error) {
		p.mu.Lock()
		delete(p.tasks, key)
		p.mu.Unlock()
		t.endCtx()
		t.out.Release()
		return nil, err
	}
	t.wmu.Lock()
	t.granted = t.limitLocked()
	t.wmu.Unlock()
	req := encode(startReq{Task: key, Owner: p.node, Epoch: epoch, Command: c.Command, Dir: c.Dir, Env: c.Env,
		Stdin: c.Stdin.String(), Limits: c.Limits, Block: c.BlockOutput, Grant: t.granted, Scope: scope, ScopeEpoch: scopeEpoch})
	var rep startReply
	for attempt := 0; ; attempt++ {
		msg, err := p.nc.Request(p.subj.start(), req, p.cfg.startTimeout)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return fail(fmt.Errorf("%w (none is connected, or all are busy)", ErrNoWorker))
		case errors.Is(err, nats.ErrTimeout):
			// A worker may have started it after all: its output or outcome for this
			// unknown task is answered with a kill (onOut, onDone).
			return fail(fmt.Errorf("remote: no worker answered the start within %s", p.cfg.startTimeout))
		case err != nil:
			return fail(fmt.Errorf("remote: start: %w", err))
		}
		rep = startReply{}
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			return fail(fmt.Errorf("remote: malformed start reply: %w", err))
		}
		if rep.Full && attempt < 3 {
			continue
		}
		break
	}
	switch {
	case rep.Full:
		return fail(fmt.Errorf("%w (every worker that answered was busy)", ErrNoWorker))
	case rep.Err != "":
		return fail(errors.New(rep.Err))
	}
	p.mu.Lock()
	t.worker, t.wepoch = rep.Worker, rep.Epoch
	p.mu.Unlock()
	t.wmu.Lock()
	t.wworker = rep.Worker
	t.wmu.Unlock()
	if p.watch.ended(workerKey(rep.Worker), rep.Epoch) {
		t.settle(lostOutcome(rep.Worker)) // the worker's lease ended while it answered
	}
	return t, nil
}

// newTask makes the owner node's side of a command whose output this node takes
// from the worker-side offset base on. p.mu must be held.
func (p *Producer) newTask(key string, epoch uint64, stdin bash.Stdin, block bool, scope string, scopeEpoch uint64, base int64) *rtask {
	oopts := p.cfg.outOpts
	if block {
		oopts = append(oopts[:len(oopts):len(oopts)], output.WithBlocking())
	}
	t := &rtask{p: p, key: key, epoch: epoch, stdin: stdin, block: block, out: output.New(oopts...), done: make(chan messages.Outcome, 1),
		ended: make(chan struct{}), cancelled: make(chan struct{}), exitCode: -1, resentAt: -1,
		scope: scope, scopeEpoch: scopeEpoch, next: base, granted: base, ackSent: base, cursorSent: base}
	t.ctx, t.endCtx = context.WithCancel(context.Background())
	if scope != "" {
		t.marks = []offMark{{local: 0, worker: base}}
		if block {
			t.blockCap = t.out.Room()
		}
	}
	return t
}

func lostOutcome(worker string) messages.Outcome {
	return messages.Outcome{Status: messages.Failed, Detail: "worker lost: " + worker}
}

// settle delivers o unless the task has settled already.
func (t *rtask) settle(o messages.Outcome) bool {
	p := t.p
	p.mu.Lock()
	if t.settled {
		p.mu.Unlock()
		return false
	}
	t.settled = true
	if p.tasks[t.key] == t { // an adoption may have put this node's new record of the command there
		delete(p.tasks, t.key)
	}
	p.mu.Unlock()
	t.wmu.Lock()
	t.outClosed = true
	t.held.Store(false)
	_ = t.out.Close()
	if t.ackTimer != nil {
		t.ackTimer.Stop()
	}
	if t.confirm != nil {
		t.confirm.Stop()
	}
	t.wmu.Unlock()
	close(t.ended)
	t.endCtx()
	t.done <- o
	return true
}

// cancel is Hooks.Cancel: it records the reason and has the task's killer ask the
// worker, retrying until it answers or the task settles (the worker lost, say),
// and ends block mode here (the worker ends it there). It never blocks and never
// fails.
//
// A detached task (scope-owned, this node's lease lost) settles at once here,
// without a word to the worker: the scope's next home adopts the command.
func (t *rtask) cancel(reason string) error {
	t.unblock()
	t.cancelOnce.Do(func() {
		p := t.p
		p.mu.Lock()
		t.reason = reason
		close(t.cancelled)
		detached := t.detached.Load()
		if !p.closed && !t.settled && !detached {
			p.wg.Go(t.killer)
		}
		p.mu.Unlock()
		if detached {
			t.settle(detachedOutcome)
		}
	})
	return nil
}

// release is Hooks.Release: it frees the output and, for a scope-owned task,
// tells the worker to drop what it kept of the command (a few tries, in the
// background). A detached task's command is not this node's to release.
func (t *rtask) release() {
	t.out.Release()
	if t.scope == "" || t.detached.Load() {
		return
	}
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || t.worker == "" || p.watch.ended(workerKey(t.worker), t.wepoch) {
		return
	}
	req, subj := encode(releaseReq{Task: t.key, Owner: p.node, Epoch: t.epoch}), p.subj.release(t.worker)
	p.wg.Go(func() {
		for range releaseTries {
			_, err := p.nc.Request(subj, req, 2*retransmit)
			if err == nil || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrNoResponders) {
				return
			}
		}
	})
}

// releaseTries is how many times a release is sent without an answer.
const releaseTries = 3

// movedOutcome settles a scope-owned task whose kill the worker did not know: it
// was adopted away (this node is a stale home) or dropped.
var movedOutcome = messages.Outcome{Status: messages.Failed, Detail: "moved: another frontend adopted its scope (or its worker dropped it)"}

// detachedOutcome settles a detached task that is cancelled on this node.
var detachedOutcome = messages.Outcome{Status: messages.Failed, Detail: "detached: this frontend lost its lease; another frontend adopts its scope"}

// killer sends the kill until the worker answers it, or the task settles.
func (t *rtask) killer() {
	p := t.p
	retry := max(renewEvery(p.cfg.lease), 100*time.Millisecond)
	for {
		p.mu.Lock()
		req := encode(killReq{Task: t.key, Owner: p.node, Epoch: t.epoch, Reason: t.reason})
		worker, detached := t.worker, t.detached.Load()
		p.mu.Unlock()
		if detached {
			return // fence settled it: a stale home does not act
		}
		ctx, cancel := context.WithTimeout(t.ctx, retry)
		msg, err := p.nc.RequestWithContext(ctx, p.subj.kill(worker), req)
		cancel()
		if err == nil {
			var r reply
			if json.Unmarshal(msg.Data, &r) == nil && r.Unknown && t.scope != "" {
				// The worker keeps a scope-owned command until it is released: not
				// knowing it means that another node adopted it (or it was dropped).
				t.settle(movedOutcome)
				return
			}
			if json.Unmarshal(msg.Data, &r) == nil && (r.Err == "" || r.Unknown) {
				return // the outcome follows on Done (or the task is already settling)
			}
		}
		timer := time.NewTimer(retry)
		select {
		case <-t.ended:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// input is Hooks.Input: a request answered once the worker wrote the data.
func (t *rtask) input(data []byte, eof bool) error {
	p := t.p
	p.mu.Lock()
	worker, settled, detached := t.worker, t.settled, t.detached.Load()
	p.mu.Unlock()
	ended := fmt.Errorf("remote: the command has ended: %w", messages.ErrTaskEnded)
	if settled {
		return ended
	}
	if detached {
		return errors.New("remote: " + detachedOutcome.Detail)
	}
	// The request ends with its answer, or a moment after the task settled: the
	// answer to a write that ended the command (eof) may come after its outcome.
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		select {
		case <-answered:
		case <-t.ended:
			grace := time.NewTimer(retransmit)
			defer grace.Stop()
			select {
			case <-answered:
			case <-grace.C:
			}
		}
	})
	msg, err := p.nc.RequestWithContext(ctx, p.subj.input(worker), encode(inputReq{Task: t.key, Owner: p.node, Epoch: t.epoch, Data: data, EOF: eof}))
	close(answered)
	wg.Wait()
	if err != nil {
		if ctx.Err() != nil {
			return ended
		}
		return fmt.Errorf("remote: input to worker %s: %w", worker, err)
	}
	var r reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return fmt.Errorf("remote: malformed input reply: %w", err)
	}
	switch {
	case r.Ended, r.Unknown:
		return ended
	case r.Closed:
		return fmt.Errorf("remote: %w", messages.ErrInputClosed)
	case r.Err != "":
		return errors.New(r.Err)
	}
	return nil
}

// onDone takes a task's outcome (P.o.<node>.done) and acknowledges it, also when
// the task has settled already (a repeat, or the worker was declared lost first:
// the first outcome wins).
func (p *Producer) onDone(msg *nats.Msg) {
	var m doneMsg
	if err := json.Unmarshal(msg.Data, &m); err != nil {
		return
	}
	p.mu.Lock()
	t := p.tasks[m.Task]
	if t != nil && t.detached.Load() {
		p.mu.Unlock()
		return // a stale home takes nothing: the worker reports to the adopter
	}
	if t != nil {
		t.exitCode = m.ExitCode
	}
	p.mu.Unlock()
	if t != nil {
		t.wmu.Lock()
		if missing := m.Written - t.next; missing > 0 && !t.outClosed {
			if t.block {
				t.out.Unblock() // this callback must never wait for a read
			}
			fmt.Fprintf(t.out, "\n[remote: %d bytes of output were not kept on the worker]\n", missing)
			t.markLocked(m.Written)
			t.next = m.Written
		}
		t.wmu.Unlock()
		t.settle(messages.Outcome{Status: messages.Status(m.Status), Detail: m.Detail})
	}
	_ = msg.Respond(encode(reply{}))
}

// leaseGone is the watcher's report of an ended lease. A worker's: every task of
// this node on that worker under that epoch settles failed, "worker lost: <name>".
func (p *Producer) leaseGone(kind, name string, epoch uint64) {
	if kind == "owner" && name != p.node {
		p.cbMu.Lock()
		fns := p.onOwnerEnded
		p.cbMu.Unlock()
		for _, fn := range fns {
			fn(name, epoch)
		}
	}
	if kind != "worker" {
		return
	}
	p.mu.Lock()
	var lost []*rtask
	for _, t := range p.tasks {
		if t.worker == name && t.wepoch == epoch {
			lost = append(lost, t)
		}
	}
	p.mu.Unlock()
	for _, t := range lost {
		t.settle(lostOutcome(name))
	}
}

// fence is the lease holder's self-fence: this node may no longer hold its lease,
// so every remote task under that epoch settles failed now, before any worker acts
// on the lapse (they kill those commands when they see the lease end). A
// scope-owned task is detached instead (the workers keep it for the scope's next
// home): its output stays as it is, and a Cancel settles it here at once; one
// already cancelled settles now. The OnFence callbacks run once the scope-owned
// tasks are detached, before the node's own tasks settle.
func (p *Producer) fence(epoch uint64, why string) {
	// Detached first: a callback that ends the scopes' owners then cancels
	// their tasks here only, never on the workers.
	p.mu.Lock()
	var live, cancelled []*rtask
	for _, t := range p.tasks {
		if t.epoch != epoch {
			continue
		}
		if t.scope == "" {
			live = append(live, t)
			continue
		}
		t.detached.Store(true)
		if isClosed(t.cancelled) {
			cancelled = append(cancelled, t)
		}
	}
	p.mu.Unlock()
	p.cbMu.Lock()
	fns := p.onFence
	p.cbMu.Unlock()
	for _, fn := range fns {
		fn(epoch)
	}
	for _, t := range live {
		t.settle(messages.Outcome{Status: messages.Failed, Detail: "owner lease lost: " + why})
	}
	for _, t := range cancelled {
		t.settle(detachedOutcome)
	}
}

// label is a command's task label, as the bash producer makes it: the first line,
// marked with " …" when more lines follow.
func label(command string) string {
	command = strings.TrimSpace(command)
	if first, _, more := strings.Cut(command, "\n"); more {
		return strings.TrimSpace(first) + " …"
	}
	return command
}
