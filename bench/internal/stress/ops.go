package stress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/subagent"
)

// OpStat counts one kind of operation: successes, and failures by class.
type OpStat struct {
	OK     int
	Errors map[string]int
}

func addOp(m map[string]*OpStat, op, class string) {
	s, ok := m[op]
	if !ok {
		s = &OpStat{Errors: map[string]int{}}
		m[op] = s
	}
	if class == "" {
		s.OK++
	} else {
		s.Errors[class]++
	}
}

// opCounter is a shared OpStat map (for the sub-agent runs).
type opCounter struct {
	mu  sync.Mutex // protects ops
	ops map[string]*OpStat
}

func (c *opCounter) add(op, class string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addOp(c.ops, op, class)
}

func (c *opCounter) snapshot() map[string]*OpStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// classify names an operation's error for the counts.
func classify(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, messages.ErrOwnerLimit):
		return "owner-limit"
	case errors.Is(err, messages.ErrTaskNotFound):
		return "not-found"
	case errors.Is(err, messages.ErrOwnerUnknown):
		return "owner-unknown"
	case errors.Is(err, messages.ErrAborted):
		return "aborted"
	case errors.Is(err, messages.ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "hung"
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "other"
	}
}

// notFoundText is the error every call returns for an unknown id, and so for a
// foreign one.
func notFoundText(id messages.TaskID) string {
	return fmt.Sprintf("%v: %s", messages.ErrTaskNotFound, id)
}

// The operations an agent picks from, with their weights.
var opWeights = []struct {
	name   string
	weight int
}{
	{"start-bash", 12}, {"start-subagent", 6}, {"start-unowned", 2},
	{"read", 14}, {"wait", 8}, {"kill", 6}, {"get", 8}, {"list", 5},
	{"foreign", 8}, {"no-agent", 3}, {"unowned-op", 4}, {"dispose", 2},
}

var opTotal = func() int {
	n := 0
	for _, o := range opWeights {
		n += o.weight
	}
	return n
}()

// commands are the bash commands agents start: quick ones, failing ones, output
// floods, long sleeps that end by kill or teardown, and a background grandchild that
// outlives its shell (swept by the producer).
var commands = []string{
	"true",
	"echo hello",
	"printf 'line %d\\n' $(seq 1 200)",
	"sleep 0.05; echo done",
	"sleep 0.2",
	"sleep 5",
	"exit 3",
	"echo oops >&2; exit 1",
	"yes stress | head -c 300000",
	"sleep 5 & echo spawned",
	"for i in 1 2 3 4 5; do echo $i; sleep 0.02; done",
}

func pickCommand(rng *rand.Rand) string { return commands[rng.IntN(len(commands))] }

// worker is one top-level agent of the run.
type worker struct {
	h   *harness
	id  messages.AgentID
	inc *incarnation
	rng *rand.Rand
	own []messages.TaskID  // tasks of the current incarnation
	ops map[string]*OpStat // written only by the worker's goroutine
}

func (h *harness) newWorker(i int) (*worker, error) {
	w := &worker{h: h, id: messages.AgentID(fmt.Sprintf("agent-%d", i)),
		rng: rand.New(rand.NewPCG(h.cfg.Seed, uint64(i)+1)), ops: map[string]*OpStat{}}
	var err error
	w.inc, err = h.register(context.Background(), w.id, "")
	return w, err
}

// loop runs random operations until ctx ends and at least minOps were run, with a
// think time of 0–2 ms.
func (w *worker) loop(ctx context.Context, minOps int) {
	for n := 0; ctx.Err() == nil || n < minOps; n++ {
		if !w.step() {
			return
		}
		if d := w.rng.IntN(3); d > 0 {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
	}
}

// step runs one random operation; false stops the worker (its agent is gone).
func (w *worker) step() bool {
	// An operation that takes a minute is a hang: its error is classified "hung".
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := w.rng.IntN(opTotal)
	op := opWeights[0].name
	for _, o := range opWeights {
		if n < o.weight {
			op = o.name
			break
		}
		n -= o.weight
	}
	if len(w.own) == 0 && (op == "read" || op == "wait" || op == "kill" || op == "get") {
		op = "start-bash"
	}
	switch op {
	case "start-bash", "start-subagent":
		kind := bash.Kind
		if op == "start-subagent" {
			kind = subagent.Kind
		}
		id, err := w.h.start(ctx, w.inc, w.id, kind, w.rng)
		w.record(op, err, err != nil && !errors.Is(err, messages.ErrOwnerLimit))
		if err == nil {
			w.own = append(w.own, id)
		}
	case "start-unowned":
		kind := bash.Kind
		if w.rng.IntN(5) == 0 {
			kind = subagent.Kind
		}
		_, err := w.h.start(ctx, nil, "", kind, w.rng)
		w.record(op, err, err != nil && !errors.Is(err, messages.ErrOwnerLimit))
	case "read":
		i := w.rng.IntN(len(w.own))
		id := w.own[i]
		r, err := w.h.rt.Tasks().Read(ctx, id, w.id)
		w.record(op, err, err != nil)
		w.h.saw(id, r.Snapshot, "read", true)
		if err == nil && r.Snapshot.Status.Terminal() && w.rng.IntN(2) == 0 {
			w.own = slices.Delete(w.own, i, i+1)
		}
	case "wait":
		id := w.own[w.rng.IntN(len(w.own))]
		s, err := w.h.rt.Tasks().Wait(ctx, id, w.id, time.Duration(1+w.rng.IntN(30))*time.Millisecond)
		w.record(op, err, err != nil)
		w.h.saw(id, s, "wait", true)
	case "kill":
		id := w.own[w.rng.IntN(len(w.own))]
		res, _, err := w.h.rt.Tasks().Kill(ctx, id, w.id, "stress kill")
		w.record(op, err, err != nil)
		switch {
		case err != nil:
		case res == messages.KillAlreadyTerminal:
			// The kill returned the task's end to its caller: it marks the task
			// reported, as a terminal read or wait does, so no notice may follow.
			w.h.reported(id, "kill")
		case res != messages.KillRequested:
			w.h.violate("kill %s: unexpected result %q", id, res)
		}
	case "get":
		id := w.own[w.rng.IntN(len(w.own))]
		s, err := w.h.rt.Tasks().Get(ctx, id, w.id)
		w.record(op, err, err != nil)
		w.h.saw(id, s, "get", false)
	case "list":
		w.list(ctx)
	case "foreign", "no-agent":
		w.foreign(ctx, op)
	case "unowned-op":
		w.unownedOp(ctx)
	case "dispose":
		err := w.h.dispose(ctx, w.inc)
		w.record(op, err, err != nil)
		if err != nil {
			return false
		}
		w.own = nil
		w.inc, err = w.h.register(ctx, w.id, "")
		w.record("register", err, err != nil)
		return err == nil
	}
	return true
}

// record counts an operation; unexpected makes its error a violation.
func (w *worker) record(op string, err error, unexpected bool) {
	addOp(w.ops, op, classify(err))
	if unexpected {
		w.h.violate("%s by %s: unexpected error: %v", op, w.id, err)
	}
}

// list checks that List shows the caller only its own, its descendants' and unowned
// tasks, and every task of its current incarnation.
func (w *worker) list(ctx context.Context) {
	snaps, err := w.h.rt.Tasks().List(ctx, w.id)
	w.record("list", err, err != nil)
	if err != nil {
		return
	}
	seen := make(map[messages.TaskID]bool, len(snaps))
	for _, s := range snaps {
		seen[s.ID] = true
		if s.Owner != "" && s.Owner != w.id && !descends(s.Owner, w.id) {
			w.h.violate("list by %s shows %s owned by %s", w.id, s.ID, s.Owner)
		}
		w.h.saw(s.ID, s, "list", false)
	}
	for _, id := range w.own {
		if !seen[id] {
			w.h.violate("list by %s misses its task %s", w.id, id)
		}
	}
}

// descends reports whether agent a is a descendant of agent b: sub-agents are
// registered as children of their parent, with ids "<parent>/sub-N". The no-agent
// caller has no descendants.
func descends(a, b messages.AgentID) bool {
	return b != "" && strings.HasPrefix(string(a), string(b)+"/")
}

// foreign operates on the task of an owner that is neither this agent nor one of its
// descendants (whose tasks an ancestor may reach), as this agent ("foreign") or as
// the no-agent caller ("no-agent"): every call must fail exactly as an unknown id
// does.
// A foreign kill's reason starts with "foreign:", which no Cancel may ever see.
func (w *worker) foreign(ctx context.Context, op string) {
	caller := w.id
	if op == "no-agent" {
		caller = ""
	}
	var id messages.TaskID
	w.h.mu.Lock()
	for range 8 {
		if len(w.h.owned) == 0 {
			break
		}
		c := w.h.owned[w.rng.IntN(len(w.h.owned))]
		if owner := w.h.tasks[c].owner; owner != caller && !descends(owner, caller) {
			id = c
			break
		}
	}
	w.h.mu.Unlock()
	if id == "" {
		return
	}
	var err error
	kind := []string{"get", "read", "kill", "wait"}[w.rng.IntN(4)]
	switch kind {
	case "get":
		_, err = w.h.rt.Tasks().Get(ctx, id, caller)
	case "read":
		_, err = w.h.rt.Tasks().Read(ctx, id, caller)
	case "kill":
		_, _, err = w.h.rt.Tasks().Kill(ctx, id, caller, "foreign:"+string(caller))
	case "wait":
		_, err = w.h.rt.Tasks().Wait(ctx, id, caller, time.Millisecond)
	}
	addOp(w.ops, op+"-"+kind, classify(err))
	if err == nil || !errors.Is(err, messages.ErrTaskNotFound) || err.Error() != notFoundText(id) {
		w.h.violate("%s %s on %s as %q: want %q, got %v", op, kind, id, caller, notFoundText(id), err)
	}
}

// unownedOp reads, waits on, gets or kills an unowned task: open to every caller.
func (w *worker) unownedOp(ctx context.Context) {
	w.h.mu.Lock()
	var id messages.TaskID
	if n := len(w.h.unowned); n > 0 {
		id = w.h.unowned[w.rng.IntN(n)]
	}
	w.h.mu.Unlock()
	if id == "" {
		return
	}
	var err error
	var s messages.Snapshot
	kind := []string{"get", "read", "kill", "wait"}[w.rng.IntN(4)]
	switch kind {
	case "get":
		s, err = w.h.rt.Tasks().Get(ctx, id, w.id)
	case "read":
		var r messages.ReadResult
		r, err = w.h.rt.Tasks().Read(ctx, id, w.id)
		s = r.Snapshot
	case "kill":
		_, _, err = w.h.rt.Tasks().Kill(ctx, id, w.id, "stress kill")
	case "wait":
		s, err = w.h.rt.Tasks().Wait(ctx, id, w.id, time.Duration(1+w.rng.IntN(10))*time.Millisecond)
	}
	w.record("unowned-"+kind, err, err != nil)
	w.h.saw(id, s, kind, kind == "read" || kind == "wait")
}
