package mcpserver

import (
	"log/slog"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// Defaults of the options.
const (
	// DefaultSessionTimeout is how long an HTTP session may stay idle (no request)
	// before it is closed and its tasks are killed.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxRequestBytes caps one HTTP request body.
	DefaultMaxRequestBytes = 1 << 20
	// defaultPageEventBuffer is how many events one connection of the live page may
	// fall behind by before it misses some and resynchronises.
	defaultPageEventBuffer = 1024
	// progressInterval is how often a foreground bash command that was called with
	// a progress token reports progress.
	progressInterval = time.Second
)

// Option configures a Server. Zero and negative values keep the default; the
// explicit WithoutSessionTimeout expresses "never".
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	rtOpts          []actors.Option    // the runtime's (WithRuntimeOptions)
	bashOpts        []bash.Option      // the server's own bash producer's (WithBashOptions)
	toolOpts        []tools.BashOption // the bash tool's (WithBashToolOptions)
	sessionTimeout  time.Duration      // 0: never
	maxRequestBytes int64
	pageEventBuffer int
	taskAfter       time.Duration // sessionless tasks extension (tasksext.go)
	noSessionless   bool          // serve only the revisions with sessions
	logger          *slog.Logger
	runner          tools.BashRunner // nil: a local bash producer
	placement       *placement.Placement
}

func defaultConfig() config {
	return config{
		sessionTimeout:  DefaultSessionTimeout,
		maxRequestBytes: DefaultMaxRequestBytes,
		pageEventBuffer: defaultPageEventBuffer,
		taskAfter:       defaultTaskAfter,
		logger:          slog.New(slog.DiscardHandler),
	}
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
// defaultPageEventBuffer). Past it, the connection misses events, never holding
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
// call is answered as a task (default defaultTaskAfter). Values <= 0 keep the
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

// WithRuntimeOptions passes options to the Server's runtime (package actors):
// the owner cap (actors.WithOwnerLimit), a queue at the cap (actors.WithQueue), a
// global limit (actors.WithGlobalLimit), retention, … Each owner — a connection, a
// session, a scope — is one agent of that runtime. The Server sets the runtime's
// logger itself (WithLogger).
func WithRuntimeOptions(opts ...actors.Option) Option {
	return optionFunc(func(c *config) { c.rtOpts = append(c.rtOpts, opts...) })
}

// WithBashOptions passes options to the Server's own bash producer, after the
// logger it sets itself: a kill's grace (bash.WithGrace), a sandbox
// (bash.WithSandbox: New fails when this machine cannot provide it, so that no
// command runs without the sandbox it was promised), default limits
// (bash.WithMaxProcesses, bash.WithMemoryLimit, bash.WithCPULimit: New fails
// without cgroup containment), output bounds, containment. With WithBashRunner
// there is no such producer, and New refuses them.
func WithBashOptions(opts ...bash.Option) Option {
	return optionFunc(func(c *config) { c.bashOpts = append(c.bashOpts, opts...) })
}

// WithBashToolOptions passes options to the bash tool (package tools): the
// commands' working directory (tools.WithWorkDir), start keys
// (tools.WithStartKeys), limits that go with every command to a runner
// (tools.WithLimits), timeouts.
func WithBashToolOptions(opts ...tools.BashOption) Option {
	return optionFunc(func(c *config) { c.toolOpts = append(c.toolOpts, opts...) })
}

// WithPlacement makes the Server one frontend of several that serve the same
// sessionless scopes (cluster.go, package placement): a scope it mints is
// registered with p and its tasks kept in its record; a sessionless HTTP request
// naming a scope homed on another live frontend is forwarded there and answered
// with the home's answer; a scope whose home's lease ended is taken here, its
// commands adopted from the workers and its tasks restored under their ids. New
// makes p serve the requests forwarded to this Server. For a scope's commands to
// outlive this frontend, start them with p.Node() created with
// remote.WithScopes(srv.ScopeOf) (taskrt-mcp does), and give the runtime the
// cluster's numbering: WithRuntimeOptions(actors.WithIDs(p.NextID)). Close p
// after the Server, then p.Node(). nil keeps the default: one server, nothing of
// this loaded.
func WithPlacement(p *placement.Placement) Option {
	return optionFunc(func(c *config) { c.placement = p })
}
