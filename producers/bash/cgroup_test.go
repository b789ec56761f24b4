//go:build linux

package bash

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

func TestContainmentIsChosenAtNew(t *testing.T) {
	notCgroup := t.TempDir()
	require.NoError(t, os.Chmod(notCgroup, 0o555))
	tests := []struct {
		name       string
		opts       []Option
		want       Containment
		wantDetail string
	}{
		{"a directory that is not a cgroup v2 hierarchy selects sweep mode",
			[]Option{WithCgroupRoot(notCgroup)}, SweepContainment, "is not a cgroup v2 directory"},
		{"a missing cgroup root selects sweep mode",
			[]Option{WithCgroupRoot(filepath.Join(notCgroup, "missing"))}, SweepContainment, "no such file or directory"},
		{"sweep mode can be forced", []Option{WithContainment(SweepContainment)}, SweepContainment, "forced"},
		{"a forced cgroup mode without cgroups says why", []Option{WithContainment(CgroupContainment), WithCgroupRoot(notCgroup)},
			CgroupContainment, "is not a cgroup v2 directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProducer(t, tc.opts...)
			assert.Equal(t, tc.want, p.Containment())
			assert.Contains(t, p.ContainmentDetail(), tc.wantDetail)
		})
	}
	t.Run("a writable cgroup v2 hierarchy selects cgroup mode", func(t *testing.T) {
		requireCgroups(t)
		p := newTestProducer(t)
		assert.Equal(t, CgroupContainment, p.Containment())
		assert.Regexp(t, `^a cgroup v2 per task under /.*/taskrt-\d+-\d+$`, p.ContainmentDetail())
	})
	t.Run("the modes print their names", func(t *testing.T) {
		assert.Equal(t, "cgroup", CgroupContainment.String())
		assert.Equal(t, "sweep", SweepContainment.String())
	})
	t.Run("a forced cgroup mode without cgroups starts nothing", func(t *testing.T) {
		p := newTestProducer(t, WithContainment(CgroupContainment), WithCgroupRoot(notCgroup))
		_, err := p.Start(Command{Command: "echo never"})
		require.ErrorIs(t, err, ErrCgroupUnavailable)
		assert.Zero(t, p.Live())
		assert.Empty(t, zombieChildren(t))
	})
}

// A cgroup named for a process that is gone (here: this pid with another start
// time, as after a crash and a pid reuse) is a leftover: New kills what runs in it,
// in every nested cgroup, and removes it, in cgroup v2 and in the v1 hierarchies.
func TestLeftoverCgroupsOfADeadProcessAreKilledAndRemoved(t *testing.T) {
	requireCgroups(t)
	tree := New(WithContainment(CgroupContainment)).tree
	dead := filepath.Join(tree.root, fmt.Sprintf("taskrt-%d-%d", selfPid, selfStart+1))
	nested := filepath.Join(dead, "task-1-1", "child")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	t.Cleanup(func() { _ = killCgroup(dead, 5*time.Second); _ = removeTree(dead) })
	var v1 string
	if base := tree.lay.v1Dir("pids"); base != "" {
		v1 = filepath.Join(base, filepath.Base(dead))
		require.NoError(t, os.MkdirAll(filepath.Join(v1, "task-1-1"), 0o755))
		t.Cleanup(func() { _ = removeTree(v1) })
	}
	alive := filepath.Join(tree.root, fmt.Sprintf("taskrt-%d-%d", selfPid, selfStart))

	fd, err := unix.Open(nested, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	require.NoError(t, cmd.Start())
	require.NoError(t, unix.Close(fd))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	New() // the next New of any process using this root
	select {
	case err := <-waited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the leftover process was killed")
	case <-time.After(settleLimit):
		_ = cmd.Process.Kill()
		<-waited
		t.Fatal("the process in the leftover cgroup still runs")
	}
	assert.NoDirExists(t, dead, "the leftover cgroup is removed")
	if v1 != "" {
		assert.NoDirExists(t, v1, "the leftover v1 cgroup is removed")
	}
	assert.DirExists(t, alive, "the cgroup of a live process is kept")
}

// limitTask starts c in cgroup mode and returns it with its cgroup.
func limitTask(t *testing.T, p *Producer, c Command) (*testTask, *taskCgroup) {
	t.Helper()
	h := startTask(t, p, c)
	j := h.task.jail
	if sj, ok := j.(*sandboxJail); ok {
		j = sj.jail
	}
	cg, ok := j.(*taskCgroup)
	require.True(t, ok, "a cgroup-mode task")
	return h, cg
}

// A fork bomb under a process limit cannot grow past it: forks fail, and the
// outcome says the limit was reached. (The bomb is also depth-bounded, 511
// processes at most, so that a broken limit cannot take the machine down.)
func TestProcessLimitStopsAForkBomb(t *testing.T) {
	requireCgroups(t)
	const limit = 40
	p := newTestProducer(t, WithContainment(CgroupContainment), WithGrace(200*time.Millisecond))
	h, cg := limitTask(t, p, Command{
		Command: `bomb() { if [ "$1" -lt 8 ]; then bomb $(($1+1)) & bomb $(($1+1)) & wait; else sleep 1000; fi; }; bomb 0 2>/dev/null`,
		Limits:  Limits{Processes: limit},
	})
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(settleLimit)
	for cg.limitHits().forksRefused == 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the bomb never reached the limit; %d processes", p.Live())
		}
	}
	assert.LessOrEqual(t, p.Live(), limit, "processes of the task at the limit")
	require.NoError(t, h.Cancel("enough"))
	o := h.awaitDone(t, settleLimit)
	assert.Equal(t, messages.Killed, o.Status)
	assert.Regexp(t, `^signal: SIG(TERM|KILL); process limit 40 reached \(\d+ forks? refused\)$`, o.Detail)
	requireQuiet(t, p)
}

// A command over its memory limit is ended by the OOM killer, and the outcome names
// the limit: the leader killed makes the task killed by the limit; a child killed
// leaves the leader to finish, with the limit named after its exit code.
func TestMemoryLimitStopsAHogAndNamesTheLimit(t *testing.T) {
	requireCgroups(t)
	tests := []struct {
		name       string
		command    string
		wantStatus messages.Status
		wantDetail string
		wantOutput string
	}{
		{
			name:       "the shell itself grows past the limit",
			command:    `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo survived`,
			wantStatus: messages.Killed,
			wantDetail: `^memory limit 32 MiB exceeded \((oom kill|\d+ oom kills)\)$`, // the subshell of $(…) may be killed first
		},
		{
			name: "a child grows past the limit",
			// The pipeline volunteers as the OOM killer's victim (oom_score_adj 1000,
			// which any process may raise for itself): without it, the kernel may pick
			// the shell for a second OOM kill while tail's memory is being reclaimed,
			// which happened under load twice in about 70 runs. The subshell volunteers
			// too, so a second kill may take it instead, and the pipeline it leaves is
			// killed at the settle and named (seen once, in a flake run).
			command:    `(echo 1000 >/proc/self/oom_score_adj; head -c 300000000 /dev/zero | tail -c 200000000 >/dev/null); echo "tail: $?"`,
			wantStatus: messages.Completed,
			wantDetail: `^exit code: 0; (killed (1 leftover process|\d+ leftover processes); )?memory limit 32 MiB exceeded \((oom kill|\d+ oom kills)\)$`,
			wantOutput: "tail: 137\n", // after bash's own report of the killed pipeline
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProducer(t, WithContainment(CgroupContainment), WithMemoryLimit(32<<20))
			h, _ := limitTask(t, p, Command{Command: tc.command})
			o := h.awaitDone(t, settleLimit)
			assert.Equal(t, tc.wantStatus, o.Status)
			assert.Regexp(t, tc.wantDetail, o.Detail)
			assert.True(t, strings.HasSuffix(h.ReadOutput(), tc.wantOutput), "the output ends with %q", tc.wantOutput)
			requireQuiet(t, p)
		})
	}
}

// A CPU limit throttles a busy loop: the kernel records throttled periods.
func TestCPULimitThrottlesABusyLoop(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment), WithCPULimit(0.1))
	h, cg := limitTask(t, p, Command{Command: "while :; do :; done"})
	stat := filepath.Join(cg.dir, "cpu.stat")
	if dir, ok := cg.v1["cpu"]; ok {
		stat = filepath.Join(dir, "cpu.stat")
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(settleLimit)
	for {
		b, err := os.ReadFile(stat)
		require.NoError(t, err)
		if n, _ := keyedValue(b, "nr_throttled"); n > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("never throttled: %s", b)
		}
	}
	require.NoError(t, h.Cancel("enough"))
	assert.Equal(t, "signal: SIGTERM", h.awaitDone(t, settleLimit).Detail)
	requireQuiet(t, p)
}

// A Command's limits override the producer's defaults field by field.
func TestCommandLimitsOverrideTheDefaults(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment), WithMaxProcesses(100), WithMemoryLimit(1<<30))
	tests := []struct {
		name          string
		limits        Limits
		wantProcesses int
		wantMemory    int64
	}{
		{"no override keeps the defaults", Limits{}, 100, 1 << 30},
		{"an override replaces its field only", Limits{Processes: 7}, 7, 1 << 30},
		{"a memory limit below the minimum is raised to it", Limits{Memory: 1}, 100, minMemoryLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, cg := limitTask(t, p, Command{Command: "echo ready; sleep 1000", Limits: tc.limits})
			readUntil(t, h, "ready", settleLimit)
			pids, mem := filepath.Join(cg.dir, "pids.max"), filepath.Join(cg.dir, "memory.max")
			if dir, ok := cg.v1["pids"]; ok {
				pids = filepath.Join(dir, "pids.max")
			}
			if dir, ok := cg.v1["memory"]; ok {
				mem = filepath.Join(dir, "memory.limit_in_bytes")
			}
			assert.Equal(t, strconv.Itoa(tc.wantProcesses), readTrimmed(t, pids))
			assert.Equal(t, strconv.FormatInt(tc.wantMemory, 10), readTrimmed(t, mem))
			require.NoError(t, h.Cancel("done"))
			h.awaitDone(t, settleLimit)
			requireQuiet(t, p)
		})
	}
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// Asking for a limit where it cannot be enforced fails the start, and nothing runs.
func TestLimitsWithoutCgroupsFailTheStart(t *testing.T) {
	tests := []struct {
		name string
		p    *Producer
		c    Command
		want string
	}{
		{"a producer default", New(WithContainment(SweepContainment), WithMemoryLimit(64<<20)),
			Command{Command: "echo never"}, "memory limits need cgroup containment"},
		{"a command's own limit", New(WithContainment(SweepContainment)),
			Command{Command: "echo never", Limits: Limits{Processes: 5, CPU: 1}}, "processes, cpu limits need cgroup containment"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Start(tc.c)
			require.ErrorIs(t, err, ErrLimitsUnavailable)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
			assert.Zero(t, tc.p.Live())
			assert.Empty(t, zombieChildren(t))
		})
	}
}

func init() {
	// host: a program embedding a producer (mode from HOST_MODE) that starts a
	// task which leaves processes behind, prints the pids, and waits to be killed.
	testHelpers["host"] = func() {
		mode := SweepContainment
		if os.Getenv("HOST_MODE") == "cgroup" {
			mode = CgroupContainment
		}
		if dir := os.Getenv("HOST_V1_PIDS"); dir != "" {
			// Into a pids v1 cgroup of the test's own before New reads where this
			// process is: the pids twins go under it (see TestHostDeath).
			if err := writeCtl(filepath.Join(dir, "cgroup.procs"), "0"); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		p := New(WithContainment(mode), WithOutput(output.WithSpillDir(os.TempDir())), WithCgroupRoot(os.Getenv("HOST_CGROUP_ROOT")), testSandbox())
		h, err := p.Start(Command{Command: os.Getenv("HOST_COMMAND")})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		var out string
		for !strings.Contains(out, "\n") {
			out += h.ReadOutput()
			pause(time.Millisecond)
		}
		fmt.Print(out)
		select {}
	}
}

// When the host process dies from SIGKILL, its task's leader dies with it (the
// parent-death signal); what the leader started survives: for good in sweep mode
// (the documented limit), until the next New in cgroup mode, which kills it and
// removes the cgroup. This pins what docs/bash.md says about host death. The test
// process is a child subreaper, so the dead host's orphans become its children,
// which it reaps, reading how they died. In cgroup mode the host uses a cgroup root
// of the test's own: under the shared one, the New of any other process on the
// machine (another test binary) could kill the survivors before the test looks.
// Where a pids v1 hierarchy counts the tasks (a hybrid mount), the host runs in a
// pids v1 cgroup of the test's own as well: its tasks' twins live under the host's
// v1 cgroup, and in the shared one the next New of any process would kill the
// survivors through them (it failed so 4 times in 30 runs of a loaded make flake).
func TestHostDeath(t *testing.T) {
	require.NoError(t, enableSubreaper())
	forEachMode(t, func(t *testing.T, mode Option) {
		containment := New(mode).Containment()
		var root, v1 string // the host's cgroup root, and its pids v1 cgroup ("" for none)
		if containment == CgroupContainment {
			name := fmt.Sprintf("hostdeath-%d-%d", selfPid, sleeps.Add(1))
			root = filepath.Join(New(mode).tree.root, name)
			require.NoError(t, os.Mkdir(root, 0o755))
			t.Cleanup(func() { assert.NoError(t, removeTree(root)) })
			lay, err := discover()
			require.NoError(t, err)
			if d := lay.v1Dir("pids"); d != "" {
				v1 = filepath.Join(d, name)
				require.NoError(t, os.Mkdir(v1, 0o755))
				t.Cleanup(func() { assert.NoError(t, removeTree(v1)) })
			}
		}
		exe, err := os.Executable()
		require.NoError(t, err)
		bg, escaped := uniqueSleep(), uniqueSleep()
		host := exec.Command(exe)
		host.Env = append(os.Environ(), helperEnv+"=host", "HOST_MODE="+containment.String(), "HOST_CGROUP_ROOT="+root, "HOST_V1_PIDS="+v1,
			"HOST_COMMAND="+bg+" & setsid "+escaped+" & echo leader $$; wait")
		out, err := host.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, host.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		var leader int
		_, err = fmt.Sscanf(line, "leader %d", &leader)
		require.NoError(t, err, "the host's task printed its pid: %q", line)
		pids := awaitRunning(t, bg, escaped)

		require.NoError(t, host.Process.Kill())
		require.Error(t, host.Wait())
		assert.Equal(t, syscall.SIGKILL, reap(t, leader), "the leader died of its parent-death signal")

		for _, cmd := range []string{bg, escaped} {
			assert.Len(t, processesRunning(t, cmd), 1, "%q survives the host", cmd)
		}
		if containment == SweepContainment {
			for _, pid := range pids {
				require.NoError(t, unix.Kill(pid, unix.SIGKILL))
				reap(t, pid)
			}
			return
		}
		leftover := filepath.Join(root, fmt.Sprintf("taskrt-%d-", host.Process.Pid))
		New(mode, WithCgroupRoot(root)) // the next New of any process using that root: kills them
		for _, pid := range pids {
			assert.Equal(t, syscall.SIGKILL, reap(t, pid), "killed by the next New")
		}
		matches, err := filepath.Glob(leftover + "*")
		require.NoError(t, err)
		assert.Empty(t, matches, "the dead host's cgroup is removed")
	})
}

// reap waits for pid, a child of this process (an orphan re-parented to it), and
// returns the signal that ended it.
func reap(t *testing.T, pid int) syscall.Signal {
	t.Helper()
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err, "reaping %d", pid)
		return ws.Signal()
	}
}

// awaitRunning waits until each command runs in exactly one process and returns
// their pids.
func awaitRunning(t *testing.T, commands ...string) []int {
	t.Helper()
	var pids []int
	pollProcesses(t, fmt.Sprintf("%v are not all running", commands), func() bool {
		pids = pids[:0]
		for _, c := range commands {
			if p := processesRunning(t, c); len(p) == 1 {
				pids = append(pids, p[0])
			}
		}
		return len(pids) == len(commands)
	})
	return pids
}

// One /proc scan serves every sweep waiting when it starts: with the loop held
// before its first scan, the sweeps that queue meanwhile are all served by the
// second.
func TestOneScanServesEverySweepWaitingForIt(t *testing.T) {
	const n = 20
	entered, hold := make(chan struct{}), make(chan struct{})
	var rounds []int
	testHookBeforeScan = func(waiting int) {
		rounds = append(rounds, waiting) // the loop goroutine only
		if len(rounds) == 1 {
			close(entered)
			<-hold
		}
	}
	queued := make(chan struct{}, n)
	testHookQueued = func() { queued <- struct{}{} }
	t.Cleanup(func() { testHookBeforeScan, testHookQueued = nil, nil })

	var wg sync.WaitGroup
	sweep := func(i int) {
		// Pids above the kernel's pid_max: nothing matches, one round finishes it.
		killed, err := sweeps.run(1<<23+i, fmt.Sprintf("fake.%d", i), true, slog.New(slog.DiscardHandler))
		assert.NoError(t, err)
		assert.Zero(t, killed)
	}
	wg.Go(func() { sweep(0) })
	<-queued
	<-entered
	for i := 1; i < n; i++ {
		wg.Go(func() { sweep(i) })
		<-queued
	}
	close(hold)
	wg.Wait()
	assert.Equal(t, []int{1, n - 1}, rounds, "sweeps per round")
}
