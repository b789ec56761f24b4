// Package bash is the taskrt producer that runs shell commands: as background tasks
// (Producer.Spec / Producer.Start hand the runtime a messages.Hooks) and as
// foreground calls (Producer.Run) for the bash tool.
//
// # What it guarantees
//
// Each command runs as `/bin/bash -c COMMAND` in a new process group, without a
// controlling terminal (in a new session; in cgroup mode only when this process has
// a terminal to detach from, since a session costs a scheduler autogroup per
// command), with stdin on /dev/null and stdout and stderr merged into one pipe, in
// arrival order. A command of up to MaxCommand (1 MiB) bytes is accepted; one over
// 64 KiB is handed to the shell on a descriptor rather than as an argument, since
// the kernel refuses an argument of 128 KiB or more. The output lands in a
// producers/output.Buffer, which the task's hooks hand to the runtime as
// Hooks.Output (so bash tasks answer reads up to a pattern, observer reads by offset
// and output events): the first bytes (the head) and the latest bytes (the tail)
// stay in memory, everything past the first read's worth is also written through to
// a size-capped spill file, and whatever fits nowhere is counted as dropped. Reads
// are consuming deltas; a delta larger than one read may return is shown as its
// head and tail around a one-line marker that states exactly how many bytes were
// left out, where they are saved and how many were not kept. Memory per task in
// this process is bounded by the head, tail and read buffer sizes, whatever the
// command prints.
//
// # Input
//
// A background command's stdin (Command.Stdin) is /dev/null by default
// (StdinNone). StdinPipe gives it a pipe and StdinTTY a pseudo-terminal of its own
// (github.com/creack/pty; its controlling terminal, in a new session, with a fixed
// window size and TERM=dumb unless configured; output then comes from the terminal,
// into the same bounded buffer). Either way the task's Hooks.Input writes to it, one
// call at a time and in order; a write to a full pipe or terminal blocks that call
// (the runtime's input goroutine for the task, nothing else) until the command
// reads or the task ends. eof closes the pipe, or types the terminal's end-of-file
// character (see StdinTTY). Once the shell has exited, input fails with
// messages.ErrTaskEnded, and a write still blocked then returns with that error.
// Containment, kills and "no survivors" are the same in every mode. Foreground Run
// takes no input.
//
// No process survives its task. Cancelling sends SIGTERM to the task's processes
// and SIGKILL after a grace period; when the leader exits (on its own or killed),
// every remaining process of the task is killed with SIGKILL. Done settles only
// after the leader is reaped, every process of the task is gone and the output pipe
// is drained (with a bounded wait, so a pipe held open by a process outside the task
// cannot hang it). How a task's processes are kept together is its Containment,
// chosen once by New and logged:
//
//   - Cgroup mode, wherever a writable cgroup v2 hierarchy exists (as root on a
//     unified or hybrid mount, or in a delegated subtree: see WithCgroupRoot): each
//     task runs in a cgroup of its own from its first instruction, so nothing it
//     does (setsid, a double fork, clearing its environment) takes a process out of
//     it. The cgroup is killed with cgroup.kill and known empty from cgroup.events;
//     nothing scans /proc, so a task costs the same whatever else runs on the
//     machine. A task whose process count (the pids controller's) says that its
//     leader is all that is left settles without looking at this process's
//     children; otherwise the orphan reaper reads this process's children list
//     and /proc only for the settling task's own processes and, once each, for
//     children of this process it has not met before (see docs/cost.md). Limits on processes, memory and CPU (WithMaxProcesses,
//     WithMemoryLimit, WithCPULimit, Command.Limits) are available in this mode
//     only; on a hybrid mount whose controllers are bound to cgroup v1, they are
//     placed in the v1 hierarchies.
//   - Sweep mode, the fallback: a task's processes are found in /proc, by the
//     session and process group of the leader, a per-task marker in the environment
//     (TASKRT_BASH_TASK) that catches `setsid` escapes, and the parent links from
//     any of those; every task settling at the same moment shares one scan. It
//     cannot see a process that both clears (or unsets) its environment marker and
//     leaves the session (`env -i setsid cmd &`, `unset TASKRT_BASH_TASK; setsid
//     cmd &`), nor work handed to a daemon outside the task's process tree; and a
//     scan costs time in proportion to every process on the machine. Its one gap
//     in "not even a zombie": a process that leaves the session and dies before a
//     scan has seen it alive — a short command escaped through a subshell that
//     exits at once, `(setsid cmd &)`, or one that a kill's signal reached while it
//     was still in the shell's process group and that called setsid before the
//     signal landed — is left as this process's zombie: a zombie has no
//     environment, so nothing names it as the task's, and reaping a zombie child
//     that is not positively the task's could steal another os/exec child's
//     status. Cgroup mode names such a zombie by the cgroup it died in.
//
// # Host death
//
// The leader gets SIGKILL as its parent-death signal: when this process dies (even
// from SIGKILL), every task's shell dies with it. What a shell started survives
// that: in sweep mode for good (re-parented to init); in cgroup mode until the next
// New by any process using the same cgroup root, which kills what runs in the
// cgroups of dead processes and removes them.
//
// # Process-wide effects
//
// In cgroup mode, New creates one directory per process under its cgroup
// (taskrt-<pid>-<start>), kept for the life of the process, and, when a limit needs
// a cgroup v2 controller that is not yet enabled, enables it in subtree_control.
// While this process receives orphans (a subreaper), every task also gets a count
// of its processes from the pids controller, without a limit: in cgroup v2 where
// the controller can be enabled there (it is then, as for a limit), else in the
// pids v1 hierarchy of a hybrid mount (a task-<n> directory there too, entered by
// the spawning thread for the fork). The count is what lets a settle know that a
// task left no zombie without looking at this process's children.
//
// A Producer keeps the cgroups of its settled tasks without limits for its next
// such tasks, so that a start makes and removes no directory (see docs/cost.md):
// at most 16, each empty (no process, no zombie), named task-<n>-p<k>, removed
// after 2 s unused, by Producer.Close, or when the Producer is garbage collected.
// A cgroup is kept only when it is as a new one would be; one that was killed
// through cgroup.kill, frozen, given a nested cgroup or a limit by its task is
// removed instead, and a task with limits always gets cgroups of its own. After
// Done, then, a task's cgroup holds nothing of it and either is gone or waits
// empty for the next task; after Close (and after 2 s without starts) no cgroup of
// the Producer is left.
//
// In both modes, New marks the whole process as a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)) unless WithoutSubreaper is given: orphaned
// descendants of every child of this process, not only of bash tasks, are
// re-parented to it instead of to init. This is what lets a task's Done wait until
// not even a zombie of it is left, whatever init does. The producer reaps only the
// orphans it positively identified as belonging to one of its tasks (by session,
// marker or start time in sweep mode, by the cgroup they died in in cgroup mode),
// and only by pid; it never calls wait4(-1), so statuses of other os/exec children
// are never stolen. Orphans of other code that exit become zombies of this process
// unless that code reaps them.
//
// # Sandbox
//
// WithSandbox (or Command.Sandbox, for the embedder to set per command) runs
// commands under bubblewrap (bwrap): SandboxReadOnly lets a command write nothing
// but a private /tmp, SandboxWorkspaceWrite also its working directory and the
// Sandbox's Writable paths; the network is off (a namespace with a loopback of its
// own) unless Network is set; the command sees only its own processes. A write
// elsewhere fails with the command's own "Read-only file system". bwrap is the
// task's leader, in the task's cgroup from its first instruction; a kill sends
// SIGTERM to every process of the sandbox but bwrap (whose death would SIGKILL the
// sandbox before the grace period), and when the shell exits, or this process dies,
// the kernel kills every process left in the sandbox at once. A sandbox that cannot
// be provided here (no bwrap, no user namespaces) fails the start with
// ErrSandboxUnavailable: a command that asks for one never runs without it.
// Producer.Sandbox and Producer.SandboxDetail report it. Each sandboxed start costs
// bwrap's start-up, several milliseconds; docs/sandbox.md has the figures and the
// known limits.
//
// # When not to use it
//
// It is Linux-only (it relies on /proc, pidfds, prctl and cgroups); elsewhere Start
// fails. Without WithSandbox it is not a sandbox: a command runs with the rights of
// this process, a command running as root can move itself out of its cgroup, and in
// sweep mode a command can hide as described above. Its terminals are
// not for password prompts (input is data the caller hands over, typically a model's
// tool call) nor for full-screen programs: no terminal emulator interprets their
// escape sequences, which reach the output as raw bytes.
//
// docs/bash.md in the repository is the reference for users: the two containment
// modes side by side, limits, host death, input and the known limits.
package bash
