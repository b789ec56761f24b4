package kernel

import (
	"reflect"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/messages"
)

// A task's Done is awaited off its mailbox (Kernel.SelectDone), and the outcome
// handed to Config.Deliver, which sends it home. One parked goroutine per live task
// would cost each task its stack (2 to 4 KiB, more than the rest of its record);
// instead the selector keeps the Done channels of up to selectGroupSize tasks in one
// group, whose goroutine waits in reflect.Select on all of them and on its wake
// channel. A slot costs a task about a hundred bytes; a wake-up costs a select over
// the group's channels (a few microseconds at most), once per settlement. The
// selector buys memory, not speed: a start or a settlement costs the same either
// way. Its known cost: each stop wakes its group, which rebuilds its select, so a
// disposal of many tasks pays a select per task.
//
// Groups fill in turn: new watches join the newest group until it is full, then a
// new group starts. A group's goroutine is owned by the kernel's owner (Config.Go,
// which the runtime's Close awaits) and ends once its last watch has fired or been
// stopped; a group never takes new watches after it filled up, so an emptied group
// always ends.

// selectGroupSize is the most Done channels one group's goroutine selects on.
const selectGroupSize = 32

// doneSelector hands out watches.
type doneSelector struct {
	k    *Kernel
	mu   sync.Mutex   // protects open
	open *selectGroup // the group new watches join; nil when a new one must start
}

// selectGroup is one goroutine's set of watches.
type selectGroup struct {
	w    *doneSelector
	wake chan struct{} // buffered 1; tells the goroutine that adds or removes are queued

	mu      sync.Mutex  // protects every field below
	adds    []*DoneSlot // joined, not yet in the select
	removes []*DoneSlot // stopped, still in the select
	size    int         // watches neither fired nor stopped
	taken   int         // watches ever given to this group (it is full at selectGroupSize)
	ended   bool        // the goroutine has returned
}

// DoneSlot is one task's Done in a group's select (Kernel.SelectDone).
type DoneSlot struct {
	done  <-chan messages.Outcome
	self  *actor.PID
	group *selectGroup
	over  bool // fired or stopped; guarded by group.mu
}

// add watches done and hands its outcome to Config.Deliver for self.
func (w *doneSelector) add(done <-chan messages.Outcome, self *actor.PID) *DoneSlot {
	wt := &DoneSlot{done: done, self: self}
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.open
	if g != nil {
		g.mu.Lock()
		if g.ended || g.taken >= selectGroupSize {
			g.mu.Unlock()
			g = nil
		}
	}
	if g == nil {
		g = &selectGroup{w: w, wake: make(chan struct{}, 1)}
		g.mu.Lock()
		w.open = g
		w.k.cfg.Go("done selector", g.run)
	}
	wt.group = g
	g.adds = append(g.adds, wt)
	g.size++
	g.taken++
	if g.taken >= selectGroupSize {
		w.open = nil
	}
	g.mu.Unlock()
	notify(g.wake)
	return wt
}

// Stop ends the watch, if it has not fired: no outcome is delivered for it after.
func (wt *DoneSlot) Stop() {
	g := wt.group
	g.mu.Lock()
	if wt.over {
		g.mu.Unlock()
		return
	}
	wt.over = true
	g.removes = append(g.removes, wt)
	g.size--
	g.mu.Unlock()
	notify(g.wake)
}

// run is the group's goroutine.
func (g *selectGroup) run() {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(g.wake)}}
	watches := []*DoneSlot{nil} // watches[i] is cases[i]'s; 0 is the wake channel
	drop := func(i int) {
		last := len(cases) - 1
		cases[i], watches[i] = cases[last], watches[last]
		cases[last], watches[last] = reflect.SelectCase{}, nil
		cases, watches = cases[:last], watches[:last]
	}
	for {
		g.mu.Lock()
		for _, wt := range g.adds {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(wt.done)})
			watches = append(watches, wt)
		}
		g.adds = nil
		for _, wt := range g.removes {
			for i := 1; i < len(watches); i++ {
				if watches[i] == wt {
					drop(i)
					break
				}
			}
		}
		g.removes = nil
		if g.size == 0 && g.taken >= selectGroupSize || g.size == 0 && len(watches) == 1 && g.w.detach(g) {
			g.ended = true
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()

		i, v, ok := reflect.Select(cases)
		if i == 0 {
			continue
		}
		wt := watches[i]
		drop(i)
		g.mu.Lock()
		fire := !wt.over
		if fire {
			wt.over = true
			g.size--
		}
		g.mu.Unlock()
		if fire {
			var o messages.Outcome
			if ok {
				o = v.Interface().(messages.Outcome)
			}
			g.w.k.cfg.Deliver(wt.self, o, ok)
		}
	}
}

// detach makes g, empty and not yet full, stop taking watches, so that it can end:
// false when a watch is joining it meanwhile (the goroutine then goes on). Called
// by g's goroutine holding g.mu; takes the locks in add's order.
func (w *doneSelector) detach(g *selectGroup) bool {
	g.mu.Unlock()
	w.mu.Lock()
	g.mu.Lock()
	defer w.mu.Unlock()
	if g.size > 0 || len(g.adds) > 0 {
		return false
	}
	if w.open == g {
		w.open = nil
	}
	return true
}

// notify wakes the goroutine waiting on c (buffered 1) without blocking.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
