package stress

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// Report is what a stress run did and what its checks found.
type Report struct {
	Seed     uint64
	Duration time.Duration // asked for
	Operated time.Duration // the agents' operating phase
	Closed   time.Duration // Close and the wait for the sub-agent runs
	Agents   int

	Ops     map[string]*OpStat                 // by operation
	Started int                                // tasks a Start returned
	Tasks   map[string]map[messages.Status]int // kind → final status → count
	Notices NoticeSummary

	Stats      actors.Stats // after Close
	Goroutines [2]int       // before the runtime started, after Close
	Processes  int          // processes of this run's bash tasks alive after Close
	// MachineProcesses is leakcheck.Machine after Close: every process on the
	// machine with a bash task marker, other programs' included (informational).
	MachineProcesses int
	RuntimeErrors    []string // error-level records the runtime logged
	Violations       []string
}

// NoticeSummary accounts for every task's completion notice.
type NoticeSummary struct {
	Delivered int               // tasks whose owner's session got their one notice
	None      map[string]int    // tasks without a notice, by recorded reason
	Tools     tools.NoticeStats // the notice injector's own counters
}

// OK reports whether the run found no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) mergeOps(m map[string]*OpStat) {
	if r.Ops == nil {
		r.Ops = map[string]*OpStat{}
	}
	for op, s := range m {
		t, ok := r.Ops[op]
		if !ok {
			t = &OpStat{Errors: map[string]int{}}
			r.Ops[op] = t
		}
		t.OK += s.OK
		for c, n := range s.Errors {
			t.Errors[c] += n
		}
	}
}

// check runs the end-of-run invariants on everything recorded. Called after Close.
func (h *harness) check(rep *Report) {
	rep.Stats = h.rt.Stats()
	if s := rep.Stats; s.Tasks != 0 || s.Running != 0 || s.Agents != 0 || s.Actors != 0 {
		h.violate("live state after Close: %+v (want all zero)", s)
	}
	if rep.Stats.Abandoned != 0 {
		h.violate("%d tasks abandoned (did not settle within the settle timeout after cancel)", rep.Stats.Abandoned)
	}
	rep.Notices.Tools = h.tt.Notices()
	rep.Notices.None = map[string]int{}
	rep.Tasks = map[string]map[messages.Status]int{}

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(h.tasks)) {
		r := h.tasks[id]
		if !r.started {
			h.violateLocked("%s settled or was notified, but no Start returned it", id)
			continue
		}
		rep.Started++
		status := r.final.Status
		switch {
		case r.settles == 0:
			// Listeners are silent from the moment Close begins: a task still live
			// (or not yet announced) then settles unannounced. That it did settle is
			// checked above: no running task, record or actor is left after Close.
			status = "settled silently during Close"
		case r.settles > 1:
			h.violateLocked("%s settled %d times", id, r.settles)
		case !status.Terminal():
			h.violateLocked("%s settled with non-terminal status %q", id, status)
		}
		if rep.Tasks[r.kind] == nil {
			rep.Tasks[r.kind] = map[messages.Status]int{}
		}
		rep.Tasks[r.kind][status]++
		for i, st := range r.seen {
			if r.settles > 0 && st != r.final.Status {
				h.violateLocked("%s: %s returned terminal status %s, but it settled %s", id, r.seenBy[i], st, r.final.Status)
			}
		}
		for _, reason := range r.cancels.list() {
			if strings.HasPrefix(reason, "foreign:") {
				h.violateLocked("%s (owner %q) was cancelled by a foreign kill (%q)", id, r.owner, reason)
			}
		}
		h.checkNotice(rep, r)
	}
}

// checkNotice: exactly one notice, into the owning incarnation, for an owned task
// unreported at settlement — or a recorded reason for none. Called with h.mu held.
func (h *harness) checkNotice(rep *Report, r *taskRec) {
	switch len(r.notices) {
	case 0:
		reason := noneReason(r)
		if reason == "" {
			p := int64(-1)
			if r.inc != nil {
				p = r.inc.disposeP
			}
			h.violateLocked("%s (owner %s) got no notice and has no reason for none: settled %s reported=%v as settlement #%d; owner disposal began after #%d",
				r.id, r.owner, r.final.Status, r.final.Reported, r.seq, p)
			reason = "none (violation)"
		}
		rep.Notices.None[reason]++
	case 1:
		rep.Notices.Delivered++
		switch {
		case r.owner == "":
			h.violateLocked("unowned %s got a notice", r.id)
		case r.final.Reported:
			h.violateLocked("%s got a notice although it was reported at settlement", r.id)
		case r.notices[0] != r.inc:
			h.violateLocked("%s's notice went to %s generation %d, not its owner's incarnation (generation %d)",
				r.id, r.notices[0].id, r.notices[0].gen, r.inc.gen)
		}
	default:
		h.violateLocked("%s got %d notices", r.id, len(r.notices))
	}
}

// noneReason is why a task may legitimately have no notice, or "".
func noneReason(r *taskRec) string {
	switch {
	case r.settles == 0:
		return "settled during Close (listeners are silent)"
	case r.owner == "":
		return "unowned"
	case r.final.Reported:
		return "reported at settlement (kill, pending wait, teardown)"
	case r.reportedBy != "":
		return "reported by a " + r.reportedBy + " after settlement"
	case r.inc != nil && r.inc.disposeP >= 0 && r.seq > r.inc.disposeP:
		return "owner's disposal began before the notice"
	}
	return ""
}

// Write prints the run's summary.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "taskrt-stress: seed %d, %d agents, %s (operated %s, close %s)\n",
		r.Seed, r.Agents, r.Duration, r.Operated.Round(time.Millisecond), r.Closed.Round(time.Millisecond))

	fmt.Fprintln(w, "operations:")
	total := 0
	for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
		s := r.Ops[op]
		var errs []string
		n := s.OK
		for _, c := range slices.Sorted(maps.Keys(s.Errors)) {
			errs = append(errs, fmt.Sprintf("%s %d", c, s.Errors[c]))
			n += s.Errors[c]
		}
		total += n
		line := fmt.Sprintf("  %-22s %8d", op, n)
		if len(errs) > 0 {
			line += "   errors: " + strings.Join(errs, ", ")
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "  %-22s %8d\n", "total", total)

	fmt.Fprintf(w, "tasks started: %d\n", r.Started)
	for _, kind := range slices.Sorted(maps.Keys(r.Tasks)) {
		var parts []string
		for _, st := range slices.Sorted(maps.Keys(r.Tasks[kind])) {
			parts = append(parts, fmt.Sprintf("%s %d", st, r.Tasks[kind][st]))
		}
		fmt.Fprintf(w, "  %-10s %s\n", kind, strings.Join(parts, ", "))
	}

	n := r.Notices
	fmt.Fprintf(w, "notices: %d tasks notified exactly once (injector: delivered %d, suppressed %d, failed %d)\n",
		n.Delivered, n.Tools.Delivered, n.Tools.Suppressed, n.Tools.Failed)
	for _, reason := range slices.Sorted(maps.Keys(n.None)) {
		fmt.Fprintf(w, "  no notice: %-55s %d\n", reason, n.None[reason])
	}

	s := r.Stats
	fmt.Fprintf(w, "after Close: task records %d, running %d, agents %d, actors %d, abandoned %d; goroutines %d → %d; bash processes %d (machine-wide, any program: %d)\n",
		s.Tasks, s.Running, s.Agents, s.Actors, s.Abandoned, r.Goroutines[0], r.Goroutines[1], r.Processes, r.MachineProcesses)
	if len(r.RuntimeErrors) > 0 {
		fmt.Fprintf(w, "runtime error logs (%d):\n", len(r.RuntimeErrors))
		for _, e := range r.RuntimeErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  ✗ %s\n", v)
	}
	if r.OK() {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintln(w, "FAILED")
	}
}
