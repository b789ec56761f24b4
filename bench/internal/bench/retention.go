package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// RetentionConfig sizes the retention figure: Tasks short tasks run one after
// another through one owner that is never disposed; the heap is read after the first
// Early tasks and after all of them.
type RetentionConfig struct {
	Tasks int
	Early int
}

// RetentionResult is what a long-lived owner holds.
type RetentionResult struct {
	HeapEarly  uint64 // live heap after the first Early tasks, bytes
	HeapEnd    uint64 // live heap after all Tasks tasks, bytes
	Actors     int    // live actors of the runtime at the end (registry, agent, records)
	Retained   int    // full records held at the end
	Tombstones int    // tombstones held at the end
}

// Growth is the heap held after all the tasks minus after the first Early, bytes.
func (r RetentionResult) Growth() float64 { return float64(r.HeapEnd) - float64(r.HeapEarly) }

// Retention runs cfg.Tasks instant tasks through one owner, each waited for before
// the next starts, in a runtime built with opts, and reads what the runtime holds
// afterwards. With the default options, retention bounds it (100 records, 10,000
// tombstones); with actors.WithRetention(cfg.Tasks) every record lives until its
// owner is disposed, the behaviour before retention existed.
func Retention(ctx context.Context, cfg RetentionConfig, opts ...actors.Option) (res RetentionResult, err error) {
	cfg.Tasks, cfg.Early = max(cfg.Tasks, 1), max(cfg.Early, 1)
	rt, err := actors.NewRuntime(opts...)
	if err != nil {
		return res, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if cerr := rt.Close(cctx); err == nil {
			err = cerr
		}
	}()
	detach := rt.Tasks().AttachSurface("bench")
	defer detach()
	const owner = messages.AgentID("long-lived")
	if err := rt.Agents().Register(ctx, owner); err != nil {
		return res, err
	}
	for i := range cfg.Tasks {
		id, err := rt.Tasks().Start(ctx, instantSpec(owner))
		if err != nil {
			return res, err
		}
		if _, err := rt.Tasks().Wait(ctx, id, owner, time.Minute); err != nil {
			return res, err
		}
		if i+1 == cfg.Early {
			res.HeapEarly, _ = liveMemory()
		}
	}
	// The last evicted task actors stop asynchronously after their eviction.
	settleActors(rt)
	res.HeapEnd, _ = liveMemory()
	st := rt.Stats()
	res.Actors, res.Retained, res.Tombstones = st.Actors, st.Retained, st.Tombstones
	return res, nil
}

// RetentionFloor is the same churn in bare protoactor: cfg.Tasks actors spawned
// and stopped one after another, the heap read after the first Early and after all.
// protoactor's process registry spreads PIDs over 32,768 small maps that it fills
// lazily as new names arrive, so any program that spawns that many actors holds
// this much more heap afterwards; it is bounded (every map is touched once).
func RetentionFloor(cfg RetentionConfig) (res RetentionResult) {
	cfg.Tasks, cfg.Early = max(cfg.Tasks, 1), max(cfg.Early, 1)
	sys := floorSystem()
	defer sys.Shutdown()
	for i := range cfg.Tasks {
		pid := sys.Root.Spawn(idleProps)
		_ = sys.Root.StopFuture(pid).Wait()
		if i+1 == cfg.Early {
			res.HeapEarly, _ = liveMemory()
		}
	}
	res.HeapEnd, _ = liveMemory()
	return res
}

// settleActors waits (briefly) until every evicted task actor has stopped: the live
// actors are then the registry, the agent and the retained records.
func settleActors(rt *actors.Runtime) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st := rt.Stats()
		if st.Actors <= 2+st.Retained+st.Running {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// RetentionFigures measures the default retention and, in the same run, the
// behaviour before it (every record kept until disposal).
func RetentionFigures(ctx context.Context, cfg RetentionConfig) ([]Figure, error) {
	bounded, err := Retention(ctx, cfg)
	if err != nil {
		return nil, err
	}
	unbounded, err := Retention(ctx, cfg, actors.WithRetention(cfg.Tasks))
	if err != nil {
		return nil, err
	}
	// Heap per record kind: all tasks retained, then all tasks tombstoned.
	perRecord, err := Retention(ctx, RetentionConfig{Tasks: cfg.Early, Early: 1}, actors.WithRetention(cfg.Early))
	if err != nil {
		return nil, err
	}
	perTomb, err := Retention(ctx, RetentionConfig{Tasks: cfg.Early, Early: 1}, actors.WithNoRetention(), actors.WithTombstones(cfg.Early))
	if err != nil {
		return nil, err
	}
	floor := RetentionFloor(cfg)
	mib := func(b float64) float64 { return b / (1 << 20) }
	per := func(r RetentionResult) float64 {
		return (float64(r.HeapEnd) - float64(r.HeapEarly)) / float64(cfg.Early-1)
	}
	name := fmt.Sprintf("one owner, %d tasks", cfg.Tasks)
	return []Figure{
		newFigure(name+": heap growth after the first "+fmt.Sprint(cfg.Early), "MiB", "lower", mib(bounded.Growth()), BaselineKeepAll,
			map[string]float64{BaselineKeepAll: mib(unbounded.Growth()), BaselineFloor: mib(floor.Growth())},
			fmt.Sprintf("target ≤ 8 MiB; default retention: %d records + %d tombstones kept; floor: as many actors spawned and stopped in bare protoactor (its process registry's lazily filled shard maps)",
				bounded.Retained, bounded.Tombstones)),
		newFigure(name+": live actors", "actors", "lower", float64(bounded.Actors), BaselineKeepAll,
			map[string]float64{BaselineKeepAll: float64(unbounded.Actors)},
			"target ≤ 1 registry + 1 agent + retained + unsettled"),
		newFigure("heap per tombstone", "B", "lower", per(perTomb), BaselineKeepAll,
			map[string]float64{BaselineKeepAll: per(perRecord)},
			fmt.Sprintf("%d settled tasks all evicted (final snapshot only) vs all retained (output, task actor); a retained record costs %.0f B", cfg.Early, per(perRecord))),
	}, nil
}
