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

// WaitSetWake measures the wake-up of a wait on a set of Set running tasks
// (Tasks.WaitAny) next to a single Tasks.Wait, in the same runtime and the same way:
// the wait is started and given a millisecond to reach the tasks (a set wait sends
// one wait per task through the registry, so its registration cannot be observed
// from outside), then one task settles, and the clock runs from that settlement
// until the waiting goroutine holds the answer.
func WaitSetWake(ctx context.Context, cfg WaitConfig, set int) (anyLat, single Latency, err error) {
	cfg.Samples, set = max(cfg.Samples, 1), max(set, 1)
	reg, err := NewRegistry(ImplActors)
	if err != nil {
		return anyLat, single, err
	}
	defer closeWithin(reg, &err)
	rt := reg.(*actorsRegistry).rt
	const owner = messages.AgentID("waiter")
	if err := rt.Agents().Register(ctx, owner); err != nil {
		return anyLat, single, err
	}
	sample := func(n int, wait func([]messages.TaskID) error) (time.Duration, error) {
		helds := make([]*held, n)
		ids := make([]messages.TaskID, n)
		for i := range helds {
			helds[i] = newHeld(owner)
			id, err := rt.Tasks().Start(ctx, helds[i].spec)
			if err != nil {
				return 0, err
			}
			ids[i] = id
		}
		woke := make(chan error, 1)
		go func() { woke <- wait(ids) }()
		time.Sleep(time.Millisecond)
		t0 := time.Now()
		helds[n-1].finish(messages.Outcome{Status: messages.Completed})
		err := <-woke
		d := time.Since(t0)
		for _, h := range helds {
			h.finish(messages.Outcome{Status: messages.Completed})
		}
		for _, id := range ids {
			if _, werr := rt.Tasks().Wait(ctx, id, owner, time.Minute); werr != nil && err == nil {
				err = werr
			}
		}
		return d, err
	}
	var anys, singles []time.Duration
	for range cfg.Samples {
		d, err := sample(set, func(ids []messages.TaskID) error {
			snaps, err := rt.Tasks().WaitAny(ctx, ids, owner, time.Minute)
			if err == nil && !snaps[len(snaps)-1].Status.Terminal() {
				err = fmt.Errorf("wait-any answered before the settlement: %+v", snaps)
			}
			return err
		})
		if err != nil {
			return anyLat, single, err
		}
		anys = append(anys, d)
		d, err = sample(1, func(ids []messages.TaskID) error {
			s, err := rt.Tasks().Wait(ctx, ids[0], owner, time.Minute)
			if err == nil && !s.Status.Terminal() {
				err = fmt.Errorf("wait answered before the settlement: %+v", s)
			}
			return err
		})
		if err != nil {
			return anyLat, single, err
		}
		singles = append(singles, d)
	}
	return summarize(anys), summarize(singles), nil
}
