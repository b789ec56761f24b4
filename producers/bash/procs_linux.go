//go:build linux

package bash

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds what talks to the kernel about single processes: the subreaper
// flag, waiting for the leader without reaping it, signalling, reading
// /proc/PID/stat and /proc/PID/environ, killing and reaping identified processes.

var (
	subreaperOnce sync.Once
	subreaperErr  error // set once by enableSubreaper
)

// supported reports whether this platform can run the producer.
func supported() error { return nil }

// enableSubreaper makes this process a child subreaper, once. Process-wide; see the
// package documentation.
func enableSubreaper() error {
	subreaperOnce.Do(func() {
		subreaperErr = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	return subreaperErr
}

// receivesOrphans reports whether orphaned processes can be re-parented to this
// process: it is a child subreaper, or it is the init of its pid namespace.
//
// A yes is remembered: believing it after the flag was cleared only costs a look
// at the children; a no is asked again each time.
func receivesOrphans() bool {
	if testHookNoOrphans.Load() {
		return false
	}
	if selfPid == 1 || orphansCome.Load() {
		return true
	}
	var flag int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&flag)), 0, 0, 0); err != nil {
		return true // cannot tell: assume it may, which only costs a look at the children
	}
	if flag != 0 {
		orphansCome.Store(true)
	}
	return flag != 0
}

var orphansCome atomic.Bool // receivesOrphans said yes once

// testHookNoOrphans, when set (by BenchmarkTrueGuarantees), makes receivesOrphans
// say no, as it does in a process that is no subreaper (WithoutSubreaper): tasks
// then get no process count, and a settle reaps nothing.
var testHookNoOrphans atomic.Bool

// outputPipe returns a task's output pipe: the read end non-blocking and in Go's
// netpoller, the shell's end blocking and never registered there (os.Pipe would
// register both, and os/exec would then turn the shell's end back to blocking:
// six system calls more per start).
func outputPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// hasControllingTerminal reports whether this process has a controlling terminal.
func hasControllingTerminal() bool {
	p, ok := readStat(selfPid)
	return !ok || p.tty != 0
}

// waitExited blocks until the leader pid has exited, without reaping it (WNOWAIT):
// while it is a zombie its pid, process group id and session id cannot be reused,
// so signalling the group and matching the session stay safe until os/exec reaps it.
// It waits on a pidfd through Go's netpoller, so a waiting task holds no OS thread;
// on kernels without pidfds it blocks a thread in waitid.
func waitExited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return waitExitedBlocking(pid)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return waitExitedBlocking(pid)
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case errors.Is(werr, unix.EINTR), errors.Is(werr, unix.EAGAIN):
			werr = nil
			return false
		case werr != nil:
			return true
		}
		return info.Signo == int32(unix.SIGCHLD) // 0 while it runs (WNOHANG)
	})
	return errors.Join(err, werr)
}

func waitExitedBlocking(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// signalGroup signals every process in the process group pgid. Only called while
// the group's leader is not reaped, so pgid cannot name another group.
func signalGroup(pgid int, sig syscall.Signal) error {
	return ignoreGone(unix.Kill(-pgid, sig))
}

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid, pgrp, sid int
	tty                  int  // the controlling terminal's device number; 0 without one
	tid                  int  // for a thread read through /proc/PID/task: its id; else 0
	state                byte // R, S, D, Z, T, t, X, I, …
	threads              int  // threads of the process
	zombie               bool // the process is dead: its leader is a zombie and no other thread lives
	kthread              bool
	start                uint64 // start time in clock ticks after boot; with pid, an identity
	envStart, envEnd     uint64 // where the environment lies in its memory; 0 when not shown
}

var (
	selfPid   = os.Getpid()
	selfStart = func() uint64 { p, _ := readStat(selfPid); return p.start }()
)

// scanProcs reads /proc/*/stat. Processes that vanish during the scan are skipped.
// /proc lists processes in pid order, so a process that lives through the whole
// scan is always in it. It costs one open, read and close per process on the
// machine (about 9 µs each in a small VM): the main cost of sweep mode.
func scanProcs() ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	dirfd := int(d.Fd())
	procs := make([]procInfo, 0, len(names))
	buf := make([]byte, 1024)
	path := make([]byte, 0, 32)
	for _, name := range names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		path = append(append(path[:0], name...), "/stat"...)
		b, ok := readAt(dirfd, string(path), buf)
		if !ok {
			continue
		}
		if p, ok := parseStat(b); ok {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// readStat reads /proc/PID/stat.
func readStat(pid int) (procInfo, bool) {
	b, ok := readAt(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 1024))
	if !ok {
		return procInfo{}, false
	}
	return parseStat(b)
}

// parseStat parses a /proc/PID/stat line:
//
//	pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
//	cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
//	vsize rss rsslim startcode endcode startstack kstkesp kstkeip signal blocked
//	sigignore sigcatch wchan nswap cnswap exit_signal processor rt_priority policy
//	blkio_ticks guest_time cguest_time start_data end_data start_brk arg_start
//	arg_end env_start env_end exit_code
//
// comm may hold spaces and parentheses, so fields are counted after the last ')'.
// Fields 50 and 51 (env_start, env_end) exist since Linux 3.5; they are 0 for
// zombies, kernel threads and processes this user may not inspect.
func parseStat(b []byte) (procInfo, bool) {
	var p procInfo
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open || closing+2 >= len(b) {
		return p, false
	}
	pid, ok := atou(b[:open-1])
	if !ok {
		return p, false
	}
	p.pid = int(pid)
	p.state = b[closing+2]
	rest := b[closing+2:]
	parsed := false
	const pfKthread = 0x00200000 // PF_KTHREAD in the flags field
	for field := 3; field <= 51 && len(rest) > 0; field++ {
		tok := rest
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			tok, rest = bytes.TrimRight(rest, "\n"), nil
		}
		var v uint64
		switch field {
		case 4, 5, 6, 7, 9, 20, 22, 50, 51:
			if v, ok = atou(tok); !ok {
				return p, false
			}
		}
		switch field {
		case 4:
			p.ppid = int(v)
		case 5:
			p.pgrp = int(v)
		case 6:
			p.sid = int(v)
		case 7:
			p.tty = int(v)
		case 9:
			p.kthread = v&pfKthread != 0
		case 20:
			p.threads = int(v)
		case 22:
			p.start, parsed = v, true
		case 50:
			p.envStart = v
		case 51:
			p.envEnd = v
		}
	}
	// A leader thread that exited while other threads live shows as a zombie: the
	// process lives on (for a moment, while a non-leader thread execs, or for good,
	// when the main thread called pthread_exit). A dead process counts one thread.
	p.zombie = (p.state == 'Z' || p.state == 'X') && p.threads <= 1
	return p, parsed
}

// atou parses a decimal number without allocating.
func atou(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// readAt reads a small /proc file, relative to dirfd, into buf.
func readAt(dirfd int, path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// markerOf returns the value of TASKRT_BASH_TASK in p's environment, "" when it has
// none. sure is false when that cannot be known yet.
//
// A process in the middle of execve shows an empty environment for a while: from the
// moment its new memory map replaces the old one until the kernel has laid out the
// new environment, /proc/PID/environ reads empty, and during the last part of that,
// the copying of the environment pointers, its command line is already complete.
// Taking such a process for one whose environment is really empty (`env -i`) lets
// it escape, and under load the window is hit. An empty environment is therefore
// believed only when the same stat snapshot shows the process sleeping or stopped
// (S, T, t): a process inside execve is running or in uninterruptible wait (R, D).
//
// The environment is read in one read(2): the kernel holds the memory map for the
// whole call, so the text comes from one program image. Several reads could
// straddle an execve, and the old image's environment then ends early, without the
// marker (which this producer puts last).
//
// A multi-threaded process whose leader thread has exited (its other threads
// execve, or its main thread called pthread_exit) shows the leader as a zombie
// with no environment: it is read through a live thread.
//
// A process that vanished or that this user may not inspect has no marker this
// producer could act on: sure is true.
func markerOf(p procInfo) (marker string, sure bool) {
	dir := "/proc/" + strconv.Itoa(p.pid)
	thread := p.tid != 0
	if thread {
		dir += "/task/" + strconv.Itoa(p.tid)
	} else if p.state == 'Z' || p.state == 'X' {
		// Threads come and go here (an execve kills all but one): whatever goes
		// wrong with a thread means "look again", never "no marker".
		t, ok := liveThread(p.pid)
		if !ok {
			return "", false
		}
		return markerOf(t)
	}
	if p.envStart != 0 && p.envStart == p.envEnd && settledState(p.state) {
		return "", true
	}
	size := 64 << 10
	if p.envEnd > p.envStart {
		size = int(p.envEnd-p.envStart) + 1
	}
	for {
		env, err := readOnce(dir+"/environ", size)
		switch {
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return "", true // not this user's to inspect: not a process it could act on
		case err != nil:
			// ESRCH while the process lives: its leader thread has left its memory
			// map (an execve by another thread, or an exit under way). A vanished
			// thread says nothing about its process either.
			if now, ok := readStat(p.pid); ok && now.start == p.start && !now.zombie {
				return "", false
			}
			return "", !thread
		case len(env) == 0:
			return "", false // an execve under way, or a running env -i process: look again
		case len(env) == size:
			size *= 2 // larger than the stat snapshot said: a new image; read it whole
			continue
		}
		if m := findMarker(env); m != "" {
			return m, true
		}
		if p.envEnd > p.envStart && uint64(len(env)) != p.envEnd-p.envStart {
			return "", false // not the image stat described: an execve under way
		}
		return "", true
	}
}

// liveThread returns the stat of a thread of pid other than its leader.
func liveThread(pid int) (procInfo, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := os.ReadDir(dir)
	if err != nil {
		return procInfo{}, false
	}
	for _, e := range tids {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		b, ok := readAt(unix.AT_FDCWD, dir+"/"+e.Name()+"/stat", make([]byte, 1024))
		if !ok {
			continue
		}
		if t, ok := parseStat(b); ok && t.state != 'Z' && t.state != 'X' {
			t.pid, t.tid = pid, tid // the thread's own stat line names the thread
			return t, true
		}
	}
	return procInfo{}, false
}

// readOnce reads up to size bytes of path in a single read(2).
func readOnce(path string, size int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, size)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// settledState reports whether a process in this state cannot be inside execve.
func settledState(state byte) bool { return state == 'S' || state == 'T' || state == 't' }

// findMarker returns the value of TASKRT_BASH_TASK in a NUL-separated environment.
func findMarker(env []byte) string {
	key := []byte(markerEnv + "=")
	for rest := env; len(rest) > 0; {
		entry := rest
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			entry, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if bytes.HasPrefix(entry, key) {
			return string(entry[len(key):])
		}
	}
	return ""
}

// killProc sends SIGKILL to p if the process holding p.pid is still p (same start
// time). A pidfd pins the process between the check and the signal, so a recycled
// pid is never hit.
func killProc(p procInfo) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return killProcNoPidfd(p)
	}
	if err != nil {
		return ignoreGone(err)
	}
	defer unix.Close(fd)
	now, ok := readStat(p.pid)
	if !ok || now.start != p.start {
		return nil // gone, or the pid was recycled: not ours any more
	}
	return ignoreGone(unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0))
}

// killProcNoPidfd is killProc for kernels before 5.3: check, then kill by pid.
func killProcNoPidfd(p procInfo) error {
	now, ok := readStat(p.pid)
	if !ok || now.start != p.start {
		return nil
	}
	return ignoreGone(unix.Kill(p.pid, unix.SIGKILL))
}

func ignoreGone(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// reapOrphan reaps p, a zombie child of this process that the caller identified as
// an orphan of one of its tasks. It waits for that pid only, never -1, and only
// after re-checking that the zombie at p.pid is still p: a zombie child stays until
// its parent reaps it, and nothing else in this process waits for this pid.
func reapOrphan(p procInfo) {
	now, ok := readStat(p.pid)
	if !ok || now.start != p.start || !now.zombie || now.ppid != selfPid {
		return
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// signalName names a signal the way Outcome details do: "SIGTERM".
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}

// markedPids returns the live processes (never this one) whose marker satisfies
// match. Processes caught in the middle of execve are looked at again, 1 ms apart,
// for up to maxUnsure.
func markedPids(match func(marker string) bool) map[int]bool {
	pids := map[int]bool{}
	procs, err := scanProcs()
	if err != nil {
		return pids
	}
	var unsure []procInfo
	check := func(p procInfo) {
		m, ok := markerOf(p)
		switch {
		case !ok:
			unsure = append(unsure, p)
		case m != "" && match(m):
			pids[p.pid] = true
		}
	}
	for _, p := range procs {
		if p.pid != selfPid && !p.zombie && !p.kthread {
			check(p)
		}
	}
	for deadline := time.Now().Add(maxUnsure); len(unsure) > 0 && time.Now().Before(deadline); {
		pause(time.Millisecond)
		again := unsure
		unsure = nil
		for _, p := range again {
			if now, ok := readStat(p.pid); ok && now.start == p.start && !now.zombie {
				check(now)
			}
		}
	}
	return pids
}

// growPipe asks the kernel to make f's pipe hold size bytes; where the system does
// not allow it (fs.pipe-max-size, the user's pipe quota), the pipe stays as it is.
func growPipe(f *os.File, size int) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size) })
	}
}
