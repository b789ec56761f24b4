//go:build linux

package bash

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds everything that talks to the kernel about processes: the
// subreaper, waiting for the leader without reaping it, signalling, the /proc scan
// that finds a task's processes, and reaping identified orphans by pid.

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

// sysProcAttr starts the leader in a new session: a new process group whose id, like
// the session id, is the leader's pid, inherited by every descendant that does not
// call setsid itself.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// waitExited blocks until the leader pid has exited, without reaping it (WNOWAIT):
// while it is a zombie its pid, process group id and session id cannot be reused,
// so signalling the group and matching the session stay safe until os/exec reaps it.
func waitExited(pid int) error {
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
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// scanProcs reads /proc/*/stat. Processes that vanish during the scan are skipped.
// It costs one open, read and close per process on the machine (about 9 µs each in
// a small VM), which makes it the main cost of a sweep.
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
	buf := make([]byte, 512)
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
	b, ok := readAt(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 512))
	if !ok {
		return procInfo{}, false
	}
	return parseStat(b)
}

// parseStat parses a /proc/PID/stat line:
//
//	pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
//	cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime ...
//
// comm may hold spaces and parentheses, so fields are counted after the last ')'.
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
	p.zombie = b[closing+2] == 'Z' || b[closing+2] == 'X'
	rest := b[closing+2:]
	const pfKthread = 0x00200000 // PF_KTHREAD in the flags field
	for field := 3; field <= 22 && len(rest) > 0; field++ {
		tok := rest
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		var v uint64
		switch field {
		case 4, 5, 6, 9, 22:
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
		case 9:
			p.kthread = v&pfKthread != 0
		case 22:
			p.start = v
			return p, true
		}
	}
	return p, false
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

// environMarker returns the value of TASKRT_BASH_TASK in pid's environment, or ""
// when it has none. ok is false when that cannot be known yet: a process in the
// middle of execve briefly shows an empty environment, and an empty command line
// with it, while its new memory map is being set up; a process whose environment is
// really empty (env -i) still has a command line. A process that vanished or that
// this user may not inspect has no marker this producer could act on: ok is true.
func environMarker(pid int) (marker string, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	env, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return "", true
	}
	if len(env) == 0 {
		cmdline, err := os.ReadFile(dir + "/cmdline")
		return "", err != nil || len(cmdline) > 0
	}
	key := []byte(markerEnv + "=")
	for rest := env; len(rest) > 0; {
		entry := rest
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			entry, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if bytes.HasPrefix(entry, key) {
			return string(entry[len(key):]), true
		}
	}
	return "", true
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

// countMarked counts live processes (never this one) whose marker satisfies match.
// Processes caught in the middle of execve are looked at again, 1 ms apart, for up
// to maxUnsure.
func countMarked(match func(marker string) bool) int {
	procs, err := scanProcs()
	if err != nil {
		return 0
	}
	n := 0
	var unsure []int
	for _, p := range procs {
		if p.pid == selfPid || p.zombie || p.kthread {
			continue
		}
		m, ok := environMarker(p.pid)
		switch {
		case !ok:
			unsure = append(unsure, p.pid)
		case m != "" && match(m):
			n++
		}
	}
	for deadline := time.Now().Add(maxUnsure); len(unsure) > 0 && time.Now().Before(deadline); {
		pause(time.Millisecond)
		still := unsure[:0]
		for _, pid := range unsure {
			m, ok := environMarker(pid)
			switch {
			case !ok:
				still = append(still, pid)
			case m != "" && match(m):
				n++
			}
		}
		unsure = still
	}
	return n
}
