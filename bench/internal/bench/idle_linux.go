package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// IdleChildren starts n idle processes as children of this process: a holder shell
// starts n `sleep`s and exits, so that (this process being a child subreaper, as
// the bash producer makes it) they are re-parented to this process's main thread,
// where the orphans of bash tasks arrive too. This is what a long-lived host looks
// like: the leftovers of other code and its own helpers among its children. stop
// kills them and reaps each by pid.
func IdleChildren(ctx context.Context, n int) (stop func() error, err error) {
	if n <= 0 {
		return func() error { return nil }, nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	script := fmt.Sprintf(`for i in $(seq 1 %d); do sleep 100000 </dev/null >/dev/null 2>&1 & echo $!; done`, n)
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", script)
	cmd.Env = append(os.Environ(), "TASKRT_BASH_TASK=") // not a task's
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("starting %d idle children: %w", n, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("starting %d idle children: %q", n, f)
		}
		pids = append(pids, pid)
	}
	if len(pids) != n {
		return nil, fmt.Errorf("starting %d idle children: %d started", n, len(pids))
	}
	return func() error {
		var errs []error
		for _, pid := range pids {
			errs = append(errs, syscall.Kill(pid, syscall.SIGKILL))
		}
		for _, pid := range pids {
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if err != syscall.EINTR {
					errs = append(errs, err)
					break
				}
			}
		}
		return errors.Join(errs...)
	}, nil
}
