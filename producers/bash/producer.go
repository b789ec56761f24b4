package bash

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/taskrt/taskrt/internal/leakcheck"
	"github.com/taskrt/taskrt/messages"
)

// Kind is the task kind of bash tasks: their ids are "bash-N".
const Kind = "bash"

// markerEnv is the environment variable carrying a task's marker,
// "<pid>.<producer>.<task>", which every descendant inherits unless it clears its
// environment.
const markerEnv = "TASKRT_BASH_TASK"

// Command is one shell command to run.
type Command struct {
	// Command is the script given to `bash -c`: at most MaxCommand bytes, no NUL.
	Command string
	// Dir is the working directory; "" keeps the current one. A missing directory
	// makes Start fail.
	Dir string
	// Env holds extra KEY=VALUE entries added to (and overriding) the inherited
	// environment.
	Env []string
	// Limits caps the command's processes, memory and CPU; a zero field keeps the
	// producer's default (WithMaxProcesses, WithMemoryLimit, WithCPULimit). Limits
	// need cgroup containment.
	Limits Limits
	// Stdin is what the command reads on its standard input: StdinNone (the zero
	// value: /dev/null), StdinPipe or StdinTTY, the last two written through the
	// task's Hooks.Input. Background commands only: Run refuses any mode but
	// StdinNone.
	Stdin Stdin
	// Sandbox, when not nil, replaces the producer's default sandbox (WithSandbox)
	// for this command; &Sandbox{} runs it without one. It is for the embedder to
	// set, never for the model: a tool must not let a model choose its own
	// sandbox.
	Sandbox *Sandbox
	// BlockOutput makes the command wait instead of losing output: while a read's
	// worth of its output is unread (32 KiB by default), the task stops reading the
	// command's output, and the command blocks on its next write as under a slow
	// pipe reader, until the owner reads. Every byte then reaches the reader, in
	// order, with no marker. The task shows Full while it waits, and holds its
	// settlement until what the command wrote before it exited is read; a kill or
	// the owner's disposal ends the wait at once (output past that point is bounded
	// as by default). Background commands only: Run refuses it, nobody reading
	// before the command ends. The default keeps a bounded head and tail and drops
	// the middle (see package output).
	BlockOutput bool
}

// Producer runs shell commands as taskrt tasks. Its zero value is not usable; call
// New. A Producer holds no resources of its own beyond what New set up for its
// containment mode (see the package documentation) and, in cgroup mode, up to 16
// empty cgroups kept for its next tasks without limits: each task's goroutines and
// processes end when that task's Done settles, and its cgroup is then empty and
// either removed or kept for the next task. A kept cgroup is removed after 2 s
// unused, by Close, or when the Producer is garbage collected. It is safe for
// concurrent use.
type Producer struct {
	cfg    config
	n      uint64        // this producer's number in the process
	prefix string        // marker prefix of this producer's tasks: "<pid>.<n>."
	seq    atomic.Uint64 // numbers this producer's tasks

	mode     Containment
	detail   string      // what the mode is, or why it was not the other one
	tree     *cgroupTree // cgroup mode: where the tasks' cgroups go
	pool     *cgroupPool // cgroup mode: the empty cgroups kept for tasks without limits
	null     nullStdin   // /dev/null for StdinNone commands
	startErr error       // non-nil: every Start fails with it (forced cgroup mode without cgroups)
	ctty     bool        // this process had a controlling terminal at New
	sb       *sandboxState
}

// producers numbers the Producers of this process, for their marker prefixes.
var producers atomic.Uint64

// New returns a Producer. It chooses the containment mode once (see Containment
// and WithContainment) and logs it at Info level:
//
//   - cgroup mode when a writable cgroup v2 hierarchy is available: New then
//     creates this process's cgroup directory (once per process) and removes the
//     cgroups left behind by processes that died without cleaning up, killing
//     whatever still ran in them;
//   - sweep mode otherwise.
//
// In both modes New also makes this whole process a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)), unless WithoutSubreaper is given: the orphans
// of a task then come to this process, which reaps them before Done settles, so
// that not even a zombie of a task outlives it, whatever init does (see the
// package documentation for the process-wide effect).
func New(opts ...Option) *Producer {
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&cfg)
		}
	}
	n := producers.Add(1)
	p := &Producer{cfg: cfg, n: n, prefix: fmt.Sprintf("%d.%d.", os.Getpid(), n)}
	p.chooseContainment()
	if p.tree != nil {
		p.pool = newCgroupPool(p.tree, p.taskDirPrefix()+"p")
		runtime.AddCleanup(p, func(pool *cgroupPool) { _ = pool.close() }, p.pool)
	}
	p.ctty = hasControllingTerminal()
	p.chooseSandbox()
	return p
}

func (p *Producer) chooseContainment() {
	log := p.cfg.logger
	if p.cfg.containment == SweepContainment {
		p.mode, p.detail = SweepContainment, "sweep mode forced by WithContainment"
	} else if err := supported(); err != nil {
		p.mode, p.detail = SweepContainment, err.Error()
	} else if tree, err := openCgroupTree(p.cfg.cgroupRoot, log); err == nil {
		p.mode, p.tree = CgroupContainment, tree
		p.detail = "a cgroup v2 per task under " + tree.parent
	} else if p.cfg.containment == CgroupContainment {
		p.mode, p.detail = CgroupContainment, err.Error()
		p.startErr = fmt.Errorf("%w: %v", ErrCgroupUnavailable, err)
	} else {
		p.mode, p.detail = SweepContainment, "no usable cgroup v2 hierarchy: "+err.Error()
	}
	if p.cfg.subreaper && supported() == nil {
		if err := enableSubreaper(); err != nil {
			log.Warn("bash: cannot become a child subreaper; orphans go to init", "err", err)
		}
	}
	log.Info("bash: containment", "mode", p.mode.String(), "detail", p.detail)
}

// Close removes the empty cgroups the producer keeps for its next tasks (cgroup
// mode), closes the /dev/null it gives its commands, and waits for the watch of
// cgroup events to end if nothing is watched any more. A task still running keeps
// its cgroup until it settles, which then removes it; tasks started after Close
// get a cgroup of their own each, removed when they settle. Close does not stop
// running tasks (the runtime does, through their Cancel hooks). Idempotent; an
// error names the cgroups that could not be removed.
func (p *Producer) Close() error {
	err := p.null.close()
	if p.pool != nil {
		err = errors.Join(err, p.pool.close())
	}
	quiesceEvents()
	return err
}

// Containment returns the containment mode of this Producer's tasks.
func (p *Producer) Containment() Containment { return p.mode }

// ContainmentDetail says where the tasks' cgroups go in cgroup mode, and why cgroup
// mode was not chosen in sweep mode (or why a forced cgroup mode cannot start
// anything).
func (p *Producer) ContainmentDetail() string { return p.detail }

// Start starts c now and returns the hooks the runtime uses to read, cancel and
// await it; it is what Spec uses as Spec.Run. An error (a blank, oversized or
// NUL-containing command, a malformed Env entry, a missing directory, a limit that
// cannot be enforced, a shell that cannot be run) means nothing was started.
//
// The hooks: Output is the task's output buffer (a producers/output.Buffer: consuming
// reads, reads up to a pattern, observer reads, growth events), and ReadOutput its
// consuming delta read (see WithMaxRead); Input, for StdinPipe and StdinTTY commands
// only, writes to the command's input (see Stdin); Cancel sends SIGTERM to the
// command's processes, then SIGKILL after the grace period, and never blocks; Done
// delivers the Outcome once every process of the task is gone and the output is
// drained; Release removes the spill file.
func (p *Producer) Start(c Command) (messages.Hooks, error) {
	t, err := p.start(c)
	if err != nil {
		return messages.Hooks{}, err
	}
	return t.hooks(), nil
}

// Spec declares c as a background task of owner: kind "bash", the command as its
// label (its first line, marked with " …" when there are more), and Start as Run.
func (p *Producer) Spec(owner messages.AgentID, c Command) messages.Spec {
	return messages.Spec{
		Kind:  Kind,
		Label: label(c.Command),
		Owner: owner,
		Run:   func() (messages.Hooks, error) { return p.Start(c) },
	}
}

// Live counts the processes of this producer's tasks that are running now: in
// cgroup mode, every process in their cgroups; in both modes, every process that
// carries one of their markers. It scans /proc, so it costs about a millisecond per
// hundred processes on the machine.
func (p *Producer) Live() int {
	pids := markedPids(func(m string) bool { return strings.HasPrefix(m, p.prefix) })
	if p.tree != nil {
		p.tree.live(p.taskDirPrefix(), pids)
	}
	return len(pids)
}

// taskDirPrefix starts the names of this producer's task cgroups.
func (p *Producer) taskDirPrefix() string { return "task-" + strconv.FormatUint(p.n, 10) + "-" }

func init() { leakcheck.Register(liveProcesses, machineLiveProcesses) }

// liveProcesses counts the running processes of the bash tasks of every Producer in
// this process (leakcheck.Live).
func liveProcesses() int {
	prefix := fmt.Sprintf("%d.", os.Getpid())
	pids := markedPids(func(m string) bool { return strings.HasPrefix(m, prefix) })
	for _, t := range allTrees() {
		t.live("task-", pids)
	}
	return len(pids)
}

// machineLiveProcesses counts the running processes on this machine that carry any
// bash task marker, and those in this process's task cgroups (leakcheck.Machine).
func machineLiveProcesses() int {
	pids := markedPids(func(string) bool { return true })
	for _, t := range allTrees() {
		t.live("task-", pids)
	}
	return len(pids)
}

// environ is the environment of a new task: this process's, minus any inherited
// marker, plus extra, plus the task's marker (last, so extra cannot override it).
func environ(extra []string, marker string) ([]string, error) {
	for _, kv := range extra {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("bash: malformed environment entry %q (want KEY=VALUE)", shortLabel(kv))
		}
	}
	base := os.Environ()
	env := make([]string, 0, len(base)+len(extra)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, markerEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, extra...)
	return append(env, markerEnv+"="+marker), nil
}
