package remote

import (
	"log/slog"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// Defaults of the options.
const (
	DefaultMaxTasks     = 16              // a worker's slots (WithMaxTasks)
	defaultStartTimeout = 5 * time.Second // how long a start waits for a worker's answer
	// defaultOutputWindow is how far past what an owner node holds of a task's
	// output it lets the worker send (WithOutputWindow): the bandwidth × round trip
	// one task's output may use before it waits for the owner.
	defaultOutputWindow = 4 << 20
	// defaultOutputBudget is how many output bytes a worker has sent and not had
	// acknowledged, over all its tasks (WithOutputBudget): what bounds the worker's
	// memory for output in flight however many tasks stream at once.
	defaultOutputBudget = 16 << 20
	// maxChunk is the most output bytes one frame carries, less when the NATS
	// server takes smaller messages (its max_payload, 1 MiB by default): few large
	// frames cost the NATS server and clients least per byte.
	maxChunk = 1 << 20
	// minFrame is the smallest frame a worker sends while more output waits and
	// its budget is short, so that contention does not shred output into tiny
	// frames.
	minFrame = 16 << 10
	// ackDelay is how long an owner node holds back a grant for output that
	// neither filled a quarter window nor asked for one: small writes are
	// acknowledged in batches, never later than this.
	ackDelay = 5 * time.Millisecond
)

// config is what the options set; each option says whether it is for owner nodes
// (New), workers (NewWorker) or both.
type config struct {
	prefix       string
	lease        time.Duration
	logger       *slog.Logger
	startTimeout time.Duration
	replicas     int
	// owner nodes
	window  int64
	outOpts []output.Option
	scopeOf func(owner messages.AgentID) (scope string, epoch uint64, ok bool)
	// worker
	name     string
	maxTasks int
	dir      string
	bashOpts []bash.Option
	grace    time.Duration // 0: a quarter of the lease, at most bash.DefaultGrace
	budget   int64
	orphan   time.Duration // 0: the owner's lease duration, at least minOrphanGrace
}

func defaultConfig() config {
	return config{
		prefix:       defaultPrefix,
		lease:        DefaultLease,
		logger:       slog.New(slog.DiscardHandler),
		startTimeout: defaultStartTimeout,
		replicas:     1,
		maxTasks:     DefaultMaxTasks,
		window:       defaultOutputWindow,
		budget:       defaultOutputBudget,
	}
}

// Option configures an owner node's Producer (New) or a Worker (NewWorker). A zero
// or negative value keeps the default.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithPrefix sets the first token of every subject and the lease bucket's name
// (PREFIX_leases); owner nodes and workers of one deployment must agree on it
// (default "taskrt"). Both.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if p != "" {
			c.prefix = p
		}
	})
}

// WithLease sets the duration of this node's lease (default DefaultLease): how
// long after its last renewal the others treat it as gone. Shorter detects a dead
// node sooner, and fences a node that is merely slow to reach the store sooner too.
// Both.
func WithLease(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.lease = d
		}
	})
}

// WithLogger sets the logger (default: discard); nil keeps the default. Both.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithStartTimeout bounds how long a start waits for a worker's answer (default
// 5 s). Owner nodes.
func WithStartTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.startTimeout = d
		}
	})
}

// WithReplicas sets the lease bucket's replicas when this node creates it (default
// 1; use 3 on a three-server cluster). Both.
func WithReplicas(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.replicas = n
		}
	})
}

// WithName sets a worker's name (default: the host name, with every character a
// subject token cannot hold replaced by "-"). It names the worker's subjects and
// lease and is what its commands see in TASKRT_WORKER. Workers.
func WithName(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.name = name
		}
	})
}

// WithMaxTasks sets how many commands a worker runs at once (default
// DefaultMaxTasks); a start past it goes to another worker, or fails. Workers.
func WithMaxTasks(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxTasks = n
		}
	})
}

// WithDir sets a worker's working directory for commands (default: its own); a
// command's relative Dir is taken from there. Workers.
func WithDir(dir string) Option {
	return optionFunc(func(c *config) {
		if dir != "" {
			c.dir = dir
		}
	})
}

// WithBashOptions passes options to a worker's bash producer (containment, limits,
// output memory, the shell). A grace given here is overridden by WithGrace or its
// default. Workers.
func WithBashOptions(opts ...bash.Option) Option {
	return optionFunc(func(c *config) { c.bashOpts = append(c.bashOpts, opts...) })
}

// WithGrace sets a worker's SIGTERM-to-SIGKILL grace (default: a quarter of its
// lease, at most bash.DefaultGrace, so that a self-fence is over well before the
// lease could lapse; a longer grace weakens that). Workers.
func WithGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.grace = d
		}
	})
}

// WithOutputWindow sets how many bytes of a task's output past what an owner node
// holds its worker may send before it waits for a grant (default
// 4 MiB): the bandwidth times the round trip that one task's output
// may use. The owner node holds up to this much per streaming task in flight.
// Owner nodes.
func WithOutputWindow(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.window = n
		}
	})
}

// WithOutput passes options to the output buffers an owner node keeps for its
// remote tasks (how much stays in memory, the spill file, the largest read), as
// bash.WithOutput does for local ones. Owner nodes.
func WithOutput(opts ...output.Option) Option {
	return optionFunc(func(c *config) { c.outOpts = append(c.outOpts, opts...) })
}

// WithOutputBudget sets how many output bytes a worker may have sent and not had
// acknowledged, over all its tasks (default 16 MiB): streaming tasks
// share it, so that however many stream at once the worker's memory for output in
// flight stays bounded. Workers.
func WithOutputBudget(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.budget = n
		}
	})
}

// WithScopes makes the commands started for a scope's owner belong to the scope
// rather than to this node. scopeOf maps a task's owner (the Spec's owner) to its
// scope name and the scope's epoch; ok false for an owner that is not a scope
// (its commands stay the node's, exactly as today). When this node's lease ends,
// a scope's commands are not killed: the workers keep them for another node to
// Adopt under a newer epoch of the scope. scopeOf is called at each start; it
// must not block. Owner nodes.
func WithScopes(scopeOf func(owner messages.AgentID) (scope string, epoch uint64, ok bool)) Option {
	return optionFunc(func(c *config) { c.scopeOf = scopeOf })
}

// WithOrphanGrace sets how long a worker keeps a scope-owned command whose owner
// node's lease ended, waiting for another node to adopt it, before it kills it
// and drops it (default: the owner's lease duration, from its lease value, at
// least 2 s). A command moved to an adopter that does not confirm (its first
// grant) within as long is dropped the same way. Workers.
func WithOrphanGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.orphan = d
		}
	})
}
