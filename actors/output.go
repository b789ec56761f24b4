package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/internal/contain"
)

// This file is a task's output as the model and observers read it: consuming reads,
// reads up to a pattern (ReadUntil), observer reads (Peek), and the growth
// notifications of the producer's output stream.

// outputGrew: the producer's output grew. Pending ReadUntils and watches look at
// it; while someone subscribes to events, the registry is told the new size —
// until settlement, after which the settled event has told it.
func (t *task) outputGrew(ctx actor.Context) {
	t.grew.Store(false)
	t.matchUntils(ctx)
	t.scanWatches(false)
	if t.phase == phaseRunning || t.phase == phaseStopping {
		t.announceOutput(ctx)
	}
}

// announceOutput tells the registry that the task's output grew, for the event
// stream (only while someone subscribes).
func (t *task) announceOutput(ctx actor.Context) {
	if t.rt.nSubscribers.Load() == 0 {
		return
	}
	if n, err := contain.Value("output", func() (int64, error) { return t.stream().Written(), nil }); err == nil {
		t.toRegistry(ctx, &taskOutput{snap: t.snap, bytes: n})
	}
}

// followOutput asks the producer's output stream to tell the task when it grows.
func (t *task) followOutput() {
	out := t.stream()
	if out == nil {
		return
	}
	self, rt, grew, listening := t.self, t.rt, &t.grew, &t.listening
	full, _ := out.(fullOutput)
	// Growth matters only to a pending ReadUntil and to event subscribers: without
	// either, a write costs the writer two atomic loads and sends nothing (a flood
	// would otherwise wake the actor once per chunk for nothing).
	err := contain.Call("output", func() error {
		out.OnGrow(func() {
			tellFull(rt, self, full)
			if (listening.Load() || rt.nSubscribers.Load() > 0) && grew.CompareAndSwap(false, true) {
				tellTask(rt.system.Root, self, &outputGrew{})
			}
		})
		return nil
	})
	if err != nil {
		t.rt.log.Error("taskrt: Output.OnGrow panicked", "task", t.snap.ID, "err", err)
		return
	}
	// Output written between Run and now raised no callback: account for it, and
	// for a writer in block mode that filled the output and waits already.
	_ = contain.Call("output", func() error { tellFull(rt, self, full); return nil })
	if n, err := contain.Value("output", func() (int64, error) { return out.Written(), nil }); err == nil && n > 0 {
		if rt.nSubscribers.Load() > 0 && grew.CompareAndSwap(false, true) {
			tellTask(rt.system.Root, self, &outputGrew{})
		}
	}
}
