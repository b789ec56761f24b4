package bench

import (
	"context"
	"fmt"
	"runtime"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// MemoryConfig sizes the memory figure.
type MemoryConfig struct {
	Tasks  int   // live tasks at the measurement
	Owners int   // agents owning them (registered before the first reading)
	Timer  Timer // optional
}

// MemoryResult is the memory one live task costs, in bytes.
type MemoryResult struct {
	Heap   float64 // live heap objects per task
	Stacks float64 // goroutine stack bytes per task
}

// Total is heap plus stacks per task.
func (m MemoryResult) Total() float64 { return m.Heap + m.Stacks }

// Memory measures the bytes per live task: live heap (HeapAlloc after collecting
// garbage) plus goroutine stacks (StackInuse), read before and after starting Tasks
// running tasks, divided by Tasks. The producer is excluded: every task's hooks and
// spec are built before the first reading, and the owners are registered before it
// too. For ImplFloor a task is an idle actor (whose PID is kept, as the registry
// keeps its tasks').
func Memory(ctx context.Context, impl Impl, cfg MemoryConfig) (res MemoryResult, err error) {
	cfg.Tasks, cfg.Owners = max(cfg.Tasks, 1), max(cfg.Owners, 1)
	timer := timerOr(cfg.Timer)
	var heap0, stack0, heap1, stack1 uint64
	switch impl {
	case ImplFloor:
		sys := floorSystem()
		defer sys.Shutdown()
		pids := make([]*actor.PID, 0, cfg.Tasks)
		defer func() {
			for _, p := range pids {
				sys.Root.Stop(p)
			}
		}()
		heap0, stack0 = liveMemory()
		timer.ResetTimer()
		for range cfg.Tasks {
			pids = append(pids, sys.Root.Spawn(idleProps))
		}
		timer.StopTimer()
		heap1, stack1 = liveMemory()
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return res, rerr
		}
		defer closeWithin(reg, &err)
		owners := make([]messages.AgentID, cfg.Owners)
		for i := range owners {
			owners[i] = messages.AgentID(fmt.Sprintf("owner-%d", i))
			if err := reg.Register(ctx, owners[i], ""); err != nil {
				return res, err
			}
		}
		helds := make([]*held, cfg.Tasks)
		for i := range helds {
			helds[i] = newHeld(owners[i%len(owners)])
		}
		heap0, stack0 = liveMemory()
		timer.ResetTimer()
		for _, h := range helds {
			if _, err := reg.Start(ctx, h.spec); err != nil {
				return res, err
			}
		}
		timer.StopTimer()
		heap1, stack1 = liveMemory()
		runtime.KeepAlive(helds)
	}
	n := float64(cfg.Tasks)
	return MemoryResult{
		Heap:   (float64(heap1) - float64(heap0)) / n,
		Stacks: (float64(stack1) - float64(stack0)) / n,
	}, nil
}
