package placement

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

// The lease timings, as fractions of the lease D, on the monotonic clock: the
// same as producers/remote's owner-node and worker leases (whose code this
// follows; it is unexported there).
//
//   - renew every D/4 (a failed renewal is retried after D/16);
//   - a frontend whose last successful renewal was sent D/2 ago fences itself:
//     it answers for none of the scopes homed under that epoch again, and takes
//     a new lease with a new epoch;
//   - an observer that saw no new revision of a frontend's lease for D + D/4
//     ends it with a conditional Delete on the revision it saw; a renewal that
//     landed in between makes the Delete fail and the lease lives on.
func renewEvery(d time.Duration) time.Duration { return d / 4 }
func retryEvery(d time.Duration) time.Duration { return d / 16 }
func fenceAfter(d time.Duration) time.Duration { return d / 2 }
func lapseAfter(d time.Duration) time.Duration { return d + d/4 }

// leaseValue is the value of a frontend's lease key.
type leaseValue struct {
	Frontend   string `json:"frontend"`
	Epoch      uint64 `json:"epoch,omitempty"` // the creating revision; 0 in the Create itself
	DurationMS int64  `json:"duration_ms"`
}

func encodeLease(v leaseValue) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ensureBucket finds or creates the bucket, retrying while a cluster cannot serve
// JetStream requests yet (no answer, 503, no suitable peers), until ctx ends.
func ensureBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := js.KeyValue(tctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(tctx, jetstream.KeyValueConfig{
				Bucket:      name,
				Description: "taskrt: sessionless scopes and the frontends that home them",
				History:     1,
				Storage:     jetstream.MemoryStorage,
				Replicas:    replicas,
			})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(tctx, name)
			}
		}
		cancel()
		if err == nil || ctx.Err() != nil || !notReady(err) {
			return kv, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last try: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

func notReady(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.Code == 503 || api.ErrorCode == 10005)
}

// holder holds this frontend's lease: Create to acquire, Update on the last
// revision to renew; a refused Update, or no successful renewal for D/2, is lost
// ownership: fence, then acquire a new lease (a new epoch). It never renews an
// old lease again.
type holder struct {
	kv    jetstream.KeyValue
	key   string
	value leaseValue
	d     time.Duration
	log   *slog.Logger
	fence func(epoch uint64) // on the holder's goroutine; must not block on the network

	mu    sync.Mutex // protects epoch and held
	epoch uint64
	held  bool

	rev    uint64    // the holder's goroutine only
	sentAt time.Time // the holder's goroutine only
}

// current is the epoch of the lease while it is held.
func (h *holder) current() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch, h.held
}

func (h *holder) acquire(ctx context.Context) error {
	v := h.value
	v.Epoch = 0
	for {
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, h.d)
		rev, err := h.kv.Create(actx, h.key, encodeLease(v))
		cancel()
		if err == nil {
			h.rev, h.sentAt = rev, sent
			h.mu.Lock()
			h.epoch, h.held = rev, true
			h.mu.Unlock()
			h.log.Info("placement: frontend lease acquired", "key", h.key, "epoch", rev)
			return nil
		}
		t := time.NewTimer(renewEvery(h.d))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("placement: acquiring lease %s: %w (last attempt: %v)", h.key, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// run keeps the lease until ctx ends. acquire must have succeeded once.
func (h *holder) run(ctx context.Context) {
	for {
		h.keep(ctx)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		epoch := h.epoch
		h.held = false
		h.mu.Unlock()
		h.log.Warn("placement: frontend lease lost; fencing", "key", h.key, "epoch", epoch)
		h.fence(epoch)
		dctx, cancel := context.WithTimeout(ctx, renewEvery(h.d))
		_ = h.kv.Delete(dctx, h.key, jetstream.LastRevision(h.rev))
		cancel()
		if h.acquire(ctx) != nil {
			return
		}
	}
}

// keep renews until the lease is lost or ctx ends.
func (h *holder) keep(ctx context.Context) {
	v := h.value
	v.Epoch = h.epoch
	val := encodeLease(v)
	wait := renewEvery(h.d)
	for {
		fenceAt := h.sentAt.Add(fenceAfter(h.d))
		next := time.NewTimer(wait)
		fence := time.NewTimer(time.Until(fenceAt))
		select {
		case <-ctx.Done():
			next.Stop()
			fence.Stop()
			return
		case <-fence.C:
			next.Stop()
			return
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
			wait = renewEvery(h.d) - time.Since(sent)
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			return
		case ctx.Err() != nil:
			return
		default:
			wait = retryEvery(h.d)
		}
	}
}

// release ends a held lease at once (clean shutdown), after run returned.
func (h *holder) release(ctx context.Context) {
	h.mu.Lock()
	held := h.held
	h.held = false
	h.mu.Unlock()
	if held {
		_ = h.kv.Delete(ctx, h.key, jetstream.LastRevision(h.rev))
	}
}

// seen is what the watcher knows of one frontend's lease.
type seen struct {
	epoch uint64
	rev   uint64
	d     time.Duration
	at    time.Time
	gone  bool
	tried uint64
}

// watcher follows every frontend lease and ends those that lapsed.
type watcher struct {
	kv   jetstream.KeyValue
	log  *slog.Logger
	tick time.Duration

	mu     sync.Mutex // protects leases
	leases map[string]*seen
	ready  chan struct{}
}

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
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.leases[e.Key()]
	if e.Operation() != jetstream.KeyValuePut {
		if s != nil {
			s.gone = true
		}
		return
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		w.log.Warn("placement: malformed frontend lease", "key", e.Key(), "err", err)
		return
	}
	epoch := v.Epoch
	if epoch == 0 {
		epoch = e.Revision()
	}
	w.leases[e.Key()] = &seen{epoch: epoch, rev: e.Revision(), d: time.Duration(v.DurationMS) * time.Millisecond, at: time.Now()}
}

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
		if err := w.kv.Delete(dctx, t.key, jetstream.LastRevision(t.rev)); err == nil {
			w.log.Info("placement: ended a lapsed frontend lease", "key", t.key, "revision", t.rev)
		}
		cancel()
	}
}

// live reports what the watch knows of the lease at key under epoch: known
// false when it has not shown the key yet.
func (w *watcher) live(key string, epoch uint64) (live, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.leases[key]
	if s == nil {
		return false, false
	}
	if s.epoch < epoch { // a newer lease than the watch has shown: ask the store
		return false, false
	}
	return s.epoch == epoch && !s.gone, true
}
