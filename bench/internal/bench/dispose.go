package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// DisposeConfig sizes the dispose figures.
type DisposeConfig struct {
	Tasks  int   // live tasks of the disposed owner (Dispose)
	Depth  int   // sub-agent links below the disposed owner (DisposeChain)
	Repeat int   // disposals timed; the median is returned
	Timer  Timer // optional; runs only around each disposal
}

// Dispose measures dispose-to-quiescence: the time Dispose takes for an owner with
// Tasks live tasks, each of which settles as soon as it is cancelled, until every
// task has settled and the owner is unregistered. It returns the median of Repeat
// disposals. For ImplFloor the owner is an actor with Tasks idle children, stopped
// until its Stopped handler ran.
func Dispose(ctx context.Context, impl Impl, cfg DisposeConfig) (time.Duration, error) {
	return disposeEach(ctx, impl, cfg, func(reg Registry, owner messages.AgentID) error {
		for range cfg.Tasks {
			if _, err := reg.Start(ctx, newHeld(owner).spec); err != nil {
				return err
			}
		}
		return nil
	}, func() *floorOwner { return newFloorOwner(cfg.Tasks, 1) })
}

// DisposeChain measures the transitive dispose of a chain of Depth sub-agent-like
// links (see chainSpec): disposing the top owner cancels its link, whose producer
// disposes its child agent, whose link disposes the next, down to a held task; the
// top Dispose returns when all of it is quiescent. It returns the median of Repeat.
// For ImplFloor the chain is 2×(Depth+1) nested actors (an agent and a task actor
// per level), stopped from the top.
func DisposeChain(ctx context.Context, impl Impl, cfg DisposeConfig) (time.Duration, error) {
	return disposeEach(ctx, impl, cfg, func(reg Registry, owner messages.AgentID) error {
		_, err := reg.Start(ctx, chainSpec(reg, owner, max(cfg.Depth, 1)))
		return err
	}, func() *floorOwner { return newFloorOwner(0, 2*(max(cfg.Depth, 1)+1)) })
}

// floorOwner is the floor of one owner to dispose: a started actor tree.
type floorOwner struct {
	children, depth int
	ready, done     chan struct{}
}

func newFloorOwner(children, depth int) *floorOwner {
	return &floorOwner{children: children, depth: depth, ready: make(chan struct{}), done: make(chan struct{})}
}

// disposeEach runs cfg.Repeat rounds of: register an owner and fill it (untimed),
// then time its disposal.
func disposeEach(ctx context.Context, impl Impl, cfg DisposeConfig,
	fill func(Registry, messages.AgentID) error, floor func() *floorOwner) (_ time.Duration, err error) {
	cfg.Repeat = max(cfg.Repeat, 1)
	timer := timerOr(cfg.Timer)
	timer.StopTimer()
	timer.ResetTimer()
	times := make([]time.Duration, 0, cfg.Repeat)
	switch impl {
	case ImplFloor:
		sys := floorSystem()
		defer sys.Shutdown()
		for range cfg.Repeat {
			o := floor()
			pid := sys.Root.Spawn(ownerProps(o.children, o.depth, o.ready, o.done))
			<-o.ready
			timer.StartTimer()
			t0 := time.Now()
			stopAndWait(sys, pid, o.done)
			times = append(times, time.Since(t0))
			timer.StopTimer()
		}
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return 0, rerr
		}
		defer closeWithin(reg, &err)
		for r := range cfg.Repeat {
			owner := messages.AgentID(fmt.Sprintf("owner-%d", r))
			if err := reg.Register(ctx, owner, ""); err != nil {
				return 0, err
			}
			if err := fill(reg, owner); err != nil {
				return 0, err
			}
			timer.StartTimer()
			t0 := time.Now()
			err := reg.Dispose(ctx, owner)
			times = append(times, time.Since(t0))
			timer.StopTimer()
			if err != nil {
				return 0, err
			}
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
