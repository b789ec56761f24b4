// Package bash is the taskrt producer that runs shell commands: as background tasks
// (Producer.Spec / Producer.Start hand the runtime a messages.Hooks) and as
// foreground calls (Producer.Run) for the bash tool.
//
// # What it guarantees
//
// Each command runs as `/bin/bash -c COMMAND` in a new session (so a new process
// group), with stdin on /dev/null and stdout and stderr merged into one pipe, in
// arrival order. The output lands in an offset-keyed buffer: the first bytes (the
// head) and the latest bytes (the tail) stay in memory, everything past the first
// read's worth is also written through to a size-capped spill file, and whatever
// fits nowhere is counted as dropped. Reads are consuming deltas; a delta larger
// than one read may return is shown as its head and tail around a one-line marker
// that states exactly how many bytes were left out, where they are saved and how
// many were not kept. Memory per task is bounded by the head, tail and read buffer
// sizes, whatever the command prints.
//
// No process survives its task. Cancelling sends SIGTERM to the group and SIGKILL
// after a grace period; when the leader exits (on its own or killed), every
// remaining process of the task is killed with SIGKILL and reaped. A task's
// processes are found three ways: the session and process group of the leader, a
// per-task marker in the environment (TASKRT_BASH_TASK) that catches `setsid`
// escapes, and the parent links from any of those. Done settles only after the
// leader is reaped, every process of the task is gone and the output pipe is drained
// (with a bounded wait, so a pipe held open by an untracked process cannot hang it).
// Orphans of a task that exit while the task still runs stay zombies until it ends,
// when the sweep reaps them.
//
// # Process-wide effect
//
// By default New marks the whole process as a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)): orphaned descendants of every child of this
// process, not only of bash tasks, are re-parented to it instead of to init. The
// producer reaps only the orphans it positively identified as belonging to one of its
// tasks (by session, marker or a start time it recorded), and only by pid; it never
// calls wait4(-1), so statuses of other os/exec children are never stolen. Orphans of
// other code that exit become zombies of this process unless that code reaps them.
// Without the subreaper (WithSubreaper(false)), escaped orphans that exit on their own
// are left to init, which in some containers never reaps them.
//
// # When not to use it
//
// It is Linux-only (it relies on /proc, pidfds and prctl); elsewhere Start fails. It
// is not a sandbox: a command can still escape by clearing its environment and
// calling setsid (`env -i setsid cmd &`), or by handing work to a daemon outside its
// process tree. It is not for interactive programs: there is no terminal and stdin is
// empty.
package bash
