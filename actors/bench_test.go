package actors_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// instant is a producer whose work is already done: Run returns a settled Done.
func instant() messages.Spec {
	return messages.Spec{Kind: "bench", Label: "instant", Run: func() (messages.Hooks, error) {
		done := make(chan messages.Outcome, 1)
		done <- messages.Outcome{Status: messages.Completed}
		return messages.Hooks{Cancel: func(string) error { return nil }, Done: done}, nil
	}}
}

// BenchmarkLifecycle measures start → settled (observed by Wait) of an instant task,
// next to what protoactor itself costs for one spawn + stop.
func BenchmarkLifecycle(b *testing.B) {
	b.Run("impl=actors", func(b *testing.B) {
		rt := newRT(b, actors.WithoutOwnerLimit())
		b.ReportAllocs()
		for b.Loop() {
			id, err := rt.Tasks().Start(bg, instant())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Tasks().Wait(bg, id, "", time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=floor/spawn+stop", func(b *testing.B) {
		sys := quietSystem()
		props := actor.PropsFromFunc(func(actor.Context) {})
		b.ReportAllocs()
		for b.Loop() {
			pid := sys.Root.Spawn(props)
			if err := sys.Root.StopFuture(pid).Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRoutedRead measures one Read round trip (client → registry → task actor →
// client) next to a bare RequestFuture round trip to an echo actor.
func BenchmarkRoutedRead(b *testing.B) {
	b.Run("impl=actors", func(b *testing.B) {
		rt := newRT(b)
		f := newFake()
		id := start(b, rt, f.spec("bash", "", true))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.Tasks().Read(bg, id, ""); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		f.Finish(messages.Outcome{Status: messages.Completed})
	})
	b.Run("impl=actors/get", func(b *testing.B) {
		rt := newRT(b)
		f := newFake()
		id := start(b, rt, f.spec("bash", "", true))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.Tasks().Get(bg, id, ""); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		f.Finish(messages.Outcome{Status: messages.Completed})
	})
	b.Run("impl=floor/RequestFuture", func(b *testing.B) {
		sys := quietSystem()
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(string); ok {
				c.Respond("ok")
			}
		}))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sys.Root.RequestFuture(pid, "read", time.Minute).Result(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = sys.Root.StopFuture(pid).Wait()
	})
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}
