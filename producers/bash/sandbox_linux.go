//go:build linux

package bash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// settle is the containment's, but counts no leftovers: the moment the shell
// exits, bwrap (the leader) exits too, its death kills the sandbox's init
// (--die-with-parent), and the kernel kills every other process of the pid
// namespace with it. What the shell left behind is already dead or dying when
// settle looks, so how many there were is unknowable; the containment still
// waits until none is left and reaps what became this process's.
func (j *sandboxJail) settle(leader int) (int, error) {
	_, err := j.jail.settle(leader)
	return 0, err
}
