package mcpserver

import (
	"log/slog"
	"time"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// Defaults of the options.
const (
	// DefaultSessionTimeout is how long an HTTP session may stay idle (no request)
	// before it is closed and its tasks are killed.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxRequestBytes caps one HTTP request body.
	DefaultMaxRequestBytes = 1 << 20
	// DefaultPageEventBuffer is how many events one connection of the live page may
	// fall behind by before it misses some and resynchronises.
	DefaultPageEventBuffer = 1024
	// ProgressInterval is how often a foreground bash command that was called with
	// a progress token reports progress.
	ProgressInterval = time.Second
)

// Option configures a Server. Zero and negative values keep the default; the
// explicit WithoutSessionTimeout expresses "never".
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	workDir         string
	ownerLimit      int // 0: the runtime's default
	killGrace       time.Duration
	sessionTimeout  time.Duration // 0: never
	maxRequestBytes int64
	pageEventBuffer int
	taskAfter       time.Duration // sessionless tasks extension (tasksext.go)
	noSessionless   bool          // serve only the revisions with sessions
	logger          *slog.Logger
	startKeys       bool             // bash offers key (tools.WithStartKeys)
	runner          tools.BashRunner // nil: a local bash producer
	sandbox         bash.Sandbox     // of every command (WithSandbox)
	queue           int              // actors.WithQueue; 0: none
	globalLimit     int              // actors.WithGlobalLimit; 0: none
	limits          bash.Limits      // of every command (WithLimits)
}

func defaultConfig() config {
	return config{
		sessionTimeout:  DefaultSessionTimeout,
		maxRequestBytes: DefaultMaxRequestBytes,
		pageEventBuffer: DefaultPageEventBuffer,
		taskAfter:       DefaultTaskAfter,
		logger:          slog.New(slog.DiscardHandler),
	}
}

// WithWorkDir sets the working directory of every command ("" keeps the server's
// own).
func WithWorkDir(dir string) Option {
	return optionFunc(func(c *config) { c.workDir = dir })
}

// WithOwnerLimit caps the running tasks of one session (default: the runtime's,
// actors.DefaultOwnerLimit). Values <= 0 keep the default.
func WithOwnerLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.ownerLimit = n
		}
	})
}

// WithKillGrace sets how long a killed command has between SIGTERM and SIGKILL
// (default: the bash producer's, bash.DefaultGrace). Values <= 0 keep the default.
func WithKillGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.killGrace = d
		}
	})
}

// WithSessionTimeout sets how long an HTTP session may stay idle before it is
// closed, which kills its tasks (default DefaultSessionTimeout). A request in
// progress keeps the session alive. Values <= 0 keep the default.
func WithSessionTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.sessionTimeout = d
		}
	})
}

// WithoutSessionTimeout keeps idle HTTP sessions until the client deletes them or
// the server closes.
func WithoutSessionTimeout() Option {
	return optionFunc(func(c *config) { c.sessionTimeout = 0 })
}

// WithMaxRequestBytes caps the size of one HTTP request body; larger ones are
// refused with 413 and change nothing (default DefaultMaxRequestBytes). Values <= 0
// keep the default. (On stdio the SDK bounds one message to
// mcp.DefaultMaxLineLength; a stream cannot skip a message, so a larger one ends
// the session.)
func WithMaxRequestBytes(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxRequestBytes = n
		}
	})
}

// WithPageEventBuffer sets how many runtime events one connection of the live page
// (PageHandler) holds for a browser that reads slower than they come (default
// DefaultPageEventBuffer). Past it, the connection misses events, never holding
// up the runtime: the browser gets an overflow event saying how many, and a fresh
// snapshot. Values <= 0 keep the default.
func WithPageEventBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.pageEventBuffer = n
		}
	})
}

// WithLogger sets the logger for the server's diagnostics and the SDK's (default:
// discard). It is passed on to the runtime and the bash producer.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithStartKeys offers bash's key parameter (tools.WithStartKeys): a client that
// retries a background start whose answer it lost sends the same key and gets the
// task the first call started, with the same structuredContent, instead of a second
// copy of the work. Off by default, as in package tools: a model has no use for it.
func WithStartKeys() Option {
	return optionFunc(func(c *config) { c.startKeys = true })
}

// WithQueue lets up to n background starts per session wait, with status queued,
// when the session is at its cap or the server at its global limit (actors.WithQueue):
// the start answers "queued background task bash-5 (position 2 of 3); it starts when a
// slot frees" with the usual handle. Values <= 0 keep the default: no queue.
func WithQueue(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.queue = n
		}
	})
}

// WithGlobalLimit caps the running background tasks across every session
// (actors.WithGlobalLimit), handing slots out round robin between sessions. Values
// <= 0 keep the default: no global limit.
func WithGlobalLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.globalLimit = n
		}
	})
}

// WithBashRunner runs every bash command (foreground and background) with r
// instead of a local bash producer — a *remote.Producer runs them on workers over
// NATS (taskrt-mcp -nats). Sessions, fences, notices and strings are unchanged;
// WithKillGrace then does not apply (the runner has its own). nil keeps the
// default.
func WithBashRunner(r tools.BashRunner) Option {
	return optionFunc(func(c *config) {
		if r != nil {
			c.runner = r
		}
	})
}

// WithTaskAfter sets how long a foreground bash call of a sessionless client that
// declares the tasks extension (io.modelcontextprotocol/tasks) runs before the
// call is answered as a task (default DefaultTaskAfter). Values <= 0 keep the
// default.
func WithTaskAfter(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.taskAfter = d
		}
	})
}

// WithoutSessionless serves only the protocol revisions with sessions (up to
// 2025-11-25): a 2026-07-28 request is refused with -32022, whose list of
// supported revisions makes the client fall back to a session (as Claude Code
// does). Use it to keep a client that tries 2026-07-28 first on one owner per
// session.
func WithoutSessionless() Option {
	return optionFunc(func(c *config) { c.noSessionless = true })
}

// WithLimits caps every command (tools.WithLimits): processes, memory, CPU, as
// bash.Limits says; zero fields are no limit. Locally they need cgroup
// containment, and New fails where the bash producer has none; with WithBashRunner
// they go with each command to the runner (a worker applies them). A command that
// hits one ends with the limit named in its status line and its notice.
func WithLimits(l bash.Limits) Option {
	return optionFunc(func(c *config) { c.limits = l })
}
