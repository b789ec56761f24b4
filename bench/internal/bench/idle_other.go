//go:build !linux

package bench

import (
	"context"
	"errors"
)

// IdleChildren needs Linux (a child subreaper).
func IdleChildren(ctx context.Context, n int) (stop func() error, err error) {
	if n <= 0 {
		return func() error { return nil }, nil
	}
	return nil, errors.New("idle host children need Linux")
}
