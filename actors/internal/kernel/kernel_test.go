package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// delivery is one outcome Config.Deliver was handed.
type delivery struct {
	self string
	o    messages.Outcome
	ok   bool
}

// testKernel is a kernel on its own actor system; its goroutines (Config.Go) are
// awaited, and the kernel closed, when the test ends.
func testKernel(t *testing.T) (*Kernel, chan delivery) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	var wg sync.WaitGroup
	got := make(chan delivery, 64)
	k := New(Config{System: sys, Workers: 2, Throughput: 300,
		Go: func(_ string, f func()) { wg.Go(f) },
		Deliver: func(self *actor.PID, o messages.Outcome, ok bool) {
			got <- delivery{self: self.Id, o: o, ok: ok}
		}})
	t.Cleanup(func() {
		wg.Wait()
		k.Close()
		sys.Shutdown()
	})
	return k, got
}

// TestSelectDoneDeliversEachOutcomeOnce pins the done selector's contract: a watched
// Done's outcome (or its close without one) is delivered once, for its actor; a
// stopped slot delivers nothing, before or after its Done fires; watches spread over
// groups, and every group's goroutine ends once its watches are over (the cleanup
// waits for them).
func TestSelectDoneDeliversEachOutcomeOnce(t *testing.T) {
	k, got := testKernel(t)
	const n = selectGroupSize + 8 // two groups
	dones := make([]chan messages.Outcome, n)
	slots := make([]*DoneSlot, n)
	for i := range n {
		dones[i] = make(chan messages.Outcome, 1)
		slots[i] = k.SelectDone(dones[i], actor.NewPID("local", fmt.Sprint(i)))
	}
	want := map[string]delivery{}
	for i := range n {
		id := fmt.Sprint(i)
		switch {
		case i%4 == 0: // stopped before its Done fires: nothing
			slots[i].Stop()
			dones[i] <- messages.Outcome{Status: messages.Completed}
		case i%4 == 1: // closed without an outcome
			close(dones[i])
			want[id] = delivery{self: id}
		default:
			o := messages.Outcome{Status: messages.Completed, Detail: id}
			dones[i] <- o
			want[id] = delivery{self: id, o: o, ok: true}
		}
	}
	seen := map[string]delivery{}
	for range want {
		d := <-got
		if _, dup := seen[d.self]; dup {
			t.Fatalf("%s delivered twice", d.self)
		}
		seen[d.self] = d
	}
	for id, w := range want {
		if seen[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, seen[id], w)
		}
	}
	for _, s := range slots {
		s.Stop() // stopping a fired or stopped slot is harmless
	}
}

// echo answers every string with itself, and "stay" not at all.
type echo struct{}

func (echo) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(string); ok && m != "stay" {
		ctx.Respond(m)
	}
}

// TestCallEndsOnce pins a call's three ends: the answer, the caller's context, the
// stop channel; and an abandonable call's abandon, answered once.
func TestCallEndsOnce(t *testing.T) {
	k, _ := testKernel(t)
	pid := k.cfg.System.Root.Spawn(k.Props(func() actor.Actor { return echo{} }, nil))
	defer k.cfg.System.Root.Poison(pid)
	never := make(chan struct{})
	t.Run("the answer", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range 3 { // the reply process is recycled between calls
			if m, err := k.Call(ctx, pid, "hi", never); err != nil || m != "hi" {
				t.Fatalf("got %v, %v; want hi", m, err)
			}
		}
	})
	t.Run("the caller's context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := k.Call(ctx, pid, "stay", never); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
	t.Run("the stop channel", func(t *testing.T) {
		stop := make(chan struct{})
		close(stop)
		if _, err := k.Call(context.Background(), pid, "stay", stop); !errors.Is(err, ErrStopped) {
			t.Fatalf("got %v, want ErrStopped", err)
		}
	})
	t.Run("an abandoned call gets the abandon's answer", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m, abandoned, err := k.CallAbandonable(ctx, pid, "stay", never, func(replyTo *actor.PID) {
			k.cfg.System.Root.Send(replyTo, "given up")
		})
		if err != nil || !abandoned || m != "given up" {
			t.Fatalf("got %v, %v, %v; want the abandon's answer", m, abandoned, err)
		}
	})
}

// starter answers its starter on Started, noting that it ran and whether its
// mailbox was made before.
type starter struct {
	box     *Mailbox
	boxSeen bool
	started bool
	replyTo *actor.PID
}

func (s *starter) MailboxMade(box *Mailbox) { s.box = box }

func (s *starter) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		s.started, s.boxSeen = true, s.box != nil
		ctx.Send(s.replyTo, "started")
	}
}

// inlineParent spawns each *starter it gets with an inline spawner and reports what
// the starter had done by the time Spawn returned (read on the parent's goroutine:
// race-free only because Started ran there).
type inlineParent struct {
	k      *Kernel
	s      *Spawner
	report chan [2]bool
}

func (p *inlineParent) Receive(ctx actor.Context) {
	if st, ok := ctx.Message().(*starter); ok {
		if p.s == nil {
			p.s = p.k.InlineSpawner()
		}
		if _, err := p.s.Spawn(ctx, "child", st); err != nil {
			panic(err)
		}
		p.report <- [2]bool{st.started, st.boxSeen}
	}
}

// TestInlineSpawnerRunsStartedBeforeSpawnReturns pins the inline spawner — the new
// actor learns its mailbox before its Started, which has run on the spawning
// goroutine by the time Spawn returns — and PostAndAwait handing it the message.
func TestInlineSpawnerRunsStartedBeforeSpawnReturns(t *testing.T) {
	k, _ := testKernel(t)
	root := k.cfg.System.Root
	report := make(chan [2]bool, 1)
	var box *Mailbox
	parent := root.Spawn(k.Props(func() actor.Actor { return &inlineParent{k: k, report: report} },
		func(m *Mailbox) { box = m }))
	defer root.Poison(parent)
	m, err := k.PostAndAwait(box, func(replyTo *actor.PID) any { return &starter{replyTo: replyTo} }, make(chan struct{}))
	if err != nil || m != "started" {
		t.Fatalf("got %v, %v; want the child's answer", m, err)
	}
	if got := <-report; got != [2]bool{true, true} {
		t.Fatalf("when Spawn returned: started, mailbox seen = %v, want both", got)
	}
}
