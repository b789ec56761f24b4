package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// WaitConfig sizes the wait wake-up figure.
type WaitConfig struct {
	Samples int
	Timer   Timer // optional
}

// WaitWake measures how long a pending wait takes to be answered once its task
// settles: from the producer delivering the Outcome on Done to the waiting goroutine
// holding the terminal snapshot. Each sample starts a task, registers a wait (see
// Registry.waitRegistered: the wait is in place before the clock starts), settles the
// task and times the wake-up. For ImplFloor the wait is a RequestFuture an actor
// holds, and the settlement a message that makes it answer.
func WaitWake(ctx context.Context, impl Impl, cfg WaitConfig) (lat Latency, err error) {
	cfg.Samples = max(cfg.Samples, 1)
	timer := timerOr(cfg.Timer)
	samples := make([]time.Duration, 0, cfg.Samples)
	switch impl {
	case ImplFloor:
		sys := floorSystem()
		defer sys.Shutdown()
		holder := sys.Root.Spawn(holderProps())
		defer sys.Root.Stop(holder)
		timer.ResetTimer()
		for range cfg.Samples {
			f := sys.Root.RequestFuture(holder, "wait", time.Minute)
			if _, err := sys.Root.RequestFuture(holder, "ping", time.Minute).Result(); err != nil {
				return lat, err
			}
			t0 := time.Now()
			sys.Root.Send(holder, "settle")
			if _, err := f.Result(); err != nil {
				return lat, err
			}
			samples = append(samples, time.Since(t0))
		}
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return lat, rerr
		}
		defer closeWithin(reg, &err)
		const owner = messages.AgentID("waiter")
		if err := reg.Register(ctx, owner, ""); err != nil {
			return lat, err
		}
		timer.ResetTimer()
		for range cfg.Samples {
			h := newHeld(owner)
			id, err := reg.Start(ctx, h.spec)
			if err != nil {
				return lat, err
			}
			await, err := reg.waitRegistered(ctx, id, owner)
			if err != nil {
				return lat, err
			}
			t0 := time.Now()
			h.finish(messages.Outcome{Status: messages.Completed})
			s, err := await()
			d := time.Since(t0)
			if err != nil {
				return lat, err
			}
			if !s.Status.Terminal() {
				return lat, fmt.Errorf("wait on %s answered with status %s", id, s.Status)
			}
			samples = append(samples, d)
		}
	}
	timer.StopTimer()
	return summarize(samples), nil
}
