package placement

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// NextID returns the next task number of kind across the cluster: one number per
// call, never the same twice for a kind on any frontend, in the order the calls
// won. It is meant for actors.WithIDs, so that a task keeps its id when its scope
// moves to another frontend and no frontend gives two tasks one id.
//
// The number is the key ids.<kind> of the bucket, advanced by compare-and-set
// (Create for the first, then Update on the revision read); a frontend that lost
// the race reads again. Cost: one read and one write of the store per start, more
// under contention between frontends starting at the same instant. ctx bounds it.
func (p *Placement) NextID(ctx context.Context, kind string) (int, error) {
	key := "ids." + kind
	for {
		e, err := p.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := p.kv.Create(ctx, key, []byte("1")); err == nil {
				return 1, nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return 0, fmt.Errorf("placement: numbering a %s task: %w", kind, err)
			}
			continue // another frontend created it first
		case err != nil:
			return 0, fmt.Errorf("placement: numbering a %s task: %w", kind, err)
		}
		n, err := strconv.Atoi(string(e.Value()))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("placement: numbering a %s task: the counter %s holds %q", kind, key, e.Value())
		}
		next := strconv.Itoa(n + 1)
		if _, err := p.kv.Update(ctx, key, []byte(next), e.Revision()); err == nil {
			return n + 1, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) && !isMismatch(err) {
			return 0, fmt.Errorf("placement: numbering a %s task: %w", kind, err)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("placement: numbering a %s task: %w", kind, err)
		}
	}
}

// isMismatch reports whether err is a compare-and-set that lost to another write.
func isMismatch(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || (errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}
