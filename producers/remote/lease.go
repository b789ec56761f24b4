package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLease is the lease duration of owner nodes and workers (WithLease, -lease).
const DefaultLease = 10 * time.Second

// The lease timings, as fractions of a lease's duration D. Every deadline is taken
// on this process's monotonic clock (time.Now's monotonic reading), so a wall-clock
// step moves none of them; what remains assumed is that clocks on different
// machines run at about the same rate.
//
//   - renewEvery (D/4): a holder renews this often, so one lost or slow renewal
//     costs nothing.
//   - fenceAfter (D/2): a holder whose last successful renewal was sent this long
//     ago fences itself (an owner node fails its remote tasks, a worker kills its
//     processes). It guards against a node that is cut off, hung or paused acting
//     on a lease the others are about to declare lapsed: by the time they may act
//     (below), the fence has had D/2 + lapseSlack to complete.
//   - lapse (D + lapseSlack, lapseSlack = D/4): an observer that has seen no new
//     revision of a lease for this long, measured from when it saw the last one
//     (never earlier than the holder sent it), tries to end it with a conditional
//     delete (Delete with the last revision it saw). Only a successful delete ends
//     the lease; a renewal that landed in between makes it fail, and the lease
//     lives on. Every node sees the delete in its watch and acts on it then: a
//     worker kills the tasks of a lapsed owner node, an owner node fails the tasks
//     of a lapsed worker ("worker lost: <name>").
//   - grace (D/4, at most bash.DefaultGrace): a worker's SIGTERM-to-SIGKILL grace,
//     so that its self-fence (kill at D/2) is over by 3D/4, before anyone acts.
const (
	renewDiv = 4 // renewEvery = D/renewDiv
	fenceDiv = 2 // fenceAfter = D/fenceDiv
	slackDiv = 4 // lapseSlack = D/slackDiv
)

func renewEvery(d time.Duration) time.Duration { return d / renewDiv }

// retryEvery is how soon a renewal that failed is tried again (D/16).
func retryEvery(d time.Duration) time.Duration { return d / (4 * renewDiv) }
func fenceAfter(d time.Duration) time.Duration { return d / fenceDiv }
func lapseAfter(d time.Duration) time.Duration { return d + d/slackDiv }

// ensureBucket creates (or finds) the lease bucket: one value per key (the
// current lease), in memory (a lease outliving a restart of the store would be
// stale anyway). A cluster that is electing a leader, or whose meta group is still
// forming, drops JetStream API requests or answers that it cannot serve yet; so
// each try is bounded by bucketTry, and a try that got no answer, or such an
// answer, is made again until ctx ends. Any other error is final at once.
func ensureBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, bucketTry)
		kv, err := tryBucket(tctx, js, name, replicas)
		cancel()
		if err == nil || ctx.Err() != nil || !clusterNotReady(err) {
			return kv, err
		}
		if !pauseWithin(ctx) {
			return nil, fmt.Errorf("%w (last try: %v)", ctx.Err(), err)
		}
	}
}

// watchAll is kv.WatchAll(ctx, opts...), tried again while bound lasts when a try
// times out. The watch lives as long as ctx, so ctx carries no deadline, and the
// client then bounds the creation of the watch's consumer by its default wait of
// 5 s, which an R3 bucket on a loaded cluster can exceed.
func watchAll(ctx, bound context.Context, kv jetstream.KeyValue, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	for {
		kw, err := kv.WatchAll(ctx, opts...)
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return kw, err
		}
		if !pauseWithin(bound) {
			return nil, fmt.Errorf("watching the lease bucket: %w (last try: %v)", bound.Err(), err)
		}
	}
}

// pauseWithin waits bucketPause between two tries, and reports false at once if
// ctx ends first.
func pauseWithin(ctx context.Context) bool {
	pause := time.NewTimer(bucketPause)
	defer pause.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-pause.C:
		return true
	}
}

const (
	bucketTry   = 2 * time.Second        // one try of ensureBucket
	bucketPause = 100 * time.Millisecond // between its tries
)

func tryBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err // found, or a failed look-up
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      name,
		Description: "taskrt leases of owner nodes and workers",
		History:     1,
		Storage:     jetstream.MemoryStorage,
		Replicas:    replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, name)
	}
	return kv, err
}

// clusterNotReady reports whether err is a JetStream API request that got no
// answer in time, or an answer that the cluster cannot serve it yet: 503
// (JetStream temporarily unavailable, no leader), or no suitable peers for an R>1
// stream's placement (10005: a peer not yet seen online).
func clusterNotReady(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.Code == 503 || api.ErrorCode == 10005)
}

// holder holds one lease: it acquires it with Create, renews it with Update on the
// last revision, and fences its node when it can no longer be sure it holds it.
//
//	acquire (Create) ──ok──▶ held ──Update ok──▶ held
//	                           │
//	                           ├─ Update refused (revision mismatch: someone ended it) ─┐
//	                           └─ no successful renewal for fenceAfter ─────────────────┴─▶ fenced ─▶ acquire …
//
// A refused Update is lost ownership, never "probably still mine". A fenced
// holder never renews the old lease again: it acquires a new one, with a new epoch.
type holder struct {
	kv    jetstream.KeyValue
	key   string
	value leaseValue
	d     time.Duration
	log   *slog.Logger
	// fence is called on the holder's goroutine when the lease of epoch is lost or
	// about to lapse; it must do its fencing (fail tasks, kill processes) before it
	// returns, without blocking on the network.
	fence func(epoch uint64, why string)

	mu    sync.Mutex // protects epoch, held and validTo
	epoch uint64     // the current lease's epoch (its creating revision)
	held  bool
	// validTo is when the holder would fence itself without another successful
	// renewal: the last one's send time plus fenceAfter (monotonic).
	validTo time.Time

	rev    uint64    // last revision written; the holder's goroutine only
	sentAt time.Time // when the last successful write was sent; the holder's goroutine only
}

// errNoLease is what a node that holds no lease answers.
var errNoLease = errors.New("remote: this node holds no lease (the NATS store is unreachable or the lease lapsed)")

// current returns the epoch while the lease is held.
func (h *holder) current() (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		return 0, errNoLease
	}
	return h.epoch, nil
}

// valid reports whether the lease is held and its last successful write was sent
// less than fenceAfter ago, on the monotonic clock, now: it does not wait for the
// holder's goroutine to notice (a process resumed from SIGSTOP reads false at once).
func (h *holder) valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held && time.Now().Before(h.validTo)
}

// acquire creates the lease. A key that exists belongs to a live holder or to a
// lapsed one that an observer has not ended yet; acquire tries again every
// renewEvery until ctx ends.
func (h *holder) acquire(ctx context.Context) error {
	v := h.value
	v.Epoch = 0
	for {
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, h.d)
		rev, err := h.kv.Create(actx, h.key, encode(v))
		cancel()
		if err == nil {
			h.rev, h.sentAt = rev, sent
			h.mu.Lock()
			h.epoch, h.held, h.validTo = rev, true, sent.Add(fenceAfter(h.d))
			h.mu.Unlock()
			h.log.Info("remote: lease acquired", "key", h.key, "epoch", rev)
			return nil
		}
		h.log.Debug("remote: lease not acquired yet", "key", h.key, "err", err)
		t := time.NewTimer(renewEvery(h.d))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("remote: acquiring lease %s: %w (last attempt: %v)", h.key, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// run keeps the lease until ctx ends: renew, fence when it is lost, acquire a new
// one. acquire must have succeeded once before.
func (h *holder) run(ctx context.Context) {
	for {
		why := h.keep(ctx)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		epoch := h.epoch
		h.held = false
		h.mu.Unlock()
		h.log.Warn("remote: lease lost; fencing", "key", h.key, "epoch", epoch, "why", why)
		h.fence(epoch, why)
		// End the old lease at once (if nobody did) so that the others need not wait
		// for its lapse; a refusal means someone already did.
		dctx, cancel := context.WithTimeout(ctx, renewEvery(h.d))
		_ = h.kv.Delete(dctx, h.key, jetstream.LastRevision(h.rev))
		cancel()
		if err := h.acquire(ctx); err != nil {
			return
		}
	}
}

// keep renews the lease until it is lost (it returns why) or ctx ends. A renewal
// that fails without an answer (no responders while the stream elects a leader,
// the connection reconnecting to another server) is tried again after
// retryEvery, not a whole renewEvery later: otherwise one failed renewal just
// before a tick left the next attempt at the fence itself.
func (h *holder) keep(ctx context.Context) string {
	v := h.value
	v.Epoch = h.epoch
	val := encode(v)
	wait := renewEvery(h.d)
	for {
		fenceAt := h.sentAt.Add(fenceAfter(h.d))
		next := time.NewTimer(wait)
		fence := time.NewTimer(time.Until(fenceAt))
		select {
		case <-ctx.Done():
			next.Stop()
			fence.Stop()
			return ""
		case <-fence.C:
			next.Stop()
			return fmt.Sprintf("not renewed for %s (half its lease)", fenceAfter(h.d))
		case <-next.C:
			fence.Stop()
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, fenceAt)
		rev, err := h.kv.Update(rctx, h.key, val, h.rev)
		cancel()
		switch {
		case err == nil:
			h.rev, h.sentAt = rev, sent
			h.mu.Lock()
			h.validTo = sent.Add(fenceAfter(h.d))
			h.mu.Unlock()
			wait = renewEvery(h.d) - time.Since(sent)
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			return "renewal refused: " + err.Error()
		case ctx.Err() != nil:
			return ""
		default:
			h.log.Debug("remote: renewal failed; retrying", "key", h.key, "err", err)
			wait = retryEvery(h.d)
		}
	}
}

// release ends a held lease at once (a conditional delete), on a clean shutdown.
// It must be called after run returned.
func (h *holder) release(ctx context.Context) {
	h.mu.Lock()
	held := h.held
	h.held = false
	h.mu.Unlock()
	if held {
		_ = h.kv.Delete(ctx, h.key, jetstream.LastRevision(h.rev))
	}
}

// seen is what a watcher knows of one lease.
type seen struct {
	epoch uint64
	rev   uint64
	d     time.Duration
	at    time.Time // when this process saw rev (monotonic)
	gone  bool      // ended (deleted, or replaced by a newer epoch)
	tried uint64    // the revision a conditional delete was last tried on
}

// watcher follows every lease of the bucket, reports the end of each, and ends
// the leases that lapsed (a conditional delete: see lapseAfter).
type watcher struct {
	kv  jetstream.KeyValue
	log *slog.Logger
	// tick is how often lapses are looked for.
	tick time.Duration
	// gone is called, on the watcher's goroutine, once per ended lease epoch. It
	// must not block.
	gone func(kind, name string, epoch uint64)

	mu     sync.Mutex // protects leases
	leases map[string]*seen
	ready  chan struct{} // closed once the initial values were seen
}

func newWatcher(kv jetstream.KeyValue, tick time.Duration, log *slog.Logger, gone func(kind, name string, epoch uint64)) *watcher {
	return &watcher{kv: kv, log: log, tick: tick, gone: gone, leases: map[string]*seen{}, ready: make(chan struct{})}
}

// run watches until ctx ends. w must have been started (start).
func (w *watcher) run(ctx context.Context, kw jetstream.KeyWatcher) {
	defer func() { _ = kw.Stop() }()
	sweep := time.NewTicker(w.tick)
	defer sweep.Stop()
	readyClosed := false
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-kw.Updates():
			if !ok {
				return
			}
			if e == nil {
				if !readyClosed {
					close(w.ready)
					readyClosed = true
				}
				continue
			}
			w.observe(e)
		case <-sweep.C:
			w.sweep(ctx)
		}
	}
}

func (w *watcher) observe(e jetstream.KeyValueEntry) {
	kind, name := keyName(e.Key())
	w.mu.Lock()
	s := w.leases[e.Key()]
	var ended []uint64
	if e.Operation() != jetstream.KeyValuePut {
		if s != nil && !s.gone {
			s.gone = true
			ended = append(ended, s.epoch)
		}
	} else {
		var v leaseValue
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			w.mu.Unlock()
			w.log.Warn("remote: malformed lease", "key", e.Key(), "err", err)
			return
		}
		epoch := v.Epoch
		if epoch == 0 {
			epoch = e.Revision()
		}
		if s != nil && !s.gone && s.epoch != epoch {
			ended = append(ended, s.epoch)
		}
		w.leases[e.Key()] = &seen{epoch: epoch, rev: e.Revision(), d: time.Duration(v.DurationMS) * time.Millisecond, at: time.Now()}
	}
	w.mu.Unlock()
	for _, ep := range ended {
		w.gone(kind, name, ep)
	}
}

// sweep ends the leases that lapsed, each with a conditional delete on the last
// revision seen. A refused delete means the lease was renewed (or ended) after
// all; the watch shows which.
func (w *watcher) sweep(ctx context.Context) {
	now := time.Now()
	type try struct {
		key string
		rev uint64
		d   time.Duration
	}
	var tries []try
	w.mu.Lock()
	for k, s := range w.leases {
		if !s.gone && s.tried != s.rev && now.Sub(s.at) > lapseAfter(s.d) {
			s.tried = s.rev
			tries = append(tries, try{k, s.rev, s.d})
		}
	}
	w.mu.Unlock()
	for _, t := range tries {
		dctx, cancel := context.WithTimeout(ctx, max(renewEvery(t.d), time.Second))
		err := w.kv.Delete(dctx, t.key, jetstream.LastRevision(t.rev))
		cancel()
		if err == nil {
			w.log.Info("remote: ended a lapsed lease", "key", t.key, "revision", t.rev)
		}
	}
}

// state reports what is known of the lease at key: its epoch and whether it ended.
func (w *watcher) state(key string) (epoch uint64, gone, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.leases[key]
	if s == nil {
		return 0, false, false
	}
	return s.epoch, s.gone, true
}

// live lists the names of the leases of kind (owner, worker) that the watch shows
// and that have not ended.
func (w *watcher) live(kind string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for k, s := range w.leases {
		if kd, name := keyName(k); kd == kind && !s.gone {
			names = append(names, name)
		}
	}
	return names
}

// duration is the lease duration written into the lease at key (0: not seen).
func (w *watcher) duration(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.leases[key]; s != nil {
		return s.d
	}
	return 0
}

// ended reports whether the lease of epoch at key is known to have ended.
func (w *watcher) ended(key string, epoch uint64) bool {
	cur, gone, known := w.state(key)
	return known && (cur > epoch || (cur == epoch && gone))
}

// lookup reads the lease at key from the store, for a key the watch has not shown
// yet: its current epoch, or ok false when there is none.
func lookup(ctx context.Context, kv jetstream.KeyValue, key string) (epoch uint64, ok bool, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return 0, false, err
	}
	if v.Epoch == 0 {
		return e.Revision(), true, nil
	}
	return v.Epoch, true, nil
}
