package actors

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Defaults for the runtime's options.
const (
	DefaultOwnerLimit    = 10
	DefaultSettleTimeout = 30 * time.Second
)

// Option configures a Runtime.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	system        *actor.ActorSystem
	logger        *slog.Logger
	ownerLimit    int
	settleTimeout time.Duration
}

// WithActorSystem runs the runtime's actors in an existing actor system instead of
// one of its own. The runtime still stops only its own actors on Close.
func WithActorSystem(sys *actor.ActorSystem) Option {
	return optionFunc(func(c *config) { c.system = sys })
}

// WithLogger sets the logger for the runtime's own diagnostics (contained panics,
// failing cleanups, producer contract violations) and, when the runtime owns its actor
// system, for protoactor's output. The default discards everything: a library does not
// print.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithOwnerLimit caps the running and stopping tasks one owner may hold (unowned
// tasks share one bucket). Over it, Start fails with ErrOwnerLimit before any id is
// allocated. n <= 0 removes the cap. Default DefaultOwnerLimit.
func WithOwnerLimit(n int) Option {
	return optionFunc(func(c *config) { c.ownerLimit = n })
}

// WithSettleTimeout bounds how long teardown (Dispose, Close) waits for a cancelled
// task's Done. A task that has not settled by then is recorded failed with detail
// "abandoned: did not settle within …" and counted in Stats.Abandoned; teardown goes
// on. Default DefaultSettleTimeout.
func WithSettleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.settleTimeout = d })
}
