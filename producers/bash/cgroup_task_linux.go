//go:build linux

package bash

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The per-task jail: one cgroup per task (and its v1 twins for limits a hybrid
// mount holds there), entered at spawn, ended with cgroup.kill, removed at release.

// taskCgroup is one task's cgroup: a jail.
type taskCgroup struct {
	tree *cgroupTree
	dir  string            // the task's cgroup v2 directory
	fd   int               // dir opened with O_PATH, for CLONE_INTO_CGROUP; -1 once closed
	v1   map[string]string // controller → the task's v1 directory, for limits placed there
	// counter is the task's pids.current (v2, or the pids v1 hierarchy): how many of
	// its processes exist, zombies included, until they are reaped; "" when no pids
	// controller is available here. See onlyTheLeaderIsLeft.
	counter string
	limits  Limits
	log     *slog.Logger

	line string // the cgroup as /proc/PID/cgroup names it, with the line's end (see reaper)

	pool   *cgroupPool // the pool the cgroup goes back to at release; nil: removed then
	proven bool        // the task's settle found nothing of it left (see cgroupPool)
	killed bool        // cgroup.kill was written (see reusable)
	quiet  bool        // the settle read "populated 0" and "frozen 0" at once (no kill needed)
	alone  bool        // the settle's process count said the leader was all that was left
	// orphans is set by a settle whose count said more than the leader was left:
	// reapOrphans reaps them once the leader is reaped.
	orphans bool
	// suspects are the processes kill found in the cgroup: reapOrphans looks for
	// their zombies among this process's children by pid.
	suspects []int
	parked   time.Time // when the pool parked it
}

// newTask creates the cgroup of a task named name with limits lim. Each limit goes
// to cgroup v2 when its controller is available there, else to the controller's v1
// hierarchy (whose directory the spawning thread enters for the fork, see spawn);
// a limit with neither is an ErrLimitsUnavailable error.
func (t *cgroupTree) newTask(name string, lim Limits, log *slog.Logger) (_ *taskCgroup, err error) {
	c := &taskCgroup{tree: t, dir: filepath.Join(t.parent, name), fd: -1, v1: map[string]string{}, limits: lim, log: log}
	if err := t.mkdir(name); err != nil {
		return nil, fmt.Errorf("bash: creating the task's cgroup: %w", err)
	}
	defer func() {
		if err != nil {
			_ = c.remove()
		}
	}()
	fd, err := t.openDir(name)
	if err != nil {
		return nil, fmt.Errorf("bash: opening the task's cgroup: %w", err)
	}
	c.fd = fd
	c.line = t.cgroupLine(c.dir) + "\n"
	type setting struct{ file, value string }
	apply := func(ctl, what string, v2 []setting, v1 []setting) error {
		if t.v2Controller(ctl) {
			for _, s := range v2 {
				if err := writeFile(filepath.Join(c.dir, s.file), s.value); err != nil && !(errors.Is(err, os.ErrNotExist) && s.file == "memory.swap.max") {
					return fmt.Errorf("bash: setting the %s limit: %w", what, err)
				}
			}
			return nil
		}
		parent, err := t.v1Parent(ctl)
		if err != nil {
			return fmt.Errorf("bash: creating the %s cgroup (v1): %w", ctl, err)
		}
		if parent == "" {
			return fmt.Errorf("%w: no %s controller in cgroup v2 here and no cgroup v1 %s hierarchy", ErrLimitsUnavailable, ctl, ctl)
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("bash: creating the %s cgroup (v1): %w", ctl, err)
		}
		c.v1[ctl] = dir
		for _, s := range v1 {
			if err := writeFile(filepath.Join(dir, s.file), s.value); err != nil && !(errors.Is(err, os.ErrNotExist) && s.file == "memory.memsw.limit_in_bytes") {
				return fmt.Errorf("bash: setting the %s limit: %w", what, err)
			}
		}
		return nil
	}
	if lim.Processes > 0 {
		n := strconv.Itoa(lim.Processes)
		// In v1 the spawning thread sits in the cgroup during the fork: one more
		// until it leaves (see lowerAfterSpawn).
		if err := apply("pids", "process", []setting{{"pids.max", n}}, []setting{{"pids.max", strconv.Itoa(lim.Processes + 1)}}); err != nil {
			return nil, err
		}
	}
	if lim.Memory > 0 {
		n := strconv.FormatInt(lim.Memory, 10)
		if err := apply("memory", "memory",
			[]setting{{"memory.max", n}, {"memory.swap.max", "0"}},
			[]setting{{"memory.limit_in_bytes", n}, {"memory.memsw.limit_in_bytes", n}}); err != nil {
			return nil, err
		}
	}
	if lim.CPU > 0 {
		// In v1 the quota is set after the spawn, so the spawning thread is never
		// throttled by it.
		if err := apply("cpu", "cpu", []setting{{"cpu.max", fmt.Sprintf("%d %d", lim.cpuQuota(), cpuPeriod)}}, nil); err != nil {
			return nil, err
		}
	}
	switch {
	case lim.Processes > 0 && c.v1["pids"] != "":
		c.counter = filepath.Join(c.v1["pids"], "pids.current")
	case lim.Processes > 0:
		c.counter = filepath.Join(c.dir, "pids.current")
	case receivesOrphans():
		c.count(name)
	}
	return c, nil
}

// count gives the task a count of its processes that keeps its zombies until they
// are reaped: the pids controller's pids.current, with no limit. In cgroup v2 when
// the controller is there (enabled in the producer's cgroup as for a limit), else
// in the pids v1 hierarchy of a hybrid mount, whose task directory the spawning
// thread enters for the fork (see spawn). The count is what lets a settle skip the
// reaper's look at this process's children (onlyTheLeaderIsLeft); without a pids
// controller anywhere the task has none and every settle takes the reaper's round.
func (c *taskCgroup) count(name string) {
	if c.tree.v2Controller("pids") {
		c.counter = filepath.Join(c.dir, "pids.current")
		return
	}
	parent, err := c.tree.v1Parent("pids")
	if err != nil || parent == "" {
		return
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.log.Debug("bash: no process count for the task", "err", err)
		return
	}
	c.v1["pids"] = dir
	c.counter = filepath.Join(dir, "pids.current")
}

// countsTasks reports whether the tasks of this tree get a process count (see
// taskCgroup.count): a pids controller in cgroup v2 or in a v1 hierarchy.
func (t *cgroupTree) countsTasks() bool {
	return t.v2Controller("pids") || t.lay.v1Dir("pids") != ""
}

// onlyTheLeaderIsLeft reports whether the task's process count says that the
// unreaped leader is all that is left of it (settle runs before the leader is
// reaped): no zombie of the task, and no process between leaving the cgroup and
// becoming a zombie, since the pids controller counts a process from its fork until
// it is reaped. A process is counted in the cgroup its parent was in when it
// forked, and none of the task's can fork outside it (CLONE_INTO_CGROUP for v2; in
// v1 the spawning thread forks the leader from inside, and the leader's descendants
// inherit it); only a process that moves itself to another cgroup (which takes
// root, and a write to a cgroup file) would leave the count, as it leaves the task.
func (c *taskCgroup) onlyTheLeaderIsLeft() bool {
	if c.counter == "" {
		return false
	}
	n, ok := c.processCount()
	return ok && n == 1
}

// processCount reads the task's process count.
func (c *taskCgroup) processCount() (int, bool) {
	var buf [32]byte
	b, ok := readAt(unix.AT_FDCWD, c.counter, buf[:])
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n, err == nil
}

// populated reads "populated" from the task's cgroup.events: 1 while a process
// lives in the cgroup, 0 after; -1 when it cannot be read.
func (c *taskCgroup) populated() int {
	p, _ := c.state()
	return p
}

// look reads cgroup.events at the start of a settle: it returns "populated" and
// records whether the cgroup was quiet, not populated and not frozen.
func (c *taskCgroup) look() int {
	populated, frozen := c.state()
	c.quiet, c.alone = populated == 0 && frozen == 0, false
	return populated
}

// state reads "populated" and "frozen" from the task's cgroup.events in one read;
// -1 for what cannot be read (frozen: 0 on a kernel without it).
func (c *taskCgroup) state() (populated, frozen int) {
	var buf [128]byte
	b, ok := readAt(unix.AT_FDCWD, c.dir+"/cgroup.events", buf[:])
	if !ok {
		return -1, -1
	}
	p, ok := keyedValue(b, "populated")
	if !ok {
		return -1, -1
	}
	f, ok := keyedValue(b, "frozen")
	if !ok {
		f = 0
	}
	return int(p), int(f)
}

// lowerAfterSpawn is run by the spawning thread right after the fork, before it
// leaves the task's v1 cgroups: the process limit drops to its value (the thread no
// longer needs its slot once it leaves), and the CPU quota is set.
func (c *taskCgroup) lowerAfterSpawn() error {
	var errs []error
	if dir, ok := c.v1["pids"]; ok && c.limits.Processes > 0 {
		errs = append(errs, writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(c.limits.Processes)))
	}
	return errors.Join(errs...)
}

// afterSpawn sets what v1 takes after the spawn: the CPU quota.
func (c *taskCgroup) afterSpawn() error {
	dir, ok := c.v1["cpu"]
	if !ok {
		return nil
	}
	return errors.Join(
		writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)),
		writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(c.limits.cpuQuota(), 10)))
}

// closeFD closes the descriptor of the cgroup's directory once the leader is in
// it. A running task holds no descriptor of its cgroups: every descriptor of this
// process is copied and then closed by each later spawn (about 0.2 µs a
// descriptor a spawn), so one per running task would make a burst of starts cost
// O(n²). The pool opens it again for the next task.
func (c *taskCgroup) closeFD() { closeFD(&c.fd) }

func closeFD(fd *int) {
	if *fd >= 0 {
		_ = unix.Close(*fd)
		*fd = -1
	}
}

// terminate sends SIGTERM to the leader's process group and to every other process
// of the cgroup. A pid read from cgroup.procs is signalled through a pidfd, and only
// if a second read, after the pidfd was opened, still lists it: a process that
// exited in between and whose pid was reused outside the cgroup is never hit.
func (c *taskCgroup) terminate(leader int) error {
	err := signalGroup(leader, syscall.SIGTERM)
	procs := c.dir + "/cgroup.procs"
	fds := map[int]int{}
	for _, pid := range readPids(procs) {
		if pgid, perr := unix.Getpgid(pid); perr == nil && pgid == leader {
			continue // signalled with the group
		}
		if fd, ferr := unix.PidfdOpen(pid, 0); ferr == nil {
			fds[pid] = fd
		}
	}
	if len(fds) == 0 {
		return err
	}
	for _, pid := range readPids(procs) {
		if fd, ok := fds[pid]; ok {
			err = errors.Join(err, ignoreGone(unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)))
		}
	}
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
	return err
}

// kill sends SIGKILL to every process of the cgroup at once; a fork under way
// cannot escape it.
func (c *taskCgroup) kill(int) error {
	c.killed = true
	// Who is killed: their zombies are this task's to reap (see reapOrphans).
	c.suspects = append(c.suspects, readPids(c.dir+"/cgroup.procs")...)
	err := writeFile(c.dir+"/cgroup.kill", "1")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// settle runs once the leader has exited: when processes are left, it counts and
// kills them and waits for "populated 0". Then, if this process receives orphans
// at all, nothing more is needed when the task's process count says that nothing
// but the leader is left; with a count that says more, the task's zombies are
// reaped once the leader is (reapOrphans); without a count, the reaper's round
// reaps them now (see reaper).
func (c *taskCgroup) settle(leader int) (int, error) {
	leftovers := 0
	var err error
	if c.look() == 1 {
		before := len(c.suspects)
		err = c.kill(leader)
		leftovers = len(c.suspects) - before
		if err == nil {
			if !waitFor(c.dir+"/cgroup.events", sweepTimeout, func() bool { return c.populated() != 1 }) {
				err = fmt.Errorf("processes survived cgroup.kill for %s", sweepTimeout)
			}
		}
		if leftovers > 0 {
			c.log.Info("bash task: killed leftover processes", "count", leftovers)
		}
	}
	if receivesOrphans() {
		switch {
		case c.onlyTheLeaderIsLeft():
			c.alone = true
			reaps.spared.Add(1)
		case c.counter != "":
			c.orphans = true // reaped by name once the leader is (reapOrphans)
		default:
			err = errors.Join(err, reaps.run(c.line))
		}
	}
	c.proven = err == nil && !diedOfSIGKILL(leader)
	return leftovers, err
}

// Orphans of a task. When the settle's count says that more than the leader is
// left, what is left is dead (killed, "populated 0") and not reaped: zombies that
// became this process's children, or processes an instant away from it. Most can
// be named without a look at this process's other children: the processes in the
// leader's process group (a shell's background jobs and their children), which
// waitid finds, and the processes a kill found in the cgroup (suspects), which
// left the group or not. reapOrphans reaps those, one at a time, each after
// checking that it died in the task's cgroup, until the count says none is left.
// What neither names (a process that left the group and died before any kill, a
// fork that raced a kill), a foreign zombie in the group, or a count that cannot
// be read, leaves the rest to the reaper's round.

// Bounds of reapOrphans's wait for a process between its cgroup exit and its
// zombie state, before the round takes over.
const (
	orphanTries = 5
	orphanPause = 200 * time.Microsecond
)

// What a look for orphans found once it had reaped what it could.
type orphanState int

const (
	orphansGone    orphanState = iota // none of the named processes is a child of this process
	orphansExiting                    // some are, but not zombies yet
	orphansForeign                    // a zombie that did not die in the task's cgroup
)

// reapOrphans runs once the leader is reaped (so that it is not what waitid finds
// first in its group), when settle left the task's orphans to it.
func (c *taskCgroup) reapOrphans(pgid int) error {
	if !c.orphans {
		return nil
	}
	c.orphans = false
	defer func() { c.suspects = nil }()
	for idle := 0; ; {
		n, ok := c.processCount()
		if !ok {
			break
		}
		if n == 0 {
			reaps.named.Add(1)
			return nil
		}
		inGroup, group := c.reapGroup(pgid)
		named, suspects := c.reapSuspects()
		if group == orphansForeign || suspects == orphansForeign {
			break // not the task's to reap: the round tells them apart
		}
		if inGroup+named > 0 {
			idle = 0
			continue
		}
		if (group != orphansExiting && suspects != orphansExiting) || idle >= orphanTries {
			break // the rest is not named here
		}
		idle++
		time.Sleep(orphanPause)
	}
	return reaps.run(c.line)
}

// reapGroup reaps the zombie children of this process in process group pgid that
// died in the task's cgroup, and says what it found then.
func (c *taskCgroup) reapGroup(pgid int) (int, orphanState) {
	for reaped := 0; ; reaped++ {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PGID, pgid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
			return reaped, orphansGone // ECHILD
		}
		pid := siPid(&info)
		if pid == 0 {
			return reaped, orphansExiting
		}
		if !c.reapIfMine(pid) {
			return reaped, orphansForeign
		}
	}
}

// reapSuspects reaps the zombies of the processes kill found, and drops those that
// are not children of this process (reaped by their parents, in the task).
func (c *taskCgroup) reapSuspects() (int, orphanState) {
	reaped, state := 0, orphansGone
	kept := c.suspects[:0]
	for _, pid := range c.suspects {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
			continue // ECHILD: not a child of this process (any more)
		}
		switch {
		case siPid(&info) == 0:
			kept = append(kept, pid)
			if state == orphansGone {
				state = orphansExiting
			}
		case c.reapIfMine(pid):
			reaped++
		default:
			// The pid was reaped by its parent and is another child's now.
			state = orphansForeign
		}
	}
	c.suspects = kept
	return reaped, state
}

// reapIfMine reaps the zombie child pid if it died in the task's cgroup. The pid
// cannot change hands meanwhile: only this process reaps its children.
func (c *taskCgroup) reapIfMine(pid int) bool {
	reaps.children.reads.Add(1)
	if cgroupOf(pid) != c.line {
		return false
	}
	var info unix.Siginfo
	return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil) == nil
}

// siPid is si_pid of a waitid result: after si_signo, si_errno, si_code and
// padding; 0 when WNOHANG found nothing to report.
func siPid(info *unix.Siginfo) int { return int((*[5]int32)(unsafe.Pointer(info))[4]) }

// diedOfSIGKILL reports whether the exited, unreaped leader was killed by SIGKILL,
// without reaping it. A task that wrote its own cgroup.kill ends that way (see
// reusable).
func diedOfSIGKILL(leader int) bool {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, leader, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil); err != nil {
		return true // cannot tell: assume the worst
	}
	status := (*[7]int32)(unsafe.Pointer(&info))[6] // si_status: after si_signo, si_errno, si_code, padding, si_pid, si_uid
	return (info.Code == cldKilled || info.Code == cldDumped) && status == int32(unix.SIGKILL)
}

const (
	cldKilled = 2 // CLD_KILLED
	cldDumped = 3 // CLD_DUMPED
)

// limitHits reads what the kernel recorded about the task's limits.
func (c *taskCgroup) limitHits() limitHits {
	h := limitHits{limits: c.limits}
	read := func(path, key string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		v, _ := keyedValue(b, key)
		return v
	}
	if c.limits.Memory > 0 {
		if dir, ok := c.v1["memory"]; ok {
			h.oomKills = read(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		} else {
			h.oomKills = read(filepath.Join(c.dir, "memory.events"), "oom_kill")
		}
	}
	if c.limits.Processes > 0 {
		dir := c.dir
		if d, ok := c.v1["pids"]; ok {
			dir = d
		}
		h.forksRefused = read(filepath.Join(dir, "pids.events"), "max")
	}
	return h
}

// release hands the task's cgroups back to their pool, or removes them. Every
// process has left them by now.
func (c *taskCgroup) release() error {
	if c.pool != nil {
		return c.pool.put(c)
	}
	return c.remove()
}

// remove closes the cgroup's descriptors and removes its directories.
func (c *taskCgroup) remove() error {
	closeFD(&c.fd)
	errs := []error{removeTree(c.dir)}
	for _, dir := range c.v1 {
		errs = append(errs, removeTree(dir))
	}
	return errors.Join(errs...)
}

// reusable reports whether the cgroup, released by its task, is as a new one
// would be, so that the pool may give it to another task: its task settled with
// nothing left (proven), nothing lived in it at the settle ("populated 0", so no
// kill was needed) and it was not frozen ("frozen 0"), it has no nested cgroup,
// its process count is 0 (the leader is reaped), and its limit files hold their
// defaults. A task may write its own
// cgroup's files (freeze it, set a limit, enable a controller for nested
// cgroups, make nested cgroups): a cgroup whose task did is removed instead.
//
// A cgroup that was ever killed through cgroup.kill is never reused: Linux (seen
// on 6.18) then kills every process forked into it with CLONE_INTO_CGROUP at
// once, as if the kill were still under way (the fork compares the target's kill
// count with the forking thread's cgroup's). That covers the kills of this
// producer (killed), a task that killed its own cgroup while its leader lived
// (the leader then died of SIGKILL: not proven), and one whose process killed it
// after the leader exited (that process was still counted at the settle: not
// alone).
func (c *taskCgroup) reusable() bool {
	if !c.proven || c.killed || c.limits.any() {
		return false
	}
	for ctl := range c.v1 {
		if ctl != "pids" {
			return false
		}
	}
	// What the settle read: nothing lived in it and it was not frozen, then the
	// leader was reaped (nothing of the task is left to change that).
	if !c.quiet {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(c.dir, &st) != nil || st.Nlink != 2 { // a kernfs directory links 2 + its subdirectories
		return false
	}
	// Nothing but the leader was left when it had exited: a process that wrote
	// cgroup.kill while the leader lived killed it (not proven), and one that wrote
	// it after the leader exited was still counted at the settle, alive or a
	// zombie, so the cgroup of a task that left anything is never reused. Without
	// a process count nothing can say so, and nothing is reused.
	if !c.alone {
		return false
	}
	if dir, ok := c.v1["pids"]; ok {
		if unix.Stat(dir, &st) != nil || st.Nlink != 2 || !holds(unix.AT_FDCWD, dir+"/pids.max", "max") {
			return false
		}
	}
	for _, ctl := range c.tree.v2Enabled() {
		if ctl != "pids" || !holds(unix.AT_FDCWD, c.dir+"/pids.max", "max") || !holds(unix.AT_FDCWD, c.dir+"/cgroup.subtree_control", "") {
			return false
		}
	}
	return true
}

// holds reports whether the control file path (relative to dirfd) holds value.
func holds(dirfd int, path, value string) bool {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var buf [64]byte
	n, err := unix.Read(fd, buf[:])
	return err == nil && strings.TrimSpace(string(buf[:n])) == value
}
