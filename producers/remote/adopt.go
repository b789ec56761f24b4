package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// Adopted is one command of a scope that this node owns after Adopt.
type Adopted struct {
	Key    string         // the command's key (the same string as Hooks.Ref of the task that started it)
	Worker string         // the worker that runs it
	Label  string         // label(command), as Spec gives
	Exited bool           // the command had ended before the adoption: Hooks.Done delivers its outcome at once (once its unread output is here)
	Hooks  messages.Hooks // Output, Cancel, Done, Input, Release — as Start's, with Ref = Key
}

// Adopt makes this node the owner of every command of scope that any live worker
// holds under an older epoch of the scope (running, or ended and not yet released),
// and returns them. From the workers' answer on, the previous owner node's kills,
// inputs, grants and reads are refused for them (a stale home cannot act), their
// output and outcome come to this node, and reads resume at the scope's read cursor
// (what a consuming read on the previous owner had already returned is not returned
// again). An adoption under an epoch not newer than the one a command carries is
// refused for that command (it is not returned). Adopt asks every worker whose lease
// is live and waits for each answer until ctx ends; a worker that does not answer in
// time keeps its commands (they are then killed at its orphan grace); Adopt returns
// what it got, with an error naming the workers that did not answer.
//
// Each returned command's output starts empty at the read cursor: its Hooks.Output
// offsets count from there. A worker holds a moved command, sending nothing, until
// this node's first grant (sent here, and again until the worker answers); one
// that never comes drops the command at the worker's orphan grace. Repeating an
// adoption with the same epoch lists the commands it moved that still wait for that
// grant, except those this node holds already (a worker whose answer came late).
func (p *Producer) Adopt(ctx context.Context, scope string, epoch uint64) ([]Adopted, error) {
	if scope == "" {
		return nil, errors.New("remote: adopt: no scope")
	}
	nodeEpoch, err := p.lease.current()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	select { // the watch's first view of the leases: which workers to expect
	case <-p.watch.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("remote: adopt %s: the lease watch is not ready: %w", scope, ctx.Err())
	}
	got, missing, errs := p.gather(ctx, adoptReq{Scope: scope, ScopeEpoch: epoch, Owner: p.node, Epoch: nodeEpoch})
	var adopted []Adopted
	for _, a := range got {
		t, err := p.adoptOne(a, nodeEpoch, scope, epoch)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if t != nil {
			adopted = append(adopted, Adopted{Key: a.Key, Worker: a.Worker, Label: a.Label, Exited: a.Exited, Hooks: t.hooks()})
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		errs = append(errs, fmt.Sprintf("workers %s did not answer: %v", strings.Join(missing, ", "), ctx.Err()))
	}
	if len(errs) > 0 {
		return adopted, fmt.Errorf("remote: adopt %s: %s", scope, strings.Join(errs, "; "))
	}
	return adopted, nil
}

// gather sends req to every worker (P.adopt) and collects the answers until each
// worker whose lease the watch shows live has answered, or ctx ends: the commands
// moved, the live workers that did not answer, and the answers' errors. While some
// have not answered, the request goes out again every 500 ms (one lost on the way,
// or a worker whose lease showed before its subscription): a worker answers a
// repeat with the same commands, which are taken once.
func (p *Producer) gather(ctx context.Context, req adoptReq) (got []adoptedTask, missing, errs []string) {
	expect := p.watch.live("worker")
	inbox := p.nc.NewRespInbox()
	answers := make(chan *nats.Msg, 256)
	sub, err := p.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, expect, []string{err.Error()}
	}
	defer func() { _ = sub.Unsubscribe() }()
	body := encode(req)
	if err := p.nc.PublishRequest(p.subj.adopt(), inbox, body); err != nil {
		return nil, expect, []string{err.Error()}
	}
	again := time.NewTicker(retransmit)
	defer again.Stop()
	answered := map[string]bool{}
	failed := map[string]string{}
	seen := map[string]bool{}
	waiting := func() bool {
		for _, w := range expect {
			if !answered[w] {
				return true
			}
		}
		return false
	}
wait:
	for waiting() {
		select {
		case <-ctx.Done():
			break wait
		case <-again.C:
			_ = p.nc.PublishRequest(p.subj.adopt(), inbox, body)
		case msg := <-answers:
			var rep adoptReply
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				continue
			}
			answered[rep.Worker] = true
			if rep.Err != "" {
				failed[rep.Worker] = rep.Err
			}
			for _, a := range rep.Tasks {
				if !seen[a.Key] {
					seen[a.Key] = true
					got = append(got, a)
				}
			}
		}
	}
	for _, w := range expect {
		if !answered[w] {
			missing = append(missing, w)
		}
	}
	for w, e := range failed {
		errs = append(errs, w+": "+e)
	}
	slices.Sort(errs)
	return got, missing, errs
}

// adoptOne makes this node's side of a command a worker moved to it and sends its
// first grant; nil when this node holds it already.
func (p *Producer) adoptOne(a adoptedTask, nodeEpoch uint64, scope string, scopeEpoch uint64) (*rtask, error) {
	if checkName("task key", a.Key) != nil || checkName("worker", a.Worker) != nil || a.Cursor < 0 {
		return nil, fmt.Errorf("malformed adopted command %q from worker %q", a.Key, a.Worker)
	}
	stdin, err := bash.ParseStdin(a.Stdin)
	if err != nil {
		stdin = bash.StdinNone
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if old := p.tasks[a.Key]; old != nil {
		if old.epoch == nodeEpoch && !old.detached.Load() {
			p.mu.Unlock()
			return nil, nil // adopted already (a repeat)
		}
		// This node's record from before it lost its lease (detached): the
		// command is adopted afresh, and the old record settles.
		p.mu.Unlock()
		old.settle(detachedOutcome)
		p.mu.Lock()
		if p.closed || p.tasks[a.Key] != nil {
			p.mu.Unlock()
			return nil, nil // closed, or a concurrent adoption took it meanwhile
		}
	}
	t := p.newTask(a.Key, nodeEpoch, stdin, a.Block, scope, scopeEpoch, a.Cursor)
	t.worker, t.wepoch, t.wworker = a.Worker, a.WorkerEpoch, a.Worker
	var now *messages.Outcome
	if a.Exited {
		o := messages.Outcome{Status: messages.Status(a.Status), Detail: a.Detail}
		t.exitCode = a.ExitCode
		if a.Written <= a.Cursor {
			now = &o
		} else {
			t.pending, t.pendingAt = &o, a.Written
		}
	}
	p.tasks[a.Key] = t
	p.mu.Unlock()
	t.wmu.Lock()
	g := t.grantLocked(0)
	t.confirm = time.AfterFunc(retransmit, t.reconfirm)
	t.wmu.Unlock()
	p.sendGrant(a.Worker, g)
	switch {
	case p.watch.ended(workerKey(a.Worker), a.WorkerEpoch):
		t.settle(lostOutcome(a.Worker))
	case now != nil:
		t.settle(*now)
	}
	return t, nil
}

// reconfirm sends an adopter's first grant again until a frame of the worker
// shows that it came.
func (t *rtask) reconfirm() {
	t.wmu.Lock()
	if t.heard || t.outClosed {
		t.wmu.Unlock()
		return
	}
	g, worker := t.grantLocked(0), t.wworker
	t.confirm.Reset(retransmit)
	t.wmu.Unlock()
	t.p.sendGrant(worker, g)
}

// Valid reports whether this node holds its lease and its last successful renewal
// was sent less than half the lease ago (when it would fence itself), on the
// monotonic clock, now: it does not wait for the lease's goroutine (a process
// resumed from SIGSTOP reads false at once).
func (p *Producer) Valid() bool { return p.lease.valid() }

// Lease is this node's lease duration (WithLease).
func (p *Producer) Lease() time.Duration { return p.cfg.lease }

// OnFence adds fn, called with the epoch when this node's lease of that epoch is
// lost, on the lease's goroutine: after its scope-owned tasks are detached (a
// Cancel then settles them here without a word to the workers), before its own
// tasks settle failed. fn must not block.
func (p *Producer) OnFence(fn func(epoch uint64)) {
	p.cbMu.Lock()
	defer p.cbMu.Unlock()
	p.onFence = append(p.onFence, fn)
}

// OnOwnerEnded adds fn, called once per ended owner-node lease epoch of another
// node (deleted at its lapse or on its release, or replaced by a newer epoch),
// from the lease watcher's goroutine. fn must not block.
func (p *Producer) OnOwnerEnded(fn func(node string, epoch uint64)) {
	p.cbMu.Lock()
	defer p.cbMu.Unlock()
	p.onOwnerEnded = append(p.onOwnerEnded, fn)
}

// OwnerEnded reports whether the watch has seen the lease of owner node node
// under epoch end (deleted, or replaced by a newer epoch).
func (p *Producer) OwnerEnded(node string, epoch uint64) bool {
	return p.watch.ended(ownerKey(node), epoch)
}

// OwnerKnown is what the watch shows of owner node node's lease: its epoch, whether
// it is live (not ended), and whether the watch has seen it at all.
func (p *Producer) OwnerKnown(node string) (epoch uint64, live bool, known bool) {
	e, gone, known := p.watch.state(ownerKey(node))
	return e, known && !gone, known
}

// OwnerLive reports whether owner node node holds its lease under epoch: this
// node's own lease while Valid, another's as the lease watch shows it, or as the
// store has it when the watch has not shown that lease yet (one acquired a moment
// ago). It waits for the watch's first view until ctx ends.
func (p *Producer) OwnerLive(ctx context.Context, node string, epoch uint64) (bool, error) {
	if node == p.node {
		cur, err := p.lease.current()
		return err == nil && cur == epoch && p.lease.valid(), nil
	}
	select {
	case <-p.watch.ready:
	case <-ctx.Done():
		return false, fmt.Errorf("remote: the lease watch is not ready: %w", ctx.Err())
	}
	if cur, gone, known := p.watch.state(ownerKey(node)); known {
		return !gone && cur == epoch, nil
	}
	cur, ok, err := lookup(ctx, p.lease.kv, ownerKey(node))
	if err != nil {
		return false, fmt.Errorf("remote: reading the lease of %s: %w", node, err)
	}
	return ok && cur == epoch, nil
}

// Handoff detaches every scope-owned command of this node, as a lost lease does:
// a Cancel then settles its task here without a word to the worker, and no
// release is sent. Closing the runtime and then the Producer (which ends the
// lease) then leaves those commands running on the workers, orphaned, for another
// node to Adopt within the orphan grace. It is how a frontend shuts down without
// killing the tasks of the scopes it homed; commands started after it are not
// detached.
func (p *Producer) Handoff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tasks {
		if t.scope != "" {
			t.detached.Store(true)
		}
	}
}

// DetachScope detaches this node's commands of one scope, as Handoff does for
// all: a Cancel then settles their tasks here without a word to the workers. It
// is how a frontend drops a scope that another frontend took (or may take) while
// its own lease lives on: the scope's commands are not this frontend's to kill.
func (p *Producer) DetachScope(scope string) {
	if scope == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tasks {
		if t.scope == scope {
			t.detached.Store(true)
		}
	}
}
