package bash

import (
	"log/slog"
	"os"
	"time"
)

// Defaults of the options.
const (
	DefaultGrace        = 3 * time.Second  // SIGTERM to SIGKILL
	DefaultMaxRead      = 32 << 10         // bytes one read returns at most (before rendering)
	DefaultHead         = 32 << 10         // bytes kept in memory from the start of the output
	DefaultTail         = 64 << 10         // bytes kept in memory from the end of the output
	DefaultSpillCap     = 64 << 20         // bytes the spill file holds at most
	DefaultDrainTimeout = 2 * time.Second  // wait for the pipe's end after the last known writer died
	DefaultShell        = "/bin/bash"      // the shell run with -c
	sweepTimeout        = 10 * time.Second // give up killing leftovers after this long
	minMaxRead          = 256
	minTail             = 4 << 10
)

// config is the producer's configuration, fixed at New.
type config struct {
	grace        time.Duration
	maxRead      int
	head, tail   int
	spillDir     string
	spillCap     int64
	drainTimeout time.Duration
	shell        string
	subreaper    bool
	logger       *slog.Logger
}

func defaultConfig() config {
	return config{
		grace:        DefaultGrace,
		maxRead:      DefaultMaxRead,
		head:         DefaultHead,
		tail:         DefaultTail,
		spillDir:     os.TempDir(),
		spillCap:     DefaultSpillCap,
		drainTimeout: DefaultDrainTimeout,
		shell:        DefaultShell,
		subreaper:    true,
		logger:       slog.New(slog.DiscardHandler),
	}
}

// Option configures a Producer.
type Option func(*config)

// WithGrace sets how long a cancelled command has between SIGTERM and SIGKILL
// (default 3 s). A non-positive d sends SIGKILL right after SIGTERM.
func WithGrace(d time.Duration) Option {
	return func(c *config) { c.grace = max(d, 0) }
}

// WithMaxRead sets how many output bytes one read returns at most (default 32 KiB,
// at least 256). A larger delta is returned as its head and tail around a marker.
// Rendering can make the returned string longer than n: invalid UTF-8 bytes become
// U+FFFD and the marker line is added.
func WithMaxRead(n int) Option {
	return func(c *config) { c.maxRead = max(n, minMaxRead) }
}

// WithMemory sets how many bytes of the output's start (head) and end (tail) stay in
// memory per task (defaults 32 KiB and 64 KiB; the tail is at least 4 KiB). Together
// with the 32 KiB read buffer they bound a task's memory.
func WithMemory(head, tail int) Option {
	return func(c *config) {
		c.head = max(head, 0)
		c.tail = max(tail, minTail)
	}
}

// WithSpillDir sets the directory of spill files (default os.TempDir()).
func WithSpillDir(dir string) Option {
	return func(c *config) { c.spillDir = dir }
}

// WithSpillCap sets the largest size of a task's spill file (default 64 MiB). Output
// past it that no longer fits in memory is counted as dropped. Zero disables spill
// files.
func WithSpillCap(n int64) Option {
	return func(c *config) { c.spillCap = max(n, 0) }
}

// WithDrainTimeout bounds how long Done waits for the output pipe to reach its end
// after the leader exited and every known process of the task was killed (default
// 2 s). It matters only when an untracked process holds the pipe open.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) { c.drainTimeout = max(d, 0) }
}

// WithShell replaces /bin/bash (the shell run as `SHELL -c COMMAND`). Meant for
// tests and unusual installs.
func WithShell(path string) Option {
	return func(c *config) { c.shell = path }
}

// WithSubreaper controls whether New makes this process a child subreaper (default
// true). See the package documentation for the process-wide effect.
func WithSubreaper(enabled bool) Option {
	return func(c *config) { c.subreaper = enabled }
}

// WithLogger sets the logger for spawns, cancellations, leftover kills and internal
// errors (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}
