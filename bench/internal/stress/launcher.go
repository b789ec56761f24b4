package stress

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/subagent"
)

// registerChild is the stress's register function for agentsim.NewLauncher: each
// child is a registered agent (a child of its parent, a new incarnation) whose run
// follows the behavior named by the brief's prompt. The shared agentsim.Launcher runs
// it, as it runs the simulator's children, minus the model.
func (h *harness) registerChild(ctx context.Context, req subagent.Request) (agentsim.Child, error) {
	inc, err := h.register(ctx, req.Child, req.Parent)
	if err != nil {
		return agentsim.Child{}, err
	}
	f := fnv.New64a()
	f.Write([]byte(req.Child))
	rng := rand.New(rand.NewPCG(h.cfg.Seed, f.Sum64()))
	r := &childRun{h: h, inc: inc}
	return agentsim.Child{
		Run:     func(ctx context.Context) subagent.Result { return r.play(ctx, req.Prompt, rng) },
		Dispose: func(ctx context.Context) error { return h.dispose(ctx, inc) },
	}, nil
}

// The child behaviors, with their weights. "nested" starts a sub-agent of its own,
// down to a depth of two.
var behaviors = []struct {
	name   string
	weight int
}{
	{"quick", 4}, {"bash", 3}, {"nested", 2}, {"long", 2}, {"fail", 1}, {"max-tokens", 1},
}

// pickBehavior picks what the child of an owner at depth runs.
func pickBehavior(rng *rand.Rand, depth int) string {
	total := 0
	for _, b := range behaviors {
		if b.name != "nested" || depth < 2 {
			total += b.weight
		}
	}
	n := rng.IntN(total)
	for _, b := range behaviors {
		if b.name == "nested" && depth >= 2 {
			continue
		}
		if n < b.weight {
			return b.name
		}
		n -= b.weight
	}
	return "quick"
}

// newRand returns a random stream derived from seed alone.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// depthOf is how many sub-agent levels an agent id is below a top-level agent.
func depthOf(id messages.AgentID) int { return strings.Count(string(id), "sub-") }

// childRun is one child agent's run.
type childRun struct {
	h   *harness
	inc *incarnation
}

// play runs behavior; a cancellation at any point ends it as aborted.
func (r *childRun) play(ctx context.Context, behavior string, rng *rand.Rand) subagent.Result {
	h, self := r.h, r.inc.id
	pause := func(most time.Duration) bool {
		t := time.NewTimer(time.Duration(rng.Int64N(int64(most))))
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	aborted := func() subagent.Result {
		return subagent.Result{Stop: subagent.StopAborted, Output: "partial", Detail: context.Cause(ctx).Error()}
	}
	done := subagent.Result{Stop: subagent.StopCompleted, Output: "answer of " + string(self)}
	switch behavior {
	case "quick":
		if !pause(20 * time.Millisecond) {
			return aborted()
		}
	case "bash":
		// The child leaves its command running: its disposal must end it.
		id, err := h.start(ctx, r.inc, self, bash.Kind, rng)
		h.childOps.add("child start-bash", classify(err))
		if err == nil && rng.IntN(2) == 0 {
			res, err := h.rt.Tasks().Read(ctx, id, self)
			h.childOps.add("child read", classify(err))
			h.saw(id, res.Snapshot, "read", true)
		}
		if !pause(20 * time.Millisecond) {
			return aborted()
		}
	case "nested":
		id, err := h.start(ctx, r.inc, self, subagent.Kind, rng)
		h.childOps.add("child start-subagent", classify(err))
		if err == nil {
			s, err := h.rt.Tasks().Wait(ctx, id, self, 100*time.Millisecond)
			h.childOps.add("child wait", classify(err))
			h.saw(id, s, "wait", true)
		}
		if ctx.Err() != nil {
			return aborted()
		}
	case "long":
		if !pause(time.Second) {
			return aborted()
		}
	case "fail":
		if !pause(5 * time.Millisecond) {
			return aborted()
		}
		return subagent.Result{Stop: subagent.StopError, Detail: "simulated failure"}
	case "max-tokens":
		return subagent.Result{Stop: subagent.StopMaxTokens, Output: "truncated"}
	}
	return done
}
