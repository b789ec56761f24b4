package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ensureBucket finds or creates the bucket, retrying while a cluster cannot serve
// JetStream requests yet (no answer, 503, no suitable peers), until ctx ends.
func ensureBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := js.KeyValue(tctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(tctx, jetstream.KeyValueConfig{
				Bucket:      name,
				Description: "taskrt: sessionless scopes, their tasks and the frontends that home them",
				History:     1,
				Storage:     jetstream.FileStorage,
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
