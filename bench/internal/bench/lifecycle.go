package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// LifecycleConfig sizes the lifecycle figure.
type LifecycleConfig struct {
	Tasks   int   // tasks started and settled in total
	Owners  int   // agents the tasks are spread over, round robin
	Workers int   // goroutines starting tasks concurrently
	Timer   Timer // optional; told where the measured part starts and ends
}

// Lifecycle measures the throughput of whole task lifecycles: Workers goroutines each
// start an instant in-memory task (owned by the owners in turn) and wait until it has
// settled, until Tasks tasks have. It returns tasks per second. For ImplFloor each
// lifecycle is the spawn of an idle actor, its stop, and the observation that it
// stopped.
func Lifecycle(ctx context.Context, impl Impl, cfg LifecycleConfig) (perSec float64, err error) {
	cfg.Workers, cfg.Owners = max(cfg.Workers, 1), max(cfg.Owners, 1)
	timer := timerOr(cfg.Timer)
	var one func(i int) error
	switch impl {
	case ImplFloor:
		sys := floorSystem()
		defer sys.Shutdown()
		one = func(int) error {
			done := make(chan struct{})
			stopAndWait(sys, sys.Root.Spawn(ownerProps(0, 1, nil, done)), done)
			return nil
		}
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return 0, rerr
		}
		defer closeWithin(reg, &err)
		owners := make([]messages.AgentID, cfg.Owners)
		for i := range owners {
			owners[i] = messages.AgentID(fmt.Sprintf("owner-%d", i))
			if err := reg.Register(ctx, owners[i], ""); err != nil {
				return 0, err
			}
		}
		one = func(i int) error {
			owner := owners[i%len(owners)]
			id, err := reg.Start(ctx, instantSpec(owner))
			if err != nil {
				return err
			}
			s, err := reg.Wait(ctx, id, owner, time.Minute)
			if err == nil && !s.Status.Terminal() {
				err = fmt.Errorf("task %s did not settle within a minute", id)
			}
			return err
		}
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	timer.ResetTimer()
	began := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(cfg.Tasks) || ctx.Err() != nil {
					return
				}
				if err := one(int(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	timer.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(cfg.Tasks) / elapsed.Seconds(), nil
}
