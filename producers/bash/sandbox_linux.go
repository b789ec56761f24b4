//go:build linux

package bash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// probeTimeout bounds the availability check's sandboxed run.
const probeTimeout = 10 * time.Second

// probeSandbox checks that bwrap runs here and can build the sandbox (its
// namespaces, mounts and setsid inside) by running the shell in one, the way a
// command runs, and returns the resolved paths of bwrap and setsid.
func probeSandbox(bwrap, shell string) (path, setsid string, err error) {
	if path, err = exec.LookPath(bwrap); err != nil {
		return "", "", fmt.Errorf("no bubblewrap: %w", err)
	}
	if setsid, err = exec.LookPath("setsid"); err != nil {
		return "", "", fmt.Errorf("no setsid (util-linux), which runs the shell in a session of its own inside the sandbox: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	// bwrap reports its child, the sandbox's init, on descriptor 3: bwrap exits as
	// soon as the shell has, and the init, exiting just after, may become a child of
	// this process (a subreaper), which must reap it.
	info, infoW, err := os.Pipe()
	if err != nil {
		return "", "", err
	}
	defer info.Close()
	args := append(bwrapArgs(Sandbox{Mode: SandboxReadOnly}, "/", nil, nil), "--info-fd", "3")
	plan := &sandboxPlan{args: args, setsid: setsid}
	name, argv := plan.command(path, shell, []string{"-c", "echo sandboxed"}, false)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = &out, &out, []*os.File{infoW}
	err = cmd.Start()
	infoW.Close()
	if err == nil {
		var child struct {
			Pid int `json:"child-pid"`
		}
		if json.NewDecoder(info).Decode(&child) == nil && child.Pid > 0 {
			defer reapProbeInit(child.Pid)
		}
		err = cmd.Wait()
	}
	if err != nil || out.String() != "sandboxed\n" {
		first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		if first == "" && err != nil {
			first = err.Error()
		}
		return "", "", fmt.Errorf("%s cannot build a sandbox here: %s", path, first)
	}
	return path, setsid, nil
}

// terminate: see sandboxJail.
func (j *sandboxJail) terminate(leader int) error {
	if j.cg != nil {
		return signalAllBut(leader, syscall.SIGTERM, func() []int { return readPids(j.cg.dir + "/cgroup.procs") })
	}
	return signalAllBut(leader, syscall.SIGTERM, func() []int { return descendants(leader) })
}

// signalAllBut sends sig to every process list returns but leader. A pid is
// signalled through a pidfd, and only if a second call to list, after the pidfd
// was opened, still returns it: a process that exited in between and whose pid
// was reused elsewhere is never hit.
func signalAllBut(leader int, sig syscall.Signal, list func() []int) error {
	fds := map[int]int{}
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	for _, pid := range list() {
		if pid == leader {
			continue
		}
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	if len(fds) == 0 {
		return nil
	}
	var err error
	for _, pid := range list() {
		if fd, ok := fds[pid]; ok {
			err = errors.Join(err, ignoreGone(unix.PidfdSendSignal(fd, sig, nil, 0)))
		}
	}
	return err
}

// descendants lists the live descendants of pid, from one scan of /proc. In a
// sandbox (a pid namespace of its own) they are every process of the sandbox:
// orphans there are re-parented to the sandbox's init, a child of the leader.
func descendants(pid int) []int {
	procs, err := scanProcs()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range procs {
		if !p.zombie {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// reapProbeInit waits for pid if it is (or becomes, as an orphan of an exited child)
// a child of this process; it returns at once when it is not.
func reapProbeInit(pid int) {
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// settle is the containment's, then waits for the sandbox's init to be gone
// (awaitInit), and counts no leftovers: the moment the shell exits, bwrap (the
// leader) exits too, its death kills the sandbox's init (--die-with-parent), and
// the kernel kills every other process of the pid namespace with it. What the
// shell left behind is already dead or dying when settle looks, so how many there
// were is unknowable.
func (j *sandboxJail) settle(leader int) (int, error) {
	_, err := j.jail.settle(leader)
	return 0, errors.Join(err, j.awaitInit())
}

// attach gives cmd (bwrap, not yet started) a pipe as its last extra descriptor and
// asks bwrap to report its child, the sandbox's init, there (--info-fd).
func (j *sandboxJail) attach(cmd *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("bash: a pipe for bwrap's report: %w", err)
	}
	j.info, j.infoW = r, w
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	fd := strconv.Itoa(2 + len(cmd.ExtraFiles))
	for i, a := range cmd.Args {
		if a == "--" { // the end of bwrap's options: paths before it are absolute
			cmd.Args = append(cmd.Args[:i:i], append([]string{"--info-fd", fd}, cmd.Args[i:]...)...)
			return nil
		}
	}
	return errors.New("bash: no end of bwrap's options") // unreachable: sandboxPlan.command adds it
}

// started reads the sandbox init's pid from bwrap's report, right after bwrap has
// been spawned (ok) or failed to be, and keeps a pidfd on it for settle: the
// kernel kills the sandbox's processes when its init exits, but that init is the
// last to finish exiting (it waits for the others), after the task's cgroup is
// already empty. Without the report (bwrap failed before cloning) settle does not
// wait for it.
func (j *sandboxJail) started(ok bool, log *slog.Logger) {
	defer func() {
		j.info.Close()
		j.info = nil
	}()
	j.infoW.Close()
	j.infoW = nil
	if !ok {
		return
	}
	_ = j.info.SetReadDeadline(time.Now().Add(sweepTimeout))
	var report struct {
		Pid int `json:"child-pid"`
	}
	if err := json.NewDecoder(j.info).Decode(&report); err != nil || report.Pid <= 0 {
		log.Warn("bash: no report of the sandbox's init from bwrap", "err", err)
		return
	}
	fd, err := unix.PidfdOpen(report.Pid, 0)
	if err != nil {
		log.Warn("bash: a pidfd on the sandbox's init", "pid", report.Pid, "err", err)
		return
	}
	j.initFD = fd
}

// awaitInit waits until the sandbox's init has exited, and with it every process
// of the sandbox, then reaps it if it became this process's child (as a
// subreaper's orphan) and nothing reaped it yet.
func (j *sandboxJail) awaitInit() error {
	if j.initFD < 0 {
		return nil
	}
	defer func() {
		_ = unix.Close(j.initFD)
		j.initFD = -1
	}()
	deadline := time.Now().Add(sweepTimeout)
	for {
		pfd := []unix.PollFd{{Fd: int32(j.initFD), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(max(time.Until(deadline).Milliseconds(), 0)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the sandbox's init: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("the sandbox's init did not exit within %s", sweepTimeout)
		}
		break
	}
	var info unix.Siginfo
	_ = unix.Waitid(unix.P_PIDFD, j.initFD, &info, unix.WEXITED|unix.WNOHANG, nil) // ECHILD: not ours, or reaped
	return nil
}

// release closes what settle did not (a lifecycle that failed before it), then
// releases the containment's jail.
func (j *sandboxJail) release() error {
	if j.initFD >= 0 {
		_ = unix.Close(j.initFD)
		j.initFD = -1
	}
	return j.jail.release()
}
