//go:build linux

package remote

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// flakyKV is a lease bucket whose Update fails on the calls listed in fail (as a
// renewal does while the stream elects a new leader, or while the client
// reconnects to another server); every other Update succeeds at once.
type flakyKV struct {
	jetstream.KeyValue // only Update is used
	mu                 sync.Mutex
	calls              int
	fail               map[int]bool
	rev                uint64
}

func (f *flakyKV) Update(ctx context.Context, _ string, _ []byte, last uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if f.fail[f.calls] {
		return 0, errors.New("nats: no responders available for request")
	}
	if last != f.rev {
		return 0, jetstream.ErrKeyRevisionMismatch
	}
	f.rev++
	return f.rev, nil
}

func TestAFailedRenewalIsRetriedBeforeTheFence(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail map[int]bool
	}{
		{"one renewal fails", map[int]bool{2: true}},
		{"two renewals in a row fail", map[int]bool{2: true, 3: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const d = 2 * time.Second
				kv := &flakyKV{fail: tc.fail, rev: 1}
				h := &holder{kv: kv, key: "owner.x", d: d, log: slog.New(slog.DiscardHandler), rev: 1, sentAt: time.Now(), epoch: 1, held: true}
				ctx, cancel := context.WithCancel(context.Background())
				why := make(chan string, 1)
				go func() { why <- h.keep(ctx) }()
				// Three leases' worth of time: a dozen renewals.
				<-time.After(3 * d) // fake time inside the bubble: passes once every goroutine in it is blocked
				cancel()
				assert.Equal(t, "", <-why, "the holder kept its lease: a failed renewal was tried again before half the lease had passed")
			})
		})
	}
}

// flakyJS is a JetStream whose KeyValue lookups answer per try, as a cluster
// electing a leader does: "drop" never answers (the try's context ends it), "503"
// and "no peers" answer that the cluster cannot serve it yet, "bad" is a final
// error, and "ok" finds the bucket.
type flakyJS struct {
	jetstream.JetStream // only KeyValue is used
	answers             []string
	tries               int
}

var errBad = &jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "invalid request"}

func (f *flakyJS) KeyValue(ctx context.Context, _ string) (jetstream.KeyValue, error) {
	a := f.answers[min(f.tries, len(f.answers)-1)]
	f.tries++
	switch a {
	case "drop":
		<-ctx.Done()
		return nil, ctx.Err()
	case "503":
		return nil, &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	case "no peers":
		return nil, &jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}
	case "bad":
		return nil, errBad
	}
	return &flakyKV{}, nil
}

// ensureBucket tries again while the cluster cannot answer yet (a dropped request,
// 503, no suitable peers), within its context; any other error is final at once.
func TestEnsureBucketWaitsOutAClusterThatIsNotReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []string
		limit   time.Duration
		tries   int
		wantErr error // nil: the bucket is found
	}{
		{"a dropped request, a 503 and no peers, then the bucket", []string{"drop", "503", "no peers", "ok"}, time.Minute, 4, nil},
		{"a final error ends it at once", []string{"503", "bad", "ok"}, time.Minute, 2, errBad},
		{"a cluster that never answers ends with the context", []string{"drop"}, 5 * time.Second, 3, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				js := &flakyJS{answers: tc.answers}
				ctx, cancel := context.WithTimeout(context.Background(), tc.limit)
				defer cancel()
				kv, err := ensureBucket(ctx, js, "leases", 3)
				if tc.wantErr == nil {
					assert.NoError(t, err)
					assert.NotNil(t, kv)
				} else {
					assert.ErrorIs(t, err, tc.wantErr)
				}
				assert.Equal(t, tc.tries, js.tries, "tries")
			})
		})
	}
}

// slowWatchKV is a lease bucket whose WatchAll times out on the first timeouts
// tries, as the client's default wait of 5 s ends a consumer's creation that a
// loaded R3 cluster has not answered, and then fails with err (nil: a watch).
type slowWatchKV struct {
	jetstream.KeyValue // only WatchAll is used
	timeouts           int
	err                error
	tries              int
}

func (k *slowWatchKV) WatchAll(ctx context.Context, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	k.tries++
	if k.tries <= k.timeouts {
		<-time.After(5 * time.Second)
		return nil, context.DeadlineExceeded
	}
	if k.err != nil {
		return nil, k.err
	}
	return nil, ctx.Err()
}

// watchAll tries again when a try times out, while its bound lasts; any other
// error, and a cancelled watch context, end it at once.
func TestWatchAllOutlastsTheClientsDefaultWait(t *testing.T) {
	errClosed := errors.New("nats: connection closed")
	for _, tc := range []struct {
		name     string
		timeouts int
		err      error
		bound    time.Duration
		cancel   bool
		tries    int
		wantErr  error // nil: the watch is made
	}{
		{"two timed-out tries, then the watch", 2, nil, time.Minute, false, 3, nil},
		{"another error ends it at once", 1, errClosed, time.Minute, false, 2, errClosed},
		{"the bound ends it", 100, nil, 12 * time.Second, false, 3, context.DeadlineExceeded},
		{"a cancelled watch context ends it at once", 100, nil, time.Minute, true, 1, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				kv := &slowWatchKV{timeouts: tc.timeouts, err: tc.err}
				ctx, cancelCtx := context.WithCancel(context.Background())
				defer cancelCtx()
				if tc.cancel {
					cancelCtx()
				}
				bound, cancel := context.WithTimeout(context.Background(), tc.bound)
				defer cancel()
				_, err := watchAll(ctx, bound, kv)
				if tc.wantErr == nil {
					assert.NoError(t, err)
				} else {
					assert.ErrorIs(t, err, tc.wantErr)
				}
				assert.Equal(t, tc.tries, kv.tries, "tries")
			})
		})
	}
}
