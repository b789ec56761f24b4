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
