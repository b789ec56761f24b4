//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
)

// runs is how many times each crash scenario runs; above 1 the test logs the
// figures (p50, max) docs/remote.md gives: go test -run Crash -runs 10 -v.
var runs = flag.Int("runs", 1, "times each crash scenario runs (figures are logged)")

// The helper processes the tests run: this test binary re-executed.
const (
	workerHelperEnv = "TASKRT_TEST_WORKER_ARGS" // run taskrt-worker with these arguments (space-separated)
	ownerHelperEnv  = "TASKRT_TEST_OWNER"       // run an owner node: "URL LEASE N DIR MARKER"
)

func TestMain(m *testing.M) {
	if guarded() {
		os.Exit(0)
	}
	if args := os.Getenv(workerHelperEnv); args != "" {
		signals := make(chan os.Signal, 2)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr, signals))
	}
	if spec := os.Getenv(ownerHelperEnv); spec != "" {
		os.Exit(ownerHelper(spec))
	}
	goleak.VerifyTestMain(m)
}

// testLease is the lease of every node in these tests.
const testLease = 2 * time.Second

// ownerHelper is an owner node in a process of its own: it starts n commands
// (each records its start in DIR/run-I and prints "up"), says "started" once every
// one printed, and waits to be killed.
func ownerHelper(spec string) int {
	f := strings.Fields(spec)
	lease, _ := time.ParseDuration(f[1])
	n, _ := strconv.Atoi(f[2])
	nc, err := remote.Connect(f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := remote.New(nc, remote.WithLease(lease))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range n {
		h, err := p.Start(bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/run-%d; echo up; exec sleep 60`, f[3], i), Env: []string{f[4]}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		grew := make(chan struct{}, 1)
		h.Output.OnGrow(func() {
			select {
			case grew <- struct{}{}:
			default:
			}
		})
		for h.Output.Written() == 0 {
			<-grew
		}
	}
	fmt.Println("started")
	select {} // until SIGKILL
}

// marker is an environment entry unique to one test run; survivors finds the
// processes that carry it.
func marker(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "TASKRT_TEST_RUN=" + hex.EncodeToString(b[:])
}

// survivors lists the processes on this machine whose environment holds marker.
func survivors(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append([]byte{0}, env...), []byte("\x00"+marker+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupsOf lists the cgroup v2 directories a bash producer of process pid
// created (taskrt-<pid>-<start>) under this process's cgroup, where a child's go.
func cgroupsOf(t *testing.T, pid int) []string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	var rel string
	for _, line := range strings.Split(string(self), "\n") {
		if r, ok := strings.CutPrefix(line, "0::"); ok {
			rel = r
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var dirs []string
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "-"); i > 0 && i+1 < len(f) && f[i+1] == "cgroup2" {
			found, _ := filepath.Glob(filepath.Join(f[4], rel, fmt.Sprintf("taskrt-%d-*", pid)))
			dirs = append(dirs, found...)
		}
	}
	return dirs
}

// helper starts this test binary as a helper process with env set and returns it
// with its stdout, read line by line.
func helper(t *testing.T, env string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return cmd, bufio.NewScanner(out)
}

func newServer(t *testing.T) *remote.Server {
	t.Helper()
	srv, err := remote.StartServer(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// figures logs p50 and max of ds.
func figures(t *testing.T, what string, ds []time.Duration) {
	slices.Sort(ds)
	t.Logf("%s over %d runs: p50 %s, max %s, all %v", what, len(ds), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), ds)
}

func TestCrashOfAWorkerProcess(t *testing.T) {
	srv := newServer(t)
	nc, err := remote.Connect(srv.URL())
	require.NoError(t, err)
	defer nc.Close()
	p, err := remote.New(nc, remote.WithLease(testLease))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	var lost []time.Duration
	for i := range *runs {
		name := fmt.Sprintf("crash-%d", i)
		mark := marker(t)
		cmd, out := helper(t, fmt.Sprintf("%s=-nats %s -name %s -lease %s -dir %s", workerHelperEnv, srv.URL(), name, testLease, t.TempDir()))
		require.True(t, out.Scan(), "the worker's ready line")
		assert.Contains(t, out.Text(), "worker "+name+" ready")

		var hooks []messages.Hooks
		for range 3 {
			h, err := p.Start(bash.Command{Command: `echo up; sleep 60`, Env: []string{mark}})
			require.NoError(t, err)
			hooks = append(hooks, h)
		}
		for _, h := range hooks {
			waitOutput(h)
		}
		// A command's output can come while its bash execs sleep, when its
		// environment cannot be read for an instant: each is seen in turn.
		require.Eventually(t, func() bool { return len(survivors(mark)) == 3 }, time.Minute, 5*time.Millisecond,
			"each command runs on the worker")
		require.NotEmpty(t, cgroupsOf(t, cmd.Process.Pid), "the worker runs its commands in cgroups of its own")
		killed := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for _, h := range hooks {
			o := <-h.Done
			assert.Equal(t, messages.Outcome{Status: messages.Failed, Detail: "worker lost: " + name}, o)
		}
		d := time.Since(killed)
		lost = append(lost, d)
		assert.Less(t, d, testLease+testLease/4+testLease, "worker lost within the lease and a bounded margin")
		_ = cmd.Wait() // the worker's guard holds its stdout until it has killed what the worker left
		assert.Empty(t, survivors(mark), "no process of the dead worker's commands survives its guard")
		assert.Empty(t, cgroupsOf(t, cmd.Process.Pid), "the dead worker's cgroups are removed")
		for _, h := range hooks {
			h.Release()
		}
	}
	figures(t, "worker SIGKILL → worker lost", lost)
}

// waitOutput waits until h's output is not empty.
func waitOutput(h messages.Hooks) {
	grew := make(chan struct{}, 1)
	h.Output.OnGrow(func() {
		select {
		case grew <- struct{}{}:
		default:
		}
	})
	for h.Output.Written() == 0 {
		<-grew
	}
}

func TestCrashOfAnOwnerNodeProcess(t *testing.T) {
	srv := newServer(t)
	var workers []*remote.Worker
	for _, name := range []string{"w1", "w2"} {
		nc, err := remote.Connect(srv.URL())
		require.NoError(t, err)
		defer nc.Close()
		w, err := remote.NewWorker(nc, remote.WithName(name), remote.WithLease(testLease), remote.WithMaxTasks(2))
		require.NoError(t, err)
		defer func() { require.NoError(t, w.Close(context.Background())) }()
		workers = append(workers, w)
	}
	var gone []time.Duration
	for range *runs {
		mark, dir := marker(t), t.TempDir()
		cmd, out := helper(t, fmt.Sprintf("%s=%s %s 4 %s %s", ownerHelperEnv, srv.URL(), testLease, dir, mark))
		require.True(t, out.Scan(), "the owner node's started line")
		require.Equal(t, "started", out.Text())
		for _, w := range workers {
			require.Equal(t, 2, w.Live(), "the owner's commands are spread over both workers")
		}
		killed := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		for _, w := range workers {
			<-w.Drained()
		}
		d := time.Since(killed)
		gone = append(gone, d)
		grace := testLease / 4
		assert.Less(t, d, testLease+testLease/4+grace+testLease, "gone within the lease plus grace (and a bounded margin)")
		assert.Empty(t, survivors(mark))
		for i := range 4 {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", i)))
			require.NoError(t, err)
			assert.Len(t, strings.Fields(string(b)), 1, "command %d ran exactly once", i)
		}
	}
	for _, w := range workers {
		assert.Zero(t, w.Processes())
	}
	figures(t, "owner SIGKILL → last remote process gone", gone)
}

func TestSIGTERMKillsItsCommandsAndExits(t *testing.T) {
	srv := newServer(t)
	nc, err := remote.Connect(srv.URL())
	require.NoError(t, err)
	defer nc.Close()
	p, err := remote.New(nc, remote.WithLease(testLease))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	mark := marker(t)
	cmd, out := helper(t, fmt.Sprintf("%s=-nats %s -name term -lease %s", workerHelperEnv, srv.URL(), testLease))
	require.True(t, out.Scan())
	h, err := p.Start(bash.Command{Command: `echo up; sleep 60`, Env: []string{mark}})
	require.NoError(t, err)
	waitOutput(h)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	o := <-h.Done
	assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}, o, "the worker killed its command and told its owner")
	require.NoError(t, cmd.Wait(), "exit status 0")
	assert.Empty(t, survivors(mark))
	h.Release()
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-nats URL is required"},
		{[]string{"-nats", "nats://x", "-max-tasks", "0"}, "-max-tasks must be at least 1"},
		{[]string{"-nats", "nats://x", "-lease", "0s"}, "-lease must be positive"},
		{[]string{"-nats", "nats://x", "-orphan-grace", "-1s"}, "-orphan-grace must not be negative"},
		{[]string{"-nats", "nats://x", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr, nil)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}
