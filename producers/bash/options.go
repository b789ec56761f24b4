package bash

import (
	"log/slog"
	"time"

	"github.com/taskrt/taskrt/producers/output"
)

// Defaults of the options.
const (
	DefaultGrace        = 3 * time.Second // SIGTERM to SIGKILL
	defaultDrainTimeout = 2 * time.Second // wait for the pipe's end after the last known writer died
	defaultShell        = "/bin/bash"     // the shell run with -c
	defaultTerminalCols = 80              // a StdinTTY command's window width
	defaultTerminalRows = 24              // a StdinTTY command's window height
)

// spillPrefix starts the names of the producer's spill files.
const spillPrefix = "taskrt-bash-"

// config is the producer's configuration, fixed at New.
type config struct {
	grace        time.Duration   // 0: SIGKILL right after SIGTERM
	output       []output.Option // WithOutput's
	drainTimeout time.Duration
	shell        string
	subreaper    bool
	logger       *slog.Logger
	containment  Containment // 0: detect
	cgroupRoot   string      // "": this process's own cgroup v2 directory
	limits       Limits      // defaults for every command
	termCols     int         // StdinTTY window size
	termRows     int
	sandbox      Sandbox // default of every command (WithSandbox)
	bwrap        string  // the bubblewrap program (WithBwrap)
}

// outputOptions are the options of a task's output buffer: the producer's own
// (its spill files' prefix, its logger), then WithOutput's.
func (c config) outputOptions(block bool) []output.Option {
	opts := append([]output.Option{output.WithSpillPrefix(spillPrefix), output.WithLogger(c.logger)}, c.output...)
	if block {
		opts = append(opts, output.WithBlocking())
	}
	return opts
}

// WithOutput passes options to every task's output buffer (package output): how
// much one read returns (output.WithMaxRead, default 32 KiB), how much of the
// output's start and end stays in memory (output.WithMemory, 32 and 64 KiB), where
// the rest spills and up to what size (output.WithSpillDir, output.WithSpillCap:
// os.TempDir(), 64 MiB; output.WithoutSpill). Together they bound a task's memory
// in this process; what a command itself may use is WithMemoryLimit.
func WithOutput(opts ...output.Option) Option {
	return optionFunc(func(c *config) { c.output = append(c.output, opts...) })
}

func defaultConfig() config {
	return config{
		grace:        DefaultGrace,
		drainTimeout: defaultDrainTimeout,
		shell:        defaultShell,
		subreaper:    true,
		logger:       slog.New(slog.DiscardHandler),
		termCols:     defaultTerminalCols,
		termRows:     defaultTerminalRows,
		bwrap:        defaultBwrap,
	}
}

// Option configures a Producer. Every option follows one rule: a zero or negative
// value keeps the default; "none" has an option of its own (WithoutGrace,
// WithoutSpill, WithoutSubreaper).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithGrace sets how long a cancelled command has between SIGTERM and SIGKILL
// (default 3 s). A zero or negative d keeps the default; see WithoutGrace.
func WithGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.grace = d
		}
	})
}

// WithoutGrace sends SIGKILL right after SIGTERM when a command is cancelled.
func WithoutGrace() Option {
	return optionFunc(func(c *config) { c.grace = 0 })
}

// WithDrainTimeout bounds how long Done waits for the output pipe to reach its end
// after the leader exited and every known process of the task was killed (default
// 2 s). It matters only when an untracked process holds the pipe open. A zero or
// negative d keeps the default.
func WithDrainTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.drainTimeout = d
		}
	})
}

// WithShell replaces /bin/bash (the shell run as `SHELL -c COMMAND`); "" keeps the
// default. Meant for tests and unusual installs.
func WithShell(path string) Option {
	return optionFunc(func(c *config) {
		if path != "" {
			c.shell = path
		}
	})
}

// WithoutSubreaper keeps New from making this process a child subreaper (see the
// package documentation). The orphans of tasks then go to init, which reaps their
// zombies when it will; in sweep mode every sweep also reads the environment of
// every process on the machine to find escaped orphans.
func WithoutSubreaper() Option {
	return optionFunc(func(c *config) { c.subreaper = false })
}

// WithLogger sets the logger for the containment mode (logged once by New), spawns,
// cancellations, leftover kills and internal errors (default: discard); nil keeps
// the default.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithContainment forces a containment mode instead of detecting one. Forcing
// CgroupContainment where no usable cgroup v2 hierarchy exists makes every Start
// fail with ErrCgroupUnavailable; forcing SweepContainment never fails. Meant for
// tests and for comparing the modes. The zero Containment keeps the detection.
func WithContainment(mode Containment) Option {
	return optionFunc(func(c *config) {
		if mode == CgroupContainment || mode == SweepContainment {
			c.containment = mode
		}
	})
}

// WithCgroupRoot sets the cgroup v2 directory in which the producer creates its
// tasks' cgroups (default: this process's own cgroup, found through
// /proc/self/cgroup and /proc/self/mountinfo). Use it for a delegated subtree, such
// as the directory a systemd unit with Delegate=yes owns. A directory that is not a
// writable cgroup v2 directory selects sweep mode (or, with WithContainment
// (CgroupContainment), fails every Start). "" keeps the default.
func WithCgroupRoot(dir string) Option {
	return optionFunc(func(c *config) {
		if dir != "" {
			c.cgroupRoot = dir
		}
	})
}

// WithMaxProcesses caps the processes (and threads) of every command at n at once
// (default: no cap); a fork past it fails with EAGAIN. A Command's own
// Limits.Processes overrides it. Needs cgroup containment: without it Start fails
// with ErrLimitsUnavailable. A zero or negative n keeps the default.
func WithMaxProcesses(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.limits.Processes = n
		}
	})
}

// WithMemoryLimit caps the memory (RAM and swap together) of every command at bytes
// (default: no cap; at least 16 MiB); past it the kernel's OOM killer ends one of the
// command's processes, and the outcome names the limit. A Command's own
// Limits.Memory overrides it. Needs cgroup containment: without it Start fails with
// ErrLimitsUnavailable. A zero or negative value keeps the default.
func WithMemoryLimit(bytes int64) Option {
	return optionFunc(func(c *config) {
		if bytes > 0 {
			c.limits.Memory = bytes
		}
	})
}

// WithCPULimit caps the CPU time of every command at cpus CPUs' worth (0.5 is half
// of one CPU; default: no cap; at least 0.01). A Command's own Limits.CPU overrides
// it. Needs cgroup containment: without it Start fails with ErrLimitsUnavailable. A
// zero or negative value keeps the default.
func WithCPULimit(cpus float64) Option {
	return optionFunc(func(c *config) {
		if cpus > 0 {
			c.limits.CPU = cpus
		}
	})
}

// WithTerminalSize sets the window size of the pseudo-terminal a StdinTTY command
// runs on, in character cells (default 80 columns, 24 rows; at most 65535 each). The
// size is fixed for the life of the command. A zero or negative value keeps that
// part's default.
func WithTerminalSize(cols, rows int) Option {
	return optionFunc(func(c *config) {
		if cols > 0 {
			c.termCols = min(cols, 1<<16-1)
		}
		if rows > 0 {
			c.termRows = min(rows, 1<<16-1)
		}
	})
}
