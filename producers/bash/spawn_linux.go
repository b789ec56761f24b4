//go:build linux

package bash

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/taskrt/taskrt/internal/contain"
	"golang.org/x/sys/unix"
)

// errThreadStuck reports that the spawning thread could not leave a task's v1
// cgroup. That thread is then ended (its goroutine exits locked to it), which also
// kills the new leader through its parent-death signal.
var errThreadStuck = errors.New("bash: the spawning thread could not leave the task's cgroup")

// spawn starts cmd as a task's leader: in a new process group (in a new session
// too when newSession is set), with SIGKILL as its parent-death signal, and, with
// a cgroup, inside it from its first instruction. With ctty, it runs in a new
// session whose controlling terminal is its standard input (a terminal).
//
// The parent-death signal fires when the thread that forked the leader ends, not the
// process, so the fork runs on a goroutine of its own that locks its OS thread for
// the fork and unlocks it after. The thread then returns to Go's pool, and Go never
// ends a pooled thread; only a goroutine that later locks that same thread and exits
// without unlocking it would end it, killing the leaders it forked.
//
// Limits placed in cgroup v1 need the leader in v1 cgroups too, before it can fork:
// membership there is per thread and inherited by a fork, so the locked thread
// enters the task's v1 cgroups, forks, and leaves them.
func spawn(cmd *exec.Cmd, cg *taskCgroup, newSession, ctty bool) error {
	newSession = newSession || ctty
	attr := &syscall.SysProcAttr{Setsid: newSession, Setpgid: !newSession, Setctty: ctty, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	if cg != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = cg.fd
	}
	cmd.SysProcAttr = attr
	res := make(chan error, 1)
	go func() { res <- spawnLocked(cmd, cg) }()
	return <-res
}

func spawnLocked(cmd *exec.Cmd, cg *taskCgroup) error {
	runtime.LockOSThread()
	if cg == nil || len(cg.v1) == 0 {
		defer runtime.UnlockOSThread()
		return contain.Call("bash spawn", cmd.Start)
	}
	tid := unix.Gettid()
	if tid == selfPid {
		// The main thread: in cgroup v1 its memory cgroup is where this whole
		// process's memory is charged, so it must never enter a task's. Fork from
		// another thread: while this goroutine holds the main thread, the new one
		// cannot run on it.
		defer runtime.UnlockOSThread()
		res := make(chan error, 1)
		go func() { res <- spawnLocked(cmd, cg) }()
		return <-res
	}
	home, err := cg.tree.spawnerHome()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("bash: reading this process's cgroups: %w", err)
	}
	// "0" names the writing thread: the kernel then moves it without the
	// process-wide lock it takes to move a thread named by its id.
	var entered []string
	leave := func() bool {
		ok := true
		for _, ctl := range entered {
			if home.leave(ctl) != nil {
				ok = false
			}
		}
		return ok
	}
	for ctl, dir := range cg.v1 {
		if _, known := home.dirs[ctl]; !known {
			err = fmt.Errorf("bash: this process's %s cgroup is unknown", ctl)
			break
		}
		if err = cg.enter(ctl, dir); err != nil {
			err = fmt.Errorf("bash: entering the task's %s cgroup: %w", ctl, err)
			break
		}
		entered = append(entered, ctl)
	}
	if err == nil {
		err = contain.Call("bash spawn", cmd.Start)
		if err == nil {
			err = cg.lowerAfterSpawn()
		}
	}
	if !leave() {
		// Exit locked: Go ends the thread, and with it (parent-death signal) the
		// leader it may have forked.
		return errors.Join(errThreadStuck, err)
	}
	runtime.UnlockOSThread()
	if err == nil {
		err = cg.afterSpawn()
	}
	return err
}

// spawnHome is where a spawning thread returns after a fork from inside a task's
// v1 cgroups: this process's v1 cgroups, read once per tree instead of the
// thread's own /proc file at every spawn.
type spawnHome struct {
	lay  layout
	dirs map[string]string // controller → this process's v1 directory
}

// spawnerHome returns this process's v1 cgroups, read once (from the main thread's
// view: every thread of this process lives there but while it forks a leader).
func (t *cgroupTree) spawnerHome() (*spawnHome, error) {
	t.homeOnce.Do(func() {
		dirs, err := threadCgroups(t.lay, "/proc/self/cgroup")
		if err != nil {
			t.homeErr = err
			return
		}
		t.home = &spawnHome{lay: t.lay, dirs: dirs}
	})
	return t.home, t.homeErr
}

// leave moves the calling thread back to this process's ctl cgroup; should the
// process have moved meanwhile, to where it is now.
func (h *spawnHome) leave(ctl string) error {
	if writeCtl(filepath.Join(h.dirs[ctl], "tasks"), "0") == nil {
		return nil
	}
	now, err := threadCgroups(h.lay, "/proc/self/cgroup")
	if err != nil {
		return err
	}
	dir, ok := now[ctl]
	if !ok {
		return fmt.Errorf("this process's %s cgroup is unknown", ctl)
	}
	return writeCtl(filepath.Join(dir, "tasks"), "0")
}

// enter moves the calling thread into the task's ctl cgroup dir (v1).
func (c *taskCgroup) enter(_, dir string) error {
	return writeCtl(filepath.Join(dir, "tasks"), "0")
}

// threadCgroups returns the directories in the v1 hierarchies of lay that the
// cgroup file path (/proc/self/cgroup, /proc/thread-self/cgroup) names.
func threadCgroups(lay layout, path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	home := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[0] == "0" {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			m, ok := lay.v1[ctl]
			if !ok {
				continue
			}
			if rel, ok := relTo(parts[2], m.root); ok {
				home[ctl] = filepath.Join(m.point, rel)
			}
		}
	}
	return home, nil
}

// scriptFile returns a sealed in-memory file holding command, for descriptor 3.
func scriptFile(command string) (*os.File, error) {
	fd, err := unix.MemfdCreate("taskrt-bash-command", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "taskrt-bash-command")
	if _, err := f.WriteString(command); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
