package bash

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// SandboxMode is what a sandboxed command may write. Its zero value is SandboxOff.
type SandboxMode uint8

const (
	// SandboxOff runs the command with the rights of this process (no sandbox).
	SandboxOff SandboxMode = iota
	// SandboxReadOnly lets the command read the whole filesystem and write nothing
	// but a private /tmp (an empty tmpfs of its own, gone when it ends).
	SandboxReadOnly
	// SandboxWorkspaceWrite is SandboxReadOnly plus the command's working directory
	// (its workspace: Command.Dir, or this process's working directory when Dir is
	// empty) and the Sandbox's Writable paths, which it may write.
	SandboxWorkspaceWrite
)

// String returns "off", "read-only" or "workspace-write".
func (m SandboxMode) String() string {
	switch m {
	case SandboxOff:
		return "off"
	case SandboxReadOnly:
		return "read-only"
	case SandboxWorkspaceWrite:
		return "workspace-write"
	}
	return fmt.Sprintf("SandboxMode(%d)", uint8(m))
}

// ParseSandboxMode returns the mode named "off", "read-only" or "workspace-write";
// "" is SandboxOff.
func ParseSandboxMode(name string) (SandboxMode, error) {
	switch name {
	case "", "off":
		return SandboxOff, nil
	case "read-only":
		return SandboxReadOnly, nil
	case "workspace-write":
		return SandboxWorkspaceWrite, nil
	}
	return SandboxOff, fmt.Errorf("%w: unknown sandbox mode %q (want off, read-only or workspace-write)", errSandbox, truncateName(name))
}

// Sandbox confines a command: what it may write (Mode, Writable) and whether it
// reaches the network. It is built on bubblewrap (bwrap); see the package
// documentation and docs/sandbox.md for what it covers. The zero value is no
// sandbox.
type Sandbox struct {
	// Mode is what the command may write; SandboxOff (the zero value) is no sandbox.
	Mode SandboxMode
	// Network lets the command use this host's network (its interfaces, loopback
	// included). Without it the command runs in a network namespace of its own
	// with nothing but a loopback interface of its own: it reaches no other
	// machine and no listener of this host.
	Network bool
	// Writable are further paths a SandboxWorkspaceWrite command may write, each an
	// existing file or directory, absolute or relative to the command's working
	// directory. SandboxReadOnly refuses them.
	Writable []string
}

// On reports whether s sandboxes anything.
func (s Sandbox) On() bool { return s.Mode != SandboxOff }

// String says what s allows, for logs and summaries: "off", "read-only",
// "workspace-write", followed by ", network" when Network is set and by
// ", N writable paths" for Writable.
func (s Sandbox) String() string {
	if !s.On() {
		return "off"
	}
	out := s.Mode.String()
	if s.Network {
		out += ", network"
	}
	switch len(s.Writable) {
	case 0:
	case 1:
		out += ", 1 writable path"
	default:
		out += fmt.Sprintf(", %d writable paths", len(s.Writable))
	}
	return out
}

var (
	// ErrSandboxUnavailable is returned by Start and Run when a command asks for a
	// sandbox that cannot be provided here: no bwrap, or bwrap cannot create its
	// namespaces (user namespaces disabled, a seccomp filter, …). Nothing was
	// started: a command that asks for a sandbox never runs without one.
	ErrSandboxUnavailable = errors.New("bash: sandbox unavailable")
)

// defaultBwrap is the bubblewrap program a Producer runs sandboxed commands with,
// looked up in PATH (see WithBwrap).
const defaultBwrap = "bwrap"

// WithSandbox sets the sandbox of every command whose Command.Sandbox is nil
// (default: none). A producer whose default is a sandbox checks at New that bwrap
// works here and logs what it found; when it does not, every command that keeps
// the default fails to start with ErrSandboxUnavailable.
func WithSandbox(s Sandbox) Option {
	return optionFunc(func(c *config) {
		s.Writable = append([]string(nil), s.Writable...)
		c.sandbox = s
	})
}

// WithBwrap sets the bubblewrap program (default "bwrap", looked up in PATH); ""
// keeps the default. A path that does not run makes every sandboxed start fail
// with ErrSandboxUnavailable.
func WithBwrap(path string) Option {
	return optionFunc(func(c *config) {
		if path != "" {
			c.bwrap = path
		}
	})
}

// Sandbox returns the default sandbox of this Producer's commands (the zero
// Sandbox when there is none); Command.Sandbox overrides it per command.
func (p *Producer) Sandbox() Sandbox {
	s := p.cfg.sandbox
	s.Writable = append([]string(nil), s.Writable...)
	return s
}

// SandboxDetail says how sandboxed commands run ("bwrap at /usr/bin/bwrap: …"), or
// why they cannot (then every sandboxed start fails with ErrSandboxUnavailable).
// For a producer without a default sandbox it is "no sandbox", followed, once a
// command asked for one, by where bwrap is or why it cannot be used.
func (p *Producer) SandboxDetail() string {
	if !p.cfg.sandbox.On() {
		if !p.sb.checked() {
			return "no sandbox"
		}
		if _, err := p.sb.check(); err != nil {
			return "no sandbox; " + err.Error()
		}
		return "no sandbox; bwrap at " + p.sb.path + " for the commands that ask for one"
	}
	if _, err := p.sb.check(); err != nil {
		return err.Error()
	}
	return "bwrap at " + p.sb.path + ": " + p.cfg.sandbox.describe()
}

// CheckSandbox reports whether sandboxed commands can start here: nil, or the
// ErrSandboxUnavailable every sandboxed Start and Run fails with (no bwrap, or bwrap
// cannot build the sandbox). It runs the availability check if no start did yet (a
// sandboxed /bin/true, about as long as one sandboxed command's start) and
// remembers its answer. An embedder that promises sandboxed commands can call it
// at startup and refuse to run without.
func (p *Producer) CheckSandbox() error {
	_, err := p.sb.check()
	return err
}

// CheckLimits reports whether commands can start with the producer's default
// limits (WithMaxProcesses, WithMemoryLimit, WithCPULimit): nil, or the
// ErrLimitsUnavailable every Start and Run would fail with, the producer having no
// cgroup containment. An embedder that promises limited commands can call it at
// startup and refuse to run without.
func (p *Producer) CheckLimits() error {
	if p.cfg.limits.any() && p.tree == nil {
		return fmt.Errorf("%w: %s limits need cgroup containment, and this producer uses %s mode (%s)",
			ErrLimitsUnavailable, p.cfg.limits.names(), p.mode, p.detail)
	}
	return nil
}

// describe says what a sandbox allows, in words a model or a log reader needs.
func (s Sandbox) describe() string {
	if !s.On() {
		return "no sandbox"
	}
	var parts []string
	switch s.Mode {
	case SandboxReadOnly:
		parts = append(parts, "the filesystem is read-only except a private /tmp")
	case SandboxWorkspaceWrite:
		w := "the working directory"
		if len(s.Writable) > 0 {
			w += " and " + strings.Join(s.Writable, ", ")
		}
		parts = append(parts, "the filesystem is read-only except "+w+" and a private /tmp")
	}
	if s.Network {
		parts = append(parts, "the network is this host's")
	} else {
		parts = append(parts, "no network (loopback of its own only)")
	}
	return strings.Join(parts, "; ")
}

// sandboxState is what a Producer learnt about bwrap: checked once, at New for a
// producer whose default is a sandbox, else at the first sandboxed start.
type sandboxState struct {
	bwrap  string // the configured program
	shell  string // the shell, run inside by the check too
	once   sync.Once
	path   string      // bwrap's resolved path; set by once
	setsid string      // setsid's resolved path; set by once
	err    error       // non-nil: no sandboxed command can start; set by once
	ran    atomic.Bool // check has run (for SandboxDetail, which must not run it)
}

func (s *sandboxState) checked() bool { return s.ran.Load() }

// check runs the availability check once and returns bwrap's path or why
// sandboxed commands cannot start.
func (s *sandboxState) check() (string, error) {
	s.once.Do(func() {
		s.path, s.setsid, s.err = probeSandbox(s.bwrap, s.shell)
		if s.err != nil {
			s.err = fmt.Errorf("%w: %v", ErrSandboxUnavailable, s.err)
		}
		s.ran.Store(true)
	})
	return s.path, s.err
}

// sandboxPlan is how one command runs in its sandbox: bwrap's arguments before the
// command.
type sandboxPlan struct {
	sandbox Sandbox
	args    []string // bwrap's options
	setsid  string   // setsid's path, run inside before the shell
}

// sandboxFor returns the plan for c's sandbox (Command.Sandbox, else the
// producer's default), or nil when c runs without one. An error means c must not
// start.
func (p *Producer) sandboxFor(c Command) (*sandboxPlan, error) {
	s := p.cfg.sandbox
	if c.Sandbox != nil {
		s = *c.Sandbox
	}
	if !s.On() {
		return nil, nil
	}
	if s.Mode > SandboxWorkspaceWrite {
		return nil, fmt.Errorf("%w: unknown mode %s", errSandbox, s.Mode)
	}
	if s.Mode == SandboxReadOnly && len(s.Writable) > 0 {
		return nil, fmt.Errorf("%w: writable paths need workspace-write, and this sandbox is read-only", errSandbox)
	}
	if _, err := p.sb.check(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(c.Dir) // "" is this process's working directory
	if err != nil {
		return nil, fmt.Errorf("%w: the working directory: %v", errSandbox, err)
	}
	var writable, visible []string
	if s.Mode == SandboxReadOnly {
		// A workspace under /tmp would be hidden by the private /tmp: show it,
		// read-only.
		if real, err := filepath.EvalSymlinks(dir); err == nil && strings.HasPrefix(real, "/tmp/") {
			visible = append(visible, real)
		}
	}
	if s.Mode == SandboxWorkspaceWrite {
		for _, w := range append([]string{dir}, s.Writable...) {
			if !filepath.IsAbs(w) {
				w = filepath.Join(dir, w)
			}
			real, err := filepath.EvalSymlinks(w)
			if err != nil {
				return nil, fmt.Errorf("%w: writable path: %v", errSandbox, err)
			}
			if real == "/" {
				return nil, fmt.Errorf("%w: %s is the root directory, which would make the whole filesystem writable", errSandbox, w)
			}
			writable = append(writable, real)
		}
	}
	return &sandboxPlan{sandbox: s, args: bwrapArgs(s, dir, writable, visible), setsid: p.sb.setsid}, nil
}

// bwrapArgs are bwrap's options for a sandbox, in the order bwrap applies them:
//
//   - namespaces: a user namespace (no capabilities in it, and no further user
//     namespaces: a command cannot regain mount rights), a pid namespace (the
//     command sees and signals only its own processes, and when its init dies the
//     kernel kills every process in it), an IPC namespace, and a network namespace
//     unless Network;
//   - --die-with-parent: when bwrap's first process (the task's leader) dies,
//     the sandbox's init gets SIGKILL, and with it every process of the sandbox;
//   - the filesystem: / read-only, a minimal /dev, a /proc of the pid namespace, an
//     empty tmpfs on /tmp, then the writable paths bound over themselves, and the
//     visible ones read-only (after /tmp, so that a workspace under /tmp is the
//     host's, not the tmpfs's);
//   - --chdir into the working directory.
func bwrapArgs(s Sandbox, dir string, writable, visible []string) []string {
	a := []string{
		"--unshare-user", "--disable-userns", "--cap-drop", "ALL",
		"--unshare-pid", "--unshare-ipc",
	}
	if !s.Network {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--die-with-parent",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
	for _, w := range writable {
		a = append(a, "--bind", w, w)
	}
	for _, v := range visible {
		a = append(a, "--ro-bind", v, v)
	}
	return append(a, "--chdir", dir)
}

// command is the program and arguments that run shell with args in the sandbox:
// bwrap, its options, then setsid (with --ctty for a terminal) and the shell. The
// shell runs in a session of its own inside the sandbox, so that it leads its own
// process group (and, on a terminal, owns it as its controlling terminal) as it
// does outside; bwrap itself stays outside that group, out of reach of the
// terminal's signals.
func (sp *sandboxPlan) command(bwrap, shell string, args []string, tty bool) (string, []string) {
	argv := append(append([]string(nil), sp.args...), "--", sp.setsid)
	if tty {
		argv = append(argv, "--ctty")
	}
	argv = append(argv, shell)
	return bwrap, append(argv, args...)
}

// sandboxJail is the jail of a sandboxed task: its containment's jail, except
// that SIGTERM spares the leader. The leader is bwrap's monitor, which dies of
// SIGTERM at once, and its death kills the sandbox (--die-with-parent): the
// command would never see the SIGTERM and its grace period. So the leader is left
// to exit when the shell does (with its exit status), and the shell and every
// other process of the sandbox get the SIGTERM. (The sandbox's init, bwrap's
// second process, ignores it: a pid namespace's init gets only the signals it
// handles.) SIGKILL, settle and release are the containment's own.
type sandboxJail struct {
	jail
	cg     *taskCgroup // cgroup mode: the task's cgroup; nil in sweep mode
	info   *os.File    // read end of bwrap's --info-fd, between attach and started
	infoW  *os.File    // its write end, bwrap's; closed here by started
	initFD int         // pidfd of the sandbox's init (bwrap's child), or -1; set by started, closed by settle or release
}

// chooseSandbox sets up the sandbox state at New and, for a producer whose default
// is a sandbox, runs the availability check now and logs its result.
func (p *Producer) chooseSandbox() {
	p.sb = &sandboxState{bwrap: p.cfg.bwrap, shell: p.cfg.shell}
	if !p.cfg.sandbox.On() {
		return
	}
	if _, err := p.sb.check(); err != nil {
		p.cfg.logger.Warn("bash: sandbox unavailable; every sandboxed start fails", "sandbox", p.cfg.sandbox.String(), "err", err)
		return
	}
	p.cfg.logger.Info("bash: sandbox", "sandbox", p.cfg.sandbox.String(), "detail", p.SandboxDetail())
}

// sandboxName names a plan's sandbox for the log.
func sandboxName(sp *sandboxPlan) string {
	if sp == nil {
		return "off"
	}
	return sp.sandbox.String()
}

// environ is a sandboxed task's environment: env with TMPDIR=/tmp, the private
// /tmp, whatever this process's TMPDIR, unless Command.Env (extra) sets it. os/exec
// keeps the last of duplicate keys, so it goes at the end.
func (sp *sandboxPlan) environ(env, extra []string) []string {
	for _, kv := range extra {
		if strings.HasPrefix(kv, "TMPDIR=") {
			return env
		}
	}
	return append(env, "TMPDIR=/tmp")
}
