package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// RoutedConfig sizes the routed-operation figure.
type RoutedConfig struct {
	Tasks   int    // live tasks (they run until the end)
	Owners  int    // agents owning them, Tasks/Owners each
	Samples int    // timed operations of each kind
	Op      string // "read", "get", or "" for both
	Timer   Timer  // optional
}

// RoutedResult is the latency of one operation at a time from a single caller.
type RoutedResult struct {
	Read Latency // Tasks.Read: client → registry (owner fence) → task actor → client
	Get  Latency // Tasks.Get: client → registry → client
}

// Routed measures the latency of Read and Get, one call at a time from one goroutine,
// on random tasks among Tasks live ones spread over Owners owners, each call made as
// the task's owner. For ImplFloor, with as many idle actors alive, Read is a
// RequestFuture through a forwarding actor to an echo actor (two hops, like the
// registry routing to a task actor) and Get a RequestFuture to an echo actor.
func Routed(ctx context.Context, impl Impl, cfg RoutedConfig) (res RoutedResult, err error) {
	cfg.Owners = max(cfg.Owners, 1)
	cfg.Samples = max(cfg.Samples, 1)
	timer := timerOr(cfg.Timer)
	rng := rand.New(rand.NewPCG(1, 2))
	var read, get func() error
	switch impl {
	case ImplFloor:
		sys := floorSystem()
		defer sys.Shutdown()
		pids := make([]*actor.PID, 0, cfg.Tasks+2)
		defer func() {
			for _, p := range pids {
				sys.Root.Stop(p)
			}
		}()
		for range cfg.Tasks {
			pids = append(pids, sys.Root.Spawn(idleProps))
		}
		echo := sys.Root.Spawn(echoProps)
		router := sys.Root.Spawn(routerProps(echo))
		pids = append(pids, echo, router)
		read = func() error { _, err := sys.Root.RequestFuture(router, "read", time.Minute).Result(); return err }
		get = func() error { _, err := sys.Root.RequestFuture(echo, "get", time.Minute).Result(); return err }
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return res, rerr
		}
		defer closeWithin(reg, &err)
		ids, owners, err := startHeld(ctx, reg, cfg.Tasks, cfg.Owners)
		if err != nil {
			return res, err
		}
		pick := func() int { return rng.IntN(len(ids)) }
		read = func() error { i := pick(); _, err := reg.Read(ctx, ids[i], owners[i]); return err }
		get = func() error { i := pick(); _, err := reg.Get(ctx, ids[i], owners[i]); return err }
	}

	timer.ResetTimer()
	if cfg.Op == "" || cfg.Op == "read" {
		if res.Read, err = sample(cfg.Samples, read); err != nil {
			return res, err
		}
	}
	if cfg.Op == "" || cfg.Op == "get" {
		if res.Get, err = sample(cfg.Samples, get); err != nil {
			return res, err
		}
	}
	timer.StopTimer()
	return res, nil
}

// startHeld registers owners and starts n held tasks spread evenly over them; it
// returns each task's id and owner.
func startHeld(ctx context.Context, reg Registry, n, nOwners int) ([]messages.TaskID, []messages.AgentID, error) {
	owners := make([]messages.AgentID, nOwners)
	for i := range owners {
		owners[i] = messages.AgentID(fmt.Sprintf("owner-%d", i))
		if err := reg.Register(ctx, owners[i], ""); err != nil {
			return nil, nil, err
		}
	}
	ids := make([]messages.TaskID, n)
	of := make([]messages.AgentID, n)
	for i := range n {
		of[i] = owners[i%nOwners]
		id, err := reg.Start(ctx, newHeld(of[i]).spec)
		if err != nil {
			return nil, nil, err
		}
		ids[i] = id
	}
	return ids, of, nil
}

// sample times n calls of op after n/10 (at least 10) untimed warm-up calls.
func sample(n int, op func() error) (Latency, error) {
	for range max(n/10, 10) {
		if err := op(); err != nil {
			return Latency{}, err
		}
	}
	samples := make([]time.Duration, n)
	for i := range samples {
		t0 := time.Now()
		if err := op(); err != nil {
			return Latency{}, err
		}
		samples[i] = time.Since(t0)
	}
	return summarize(samples), nil
}
