package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskrt/taskrt/messages"
)

// Defaults for the runtime's options.
const (
	DefaultOwnerLimit    = 10
	defaultSettleTimeout = 30 * time.Second
	DefaultRetention     = 100    // settled tasks per owner that keep their full record
	DefaultTombstones    = 10_000 // evicted tasks per owner still answered from a tombstone
)

// Option configures a Runtime. Options follow one rule: a zero or negative value
// keeps the default; "none" has an option of its own, named for what it means:
// Without… turns a limit or a feature off (WithoutOwnerLimit: no cap;
// WithoutAncestorAccess), WithNo… keeps none of what the option counts
// (WithNoRetention, WithNoTombstones).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	system        *actor.ActorSystem
	logger        *slog.Logger
	ownerLimit    int // 0 = no cap
	settleTimeout time.Duration
	retention     int  // settled records kept per bucket (0: none)
	tombstones    int  // tombstones kept per bucket (0: none)
	ancestors     bool // an agent's ancestors reach its tasks
	watchLimit    int  // live watches per owner (watch.go)
	queue         int  // queued starts per owner beyond the caps (queue.go); 0 = none
	globalLimit   int  // running tasks across all owners (queue.go); 0 = none

	meters metric.MeterProvider // nil: no metrics

	ids func(ctx context.Context, kind string) (int, error) // WithIDs; nil: the registry's counters

	registryHook func(msg any)                           // tests only: called before the registry handles msg
	agentHook    func(agent messages.AgentID, msg any)   // tests only: called before an agent actor handles msg
	taskHook     func(task messages.TaskID, msg any)     // tests only: called as a task actor handles msg (Started: once it announced itself)
	ruleHook     func(task messages.TaskID, rule string) // tests only: called as a task's transition applies a rule
}

func defaultConfig() config {
	return config{
		ownerLimit:    DefaultOwnerLimit,
		settleTimeout: defaultSettleTimeout,
		retention:     DefaultRetention,
		tombstones:    DefaultTombstones,
		ancestors:     true,
		watchLimit:    defaultWatchLimit,
		logger:        slog.New(slog.DiscardHandler),
	}
}

// WithIDs makes the runtime number its tasks with next instead of its own
// per-kind counters, so that several runtimes serving one set of owners — the
// frontends of a cluster, where an owner's tasks move from one runtime to another
// — never give two tasks one id. A task's id stays "<kind>-<n>", n from next.
//
// next is called once per start and adoption, on the starting goroutine (never on
// an actor's mailbox), after the preflight passed and before Run: it may block on
// the network, bounded by ctx. It must return a number ≥ 1 that it never returned
// for kind before, anywhere. An error fails the start with nothing started; a
// start that fails after next returned burns its number (a gap, never a reuse).
func WithIDs(next func(ctx context.Context, kind string) (int, error)) Option {
	return optionFunc(func(c *config) { c.ids = next })
}

// WithActorSystem runs the runtime's actors in an existing actor system instead of
// one of its own. The runtime still stops only its own actors on Close. Nil keeps the
// default (a system of its own).
func WithActorSystem(sys *actor.ActorSystem) Option {
	return optionFunc(func(c *config) {
		if sys != nil {
			c.system = sys
		}
	})
}

// WithLogger sets the logger for the runtime's own diagnostics (contained panics,
// failing cleanups, producer contract violations) and, when the runtime owns its actor
// system, for protoactor's output. The default discards everything: a library does not
// print. Nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithOwnerLimit caps the running and stopping tasks one owner may hold (unowned
// tasks share one bucket). Over it, Start fails with a *messages.LimitError
// (ErrOwnerLimit) before any id is allocated. Default DefaultOwnerLimit; n <= 0 keeps
// the default. WithoutOwnerLimit removes the cap.
func WithOwnerLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.ownerLimit = n
		}
	})
}

// WithoutOwnerLimit removes the per-owner cap.
func WithoutOwnerLimit() Option {
	return optionFunc(func(c *config) { c.ownerLimit = 0 })
}

// WithSettleTimeout bounds how long teardown (Dispose, Close) waits for a cancelled
// task's Done, and for a start whose Run has not returned. A task that has not
// settled by then is recorded failed with detail "abandoned: did not settle within …"
// and counted in Stats.Abandoned; teardown goes on. Default 30 s;
// d <= 0 keeps the default.
func WithSettleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.settleTimeout = d
		}
	})
}

// WithRetention sets how many settled tasks per owner (and for the unowned tasks)
// keep their full record: output, producer resources, task actor. When one more task
// settles, the oldest settled record beyond n is evicted — its output is dropped, the
// producer's Release runs, its actor stops — and leaves a tombstone (see
// WithTombstones). Running and stopping tasks are never evicted. Default
// DefaultRetention; n <= 0 keeps the default. WithNoRetention keeps none.
func WithRetention(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.retention = n
		}
	})
}

// WithNoRetention keeps no settled record: every task is evicted as it settles, and
// only its tombstone remains.
func WithNoRetention() Option {
	return optionFunc(func(c *config) { c.retention = 0 })
}

// WithTombstones sets how many evicted tasks per owner (and for the unowned tasks)
// are still answered from a tombstone — their final snapshot, with Evicted set.
// Past the bound the oldest tombstone is forgotten and its id reads as not found.
// Default DefaultTombstones; n <= 0 keeps the default. WithNoTombstones keeps none.
func WithTombstones(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.tombstones = n
		}
	})
}

// WithNoTombstones keeps no tombstone: an evicted task is forgotten at once, and its
// id reads as not found.
func WithNoTombstones() Option {
	return optionFunc(func(c *config) { c.tombstones = 0 })
}

// WithoutAncestorAccess keeps every owned task to its owner alone. By default an
// agent registered WithParent is visible to its ancestors: they list, get, read,
// kill and wait on its tasks (a parent can see and stop what its sub-agents
// started). Descendants and siblings never see an ancestor's tasks either way, and a
// completion notice goes only to the task's own owner.
func WithoutAncestorAccess() Option {
	return optionFunc(func(c *config) { c.ancestors = false })
}

// WithMeterProvider records the runtime's OpenTelemetry metrics (see metrics.go for
// the names) with mp. The default records nothing; nil keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meters = mp
		}
	})
}
