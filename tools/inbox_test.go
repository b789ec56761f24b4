package tools_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// signalled reports whether Ready has a signal pending now (Inject, Drain, Wake and
// UserInput are synchronous, so no wait is needed).
func signalled(b *tools.Inbox) bool {
	select {
	case <-b.Ready():
		return true
	default:
		return false
	}
}

func inject(t *testing.T, b *tools.Inbox, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if err := b.Inject(bg, s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInbox(t *testing.T) {
	t.Run("an empty inbox does not signal and has nothing to wake for", func(t *testing.T) {
		b := tools.NewInbox()
		if signalled(b) {
			t.Error("Ready signalled with nothing queued")
		}
		if got, ok := b.Wake(); ok || got != nil {
			t.Errorf("Wake = %q, %v; want nothing, false", got, ok)
		}
	})
	t.Run("a notice signals once, and Wake takes every queued notice in order", func(t *testing.T) {
		b := tools.NewInbox()
		inject(t, b, "n1", "n2", "n3")
		if !signalled(b) {
			t.Fatal("no signal after a notice")
		}
		if signalled(b) {
			t.Error("three notices made more than one signal")
		}
		got, ok := b.Wake()
		if want := []string{"n1", "n2", "n3"}; !ok || !slices.Equal(got, want) {
			t.Errorf("Wake = %q, %v; want %q, true", got, ok, want)
		}
		if b.Len() != 0 || b.AutoTurns() != 1 {
			t.Errorf("after Wake: Len %d, AutoTurns %d; want 0, 1", b.Len(), b.AutoTurns())
		}
	})
	t.Run("Drain takes the notices without counting a turn and clears the stale signal", func(t *testing.T) {
		b := tools.NewInbox()
		inject(t, b, "n1")
		if got := b.Drain(); !slices.Equal(got, []string{"n1"}) {
			t.Errorf("Drain = %q", got)
		}
		if signalled(b) {
			t.Error("Ready still signalled after Drain took the notice")
		}
		if b.AutoTurns() != 0 {
			t.Errorf("AutoTurns = %d after a Drain, want 0", b.AutoTurns())
		}
		if got := b.Drain(); got != nil {
			t.Errorf("second Drain = %q, want nothing", got)
		}
	})
	for _, max := range []int{1, 3} {
		t.Run(fmt.Sprintf("at most %d automatic turns in a row without user input; UserInput re-arms", max), func(t *testing.T) {
			b := tools.NewInbox(tools.WithMaxAutoTurns(max))
			for turn := 1; turn <= max; turn++ {
				inject(t, b, fmt.Sprintf("n%d", turn))
				if !signalled(b) {
					t.Fatalf("turn %d: no signal", turn)
				}
				if got, ok := b.Wake(); !ok || !slices.Equal(got, []string{fmt.Sprintf("n%d", turn)}) {
					t.Fatalf("turn %d: Wake = %q, %v", turn, got, ok)
				}
			}
			// The storm goes on: no more wake-ups, the notices wait.
			inject(t, b, "late1", "late2")
			if signalled(b) {
				t.Error("Ready signalled past the automatic-turn bound")
			}
			if got, ok := b.Wake(); ok || got != nil {
				t.Errorf("Wake past the bound = %q, %v; want nothing, false", got, ok)
			}
			if b.Len() != 2 {
				t.Errorf("Len = %d, want the 2 notices kept", b.Len())
			}
			b.UserInput()
			if !signalled(b) {
				t.Error("no signal after user input with notices waiting")
			}
			if got, ok := b.Wake(); !ok || !slices.Equal(got, []string{"late1", "late2"}) {
				t.Errorf("Wake after user input = %q, %v", got, ok)
			}
		})
	}
	t.Run("past the capacity notices are counted and the drain says how many", func(t *testing.T) {
		b := tools.NewInbox(tools.WithInboxCapacity(2))
		inject(t, b, "n1", "n2", "n3", "n4", "n5")
		if b.Len() != 5 {
			t.Errorf("Len = %d, want 5", b.Len())
		}
		want := []string{"n1", "n2", "(3 more notices were dropped: at most 2 are kept between turns; use task_list to see every task's status)"}
		if got := b.Drain(); !slices.Equal(got, want) {
			t.Errorf("Drain = %q, want %q", got, want)
		}
		inject(t, b, "n6", "n7", "n8")
		want = []string{"n6", "n7", "(1 more notice was dropped: at most 2 are kept between turns; use task_list to see every task's status)"}
		if got := b.Drain(); !slices.Equal(got, want) {
			t.Errorf("second Drain = %q, want %q", got, want)
		}
	})
	t.Run("zero and negative options keep the defaults", func(t *testing.T) {
		b := tools.NewInbox(tools.WithInboxCapacity(0), tools.WithMaxAutoTurns(-1))
		for i := range tools.DefaultInboxCapacity + 1 {
			inject(t, b, fmt.Sprint(i))
		}
		if got := b.Drain(); len(got) != tools.DefaultInboxCapacity+1 { // the last is the dropped line
			t.Errorf("Drain returned %d lines, want %d", len(got), tools.DefaultInboxCapacity+1)
		}
		for turn := range tools.DefaultMaxAutoTurns + 1 {
			inject(t, b, "n")
			_, ok := b.Wake()
			if want := turn < tools.DefaultMaxAutoTurns; ok != want {
				t.Errorf("automatic turn %d allowed = %v, want %v", turn+1, ok, want)
			}
		}
	})
	t.Run("Wait returns the notices of an automatic turn, or ctx's error", func(t *testing.T) {
		b := tools.NewInbox(tools.WithMaxAutoTurns(1))
		got := make(chan []string, 1)
		go func() {
			n, err := b.Wait(bg)
			if err != nil {
				t.Error(err)
			}
			got <- n
		}()
		inject(t, b, "n1")
		if n := <-got; !slices.Equal(n, []string{"n1"}) {
			t.Errorf("Wait = %q", n)
		}
		// Past the bound Wait blocks until ctx ends, whatever arrives.
		inject(t, b, "n2")
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if n, err := b.Wait(ctx); err != context.Canceled || n != nil {
			t.Errorf("Wait past the bound = %q, %v; want nothing, context.Canceled", n, err)
		}
	})
	t.Run("concurrent injectors and a draining loop lose and repeat nothing", func(t *testing.T) {
		const writers, each = 8, 50
		b := tools.NewInbox(tools.WithInboxCapacity(writers * each))
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					_ = b.Inject(bg, fmt.Sprintf("%d/%d", w, i))
				}
			})
		}
		seen := map[string]int{}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for finished := false; !finished; {
			select {
			case <-b.Ready():
			case <-done:
				finished = true
			}
			for _, n := range b.Drain() {
				seen[n]++
			}
		}
		if len(seen) != writers*each {
			t.Errorf("saw %d distinct notices, want %d", len(seen), writers*each)
		}
		for n, c := range seen {
			if c != 1 {
				t.Errorf("notice %s seen %d times", n, c)
			}
		}
	})
}

// The Inbox as a runtime injector: a background task's notice wakes the idle loop.
func TestInboxAsInjector(t *testing.T) {
	e := newEnv(t)
	b := tools.NewInbox()
	if err := e.rt.Agents().Register(bg, "a1", actors.WithInjector(b.Inject)); err != nil {
		t.Fatal(err)
	}
	f := newFake(true)
	e.start(t, f, "bash", "make test", "a1")
	f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	got, err := b.Wait(ctx)
	want := []string{"background task bash-1 (bash: make test) finished [status: completed, exit code: 0]. Read its output with task_output."}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Wait = %q, %v; want %q", got, err, want)
	}
}
