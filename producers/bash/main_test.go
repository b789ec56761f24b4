//go:build linux

package bash

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/internal/outputtest"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

func TestMain(m *testing.M) {
	if helper, ok := testHelpers[os.Getenv(helperEnv)]; ok {
		helper()
		os.Exit(0)
	}
	goleak.VerifyTestMain(survivorCheck{m})
}

// helperEnv names the helper a re-executed test binary runs instead of the tests
// (see testHelpers).
const helperEnv = "TASKRT_BASH_TEST_HELPER"

// testHelpers are programs the tests run as processes: the test binary re-executed
// with helperEnv set to a name. Filled by init functions of the test files.
var testHelpers = map[string]func(){}

// survivorCheck fails a passing run when any process started by this test process
// still carries a marker or sits in one of its task cgroups at the end, or when a
// task cgroup is left: an escape or a leak that a test did not catch.
type survivorCheck struct{ m *testing.M }

func (s survivorCheck) Run() int {
	code := s.m.Run()
	if code != 0 {
		return code
	}
	if n := liveProcesses(); n > 0 {
		fmt.Fprintf(os.Stderr, "survivors: %d processes started by this test run are still running\n", n)
		return 1
	}
	// The producers' pools keep empty cgroups for their next tasks: every one must
	// be removable (nothing lives in it), and then no task cgroup may be left.
	for _, pool := range pools.all() {
		if err := pool.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pooled task cgroups could not be removed: %v\n", err)
			return 1
		}
	}
	for _, tree := range allTrees() {
		if dirs := tree.taskDirs("task-"); len(dirs) > 0 {
			fmt.Fprintf(os.Stderr, "leftover task cgroups: %v\n", dirs)
			return 1
		}
	}
	return code
}

// newTestProducer is a producer whose spill files go to a per-test directory, in
// the containment mode detected here.
func newTestProducer(t testing.TB, opts ...Option) *Producer {
	t.Helper()
	return New(append([]Option{WithOutput(output.WithSpillDir(t.TempDir())), testSandbox()}, opts...)...)
}

// forEachMode runs f as a subtest per containment mode, "mode=cgroup" and
// "mode=sweep", with the options that force that mode. The cgroup subtest is
// skipped, saying why, only where cgroup containment cannot work.
func forEachMode(t *testing.T, f func(t *testing.T, mode Option)) {
	t.Helper()
	for _, c := range []Containment{CgroupContainment, SweepContainment} {
		t.Run("mode="+c.String(), func(t *testing.T) {
			if c == CgroupContainment {
				requireCgroups(t)
			}
			f(t, WithContainment(c))
		})
	}
}

// requireCgroups skips t when this machine cannot run cgroup containment.
func requireCgroups(t testing.TB) {
	t.Helper()
	if p := New(WithContainment(CgroupContainment)); p.startErr != nil {
		t.Skipf("cgroup containment is not available here: %v", p.startErr)
	}
}

// testTask is a started task that the test's cleanup settles and releases.
type testTask struct {
	messages.Hooks
	task    *task
	settled bool // Done was received
}

// startTask starts c and makes sure it is settled and released when the test ends,
// whatever happened.
func startTask(t testing.TB, p *Producer, c Command) *testTask {
	t.Helper()
	tk, err := p.start(c)
	require.NoError(t, err)
	h := tk.hooks()
	tt := &testTask{Hooks: h, task: tk}
	t.Cleanup(func() {
		if !tt.settled {
			require.NoError(t, h.Cancel("test cleanup"))
			select {
			case <-h.Done:
			case <-time.After(30 * time.Second):
				t.Errorf("task did not settle after the cleanup's cancel")
			}
		}
		h.Release()
	})
	return tt
}

// awaitDone waits for the task to settle, failing after limit.
func (tt *testTask) awaitDone(t testing.TB, limit time.Duration) messages.Outcome {
	t.Helper()
	select {
	case o, ok := <-tt.Done:
		tt.settled = true
		require.True(t, ok, "Done closed without an Outcome")
		return o
	case <-time.After(limit):
		t.Fatalf("task did not settle within %s", limit)
		return messages.Outcome{}
	}
}

// readUntil reads the task's output until it contains want, returning everything
// read. It polls the buffer on a short ticker, bounded by limit.
func readUntil(t testing.TB, h *testTask, want string, limit time.Duration) string {
	t.Helper()
	var got bytes.Buffer
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		got.WriteString(h.ReadOutput())
		if bytes.Contains(got.Bytes(), []byte(want)) {
			return got.String()
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("output never contained %q within %s; got %q", want, limit, got.String())
		}
	}
}

// zombieChildren lists zombies whose parent is this test process.
func zombieChildren(t testing.TB) []string {
	t.Helper()
	procs, err := scanProcs()
	require.NoError(t, err)
	var z []string
	for _, p := range procs {
		if p.zombie && p.ppid == selfPid {
			// Enough to tell which of a task's processes it was.
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.pid))
			z = append(z, fmt.Sprintf("%d (%s) pgrp %d sid %d started %d", p.pid, strings.TrimSpace(string(comm)), p.pgrp, p.sid, p.start))
		}
	}
	return z
}

// requireQuiet asserts that p has no live process (by marker, and in cgroup mode
// in its task cgroups), that this process has no zombie children, and that no task
// cgroup of p is left.
func requireQuiet(t testing.TB, p *Producer) {
	t.Helper()
	require.Zero(t, p.Live(), "live processes of this producer's tasks")
	require.Empty(t, zombieChildren(t), "zombie children of the test process")
	require.Empty(t, taskCgroups(p), "task cgroups left (but for the pool's empty ones)")
	parked := pooledCgroups(p)
	require.LessOrEqual(t, len(parked), poolMax, "empty cgroups kept by the pool")
	for _, dir := range parked {
		require.Equal(t, 0, populated(dir), "a pooled cgroup holds a process: %s", dir)
	}
}

// taskCgroups lists p's task cgroups that still exist, in cgroup v2 and v1, but
// for the empty ones its pool keeps for its next tasks (see pooledCgroups).
func taskCgroups(p *Producer) []string {
	if p.tree == nil {
		return nil
	}
	parked := map[string]bool{}
	for _, dir := range pooledCgroups(p) {
		parked[filepath.Base(dir)] = true
	}
	var left []string
	for _, dir := range p.tree.taskDirs(p.taskDirPrefix()) {
		if !parked[filepath.Base(dir)] {
			left = append(left, dir)
		}
	}
	return left
}

// pooledCgroups lists the cgroup v2 directories p's pool keeps for its next tasks.
func pooledCgroups(p *Producer) []string {
	if p.pool == nil {
		return nil
	}
	return p.pool.parkedDirs()
}

// account checks one read result against the stream it came from (see
// outputtest.Account).
func account(t testing.TB, from int64, s string, source func(off int64) byte) (end, leftOut int64) {
	t.Helper()
	return outputtest.Account(t, from, s, source)
}
