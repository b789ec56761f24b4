//go:build linux

package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

const settleLimit = 20 * time.Second // failure bound only; tasks settle in milliseconds

func TestCommandsCompleteWithTheirExitStatus(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		wantOutput string
		wantStatus messages.Status
		wantDetail string
	}{
		{"echo completes with exit code 0", "echo hello", "hello\n", messages.Completed, "exit code: 0"},
		{"a non-zero exit is completed with its code", "echo bye; exit 3", "bye\n", messages.Completed, "exit code: 3"},
		{"stdout and stderr are merged in order", "echo out; echo err >&2; echo out2", "out\nerr\nout2\n", messages.Completed, "exit code: 0"},
		{"stdin is empty", "cat; echo eof", "eof\n", messages.Completed, "exit code: 0"},
		{"a signal we did not send is reported as killed by it", "kill -USR1 $$", "", messages.Killed, "signal: SIGUSR1"},
		{"SIGINT from elsewhere is reported by name", "kill -INT $$", "", messages.Killed, "signal: SIGINT"},
		{"a multi-line script runs whole", "x=4\necho $((x*2))", "8\n", messages.Completed, "exit code: 0"},
	}
	p := newTestProducer(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startTask(t, p, Command{Command: tc.command})
			o := h.awaitDone(t, settleLimit)
			assert.Equal(t, tc.wantStatus, o.Status)
			assert.Equal(t, tc.wantDetail, o.Detail)
			assert.Equal(t, tc.wantOutput, h.ReadOutput())
			assert.Empty(t, h.ReadOutput(), "reads consume")
		})
	}
	requireQuiet(t, p)
}

func TestStartFailuresCreateNothing(t *testing.T) {
	tests := []struct {
		name string
		p    *Producer
		c    Command
		want string
	}{
		{"a missing working directory fails the start", New(), Command{Command: "true", Dir: "/nonexistent/dir"}, "bash: working directory: stat /nonexistent/dir: no such file or directory"},
		{"a shell that cannot run fails the start", New(WithShell("/nonexistent/bash")), Command{Command: "true"}, "no such file or directory"},
		{"a blank command fails the start", New(), Command{Command: "  \n"}, errEmptyCommand.Error()},
		{"a malformed environment entry fails the start", New(), Command{Command: "true", Env: []string{"NOEQUALS"}}, "malformed environment entry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := tc.p.Start(tc.c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, h.Done)
			assert.Zero(t, tc.p.Live())
			assert.Empty(t, zombieChildren(t))
		})
	}
}

// A command has no controlling terminal and its own process group, in both modes:
// `sudo` or `ssh` asking for a password fail at once instead of reading the
// harness's terminal.
func TestCommandsHaveNoTerminalAndTheirOwnProcessGroup(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode)
		h := startTask(t, p, Command{Command: `{ exec 3</dev/tty && echo tty; } 2>/dev/null || echo no tty; [ "$(ps -o pgid= $$)" -eq $$ ] && echo own group`})
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Equal(t, "no tty\nown group\n", h.ReadOutput())
		requireQuiet(t, p)
	})
}

func TestWorkingDirectoryAndEnvironment(t *testing.T) {
	p := newTestProducer(t)
	dir := t.TempDir()
	h := startTask(t, p, Command{
		Command: `pwd; echo "$FOO"; echo "$HOME"; test -n "$TASKRT_BASH_TASK" && echo marked`,
		Dir:     dir,
		Env:     []string{"FOO=bar baz", "HOME=/custom/home"},
	})
	o := h.awaitDone(t, settleLimit)
	require.Equal(t, "exit code: 0", o.Detail)
	assert.Equal(t, dir+"\nbar baz\n/custom/home\nmarked\n", h.ReadOutput())
}

// The command prints in bursts gated by a FIFO the test writes to, so reads
// interleave with writes: the concatenated reads must equal the whole output.
func TestIncrementalReadsConcatenateToTheFullOutput(t *testing.T) {
	p := newTestProducer(t)
	fifo := filepath.Join(t.TempDir(), "gate")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	const bursts = 20
	script := fmt.Sprintf(`exec 3<>%q
for i in $(seq 1 %d); do
  for j in $(seq 1 50); do printf 'burst %%d line %%d é€😀 %%s\n' $i $j xxxxxxxxxxxxxxxx; done
  echo "end $i"
  read -r _ <&3
done`, fifo, bursts)
	var want strings.Builder
	for i := 1; i <= bursts; i++ {
		for j := 1; j <= 50; j++ {
			fmt.Fprintf(&want, "burst %d line %d é€😀 %s\n", i, j, "xxxxxxxxxxxxxxxx")
		}
		fmt.Fprintf(&want, "end %d\n", i)
	}

	h := startTask(t, p, Command{Command: script})
	gate, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer gate.Close()
	var got strings.Builder
	for i := 1; i <= bursts; i++ {
		got.WriteString(readUntil(t, h, fmt.Sprintf("end %d\n", i), settleLimit))
		_, err := gate.WriteString("go\n")
		require.NoError(t, err)
	}
	o := h.awaitDone(t, settleLimit)
	got.WriteString(h.ReadOutput())
	require.Equal(t, "exit code: 0", o.Detail)
	require.Equal(t, want.String(), got.String())
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		grace      time.Duration
		wantDetail string
		minLatency time.Duration
		maxLatency time.Duration
	}{
		{
			name:       "a cooperative command settles promptly on SIGTERM",
			command:    "echo ready; sleep 1000",
			grace:      30 * time.Second,
			wantDetail: "signal: SIGTERM",
			maxLatency: 5 * time.Second,
		},
		{
			name:       "a compound cooperative command settles promptly on SIGTERM",
			command:    "echo ready; sleep 1000; echo after",
			grace:      30 * time.Second,
			wantDetail: "signal: SIGTERM",
			maxLatency: 5 * time.Second,
		},
		{
			name:       "a sigterm-ignoring command is killed by SIGKILL after grace",
			command:    "trap '' TERM; echo ready; sleep 1000",
			grace:      300 * time.Millisecond,
			wantDetail: "signal: SIGKILL",
			minLatency: 300 * time.Millisecond,
			maxLatency: 10 * time.Second,
		},
		{
			name:       "a command that traps SIGTERM and exits is still reported killed",
			command:    "trap 'exit 0' TERM; echo ready; while :; do sleep 0.01; done",
			grace:      30 * time.Second,
			wantDetail: "signal: SIGTERM",
			maxLatency: 5 * time.Second,
		},
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := newTestProducer(t, mode, WithGrace(tc.grace))
				h := startTask(t, p, Command{Command: tc.command})
				readUntil(t, h, "ready", settleLimit)
				begin := time.Now()
				require.NoError(t, h.Cancel("user asked"))
				require.NoError(t, h.Cancel("again"), "cancel is idempotent")
				o := h.awaitDone(t, settleLimit)
				latency := time.Since(begin)
				t.Logf("kill-to-settled: %s", latency)
				assert.Equal(t, messages.Killed, o.Status)
				assert.Equal(t, tc.wantDetail, o.Detail)
				assert.GreaterOrEqual(t, latency, tc.minLatency)
				assert.Less(t, latency, tc.maxLatency)
				require.NoError(t, h.Cancel("after settlement"), "cancel after Done is harmless")
				requireQuiet(t, p)
			})
		}
	})
}

func TestCancelDoesNotBlock(t *testing.T) {
	p := newTestProducer(t, WithGrace(200*time.Millisecond))
	h := startTask(t, p, Command{Command: "trap '' TERM; echo ready; sleep 1000"})
	readUntil(t, h, "ready", settleLimit)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for range 100 {
			_ = h.Cancel("flood")
		}
	}()
	select {
	case <-returned:
	case <-h.Done:
		t.Fatal("task settled before 100 cancels returned: cancel waited for the kill")
	}
	assert.Equal(t, "signal: SIGKILL", h.awaitDone(t, settleLimit).Detail)
}

// Each escape leaves a process behind; whether the command completes, is killed or
// its owner is disposed (cancel, then release), nothing of it may survive and no
// zombie may remain. The escaped processes run `sleep` with a duration unique to
// the subtest, so that survivors are found by their command line, whether they
// carry a marker or not. The hidden escapes (a cleared environment and a new
// session) are contained in cgroup mode only; TestSweepModeCannotSeeHiddenEscapes
// pins what sweep mode leaves of them. So are the escapes that die unseen (a new
// session, dead before sweep mode's first scan), whose zombies sweep mode leaves.
func TestNoSurvivors(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		sweep := New(mode).Containment() == SweepContainment
		for _, e := range noSurvivorEscapes {
			for _, end := range noSurvivorEndings {
				if (e.hidden || e.unseenDead) && sweep {
					continue
				}
				t.Run(e.name+" leaves nothing "+end.name, func(t *testing.T) {
					p := newTestProducer(t, mode, WithGrace(500*time.Millisecond))
					sleep := uniqueSleep()
					h := startTask(t, p, Command{Command: strings.ReplaceAll(e.spawn, "SLEEP", sleep) + end.suffix})
					if sweep && end.signals {
						awaitEscaped(t, e.spawn, sleep)
					}
					end.end(t, h)
					o := h.awaitDone(t, settleLimit)
					end.check(t, o)
					h.Release()
					requireQuiet(t, p)
					require.Empty(t, processesRunning(t, sleep), "processes running %q", sleep)
				})
			}
		}
	})
}

var noSurvivorEscapes = []struct {
	name, spawn string
	hidden      bool // no marker and a new session: invisible to sweep mode
	// unseenDead: a new session and dead before a scan saw it alive, so sweep mode
	// leaves its zombie (the gap producers/bash/doc.go names); cgroup mode only.
	unseenDead bool
}{
	{"background job", "SLEEP &", false, false},
	{"setsid", "setsid SLEEP &", false, false},
	{"setsid with output closed", "setsid SLEEP </dev/null >/dev/null 2>&1 &", false, false},
	{"double fork", "( (SLEEP &) & )", false, false},
	{"nohup", "nohup SLEEP >/dev/null 2>&1 &", false, false},
	{"sigterm-ignoring child", "(trap '' TERM; SLEEP; echo) &", false, false},
	{"setsid double fork of a tree", "(setsid bash -c 'SLEEP & SLEEP & wait' </dev/null >/dev/null 2>&1 &)", false, false},
	{"short-lived orphans", "for i in 1 2 3; do (true &); done; (sleep 0.05 &)", false, false},
	{"env -i setsid -f", "env -i setsid -f SLEEP </dev/null >/dev/null 2>&1", true, false},
	{"unset marker and setsid", "(unset TASKRT_BASH_TASK; setsid SLEEP </dev/null >/dev/null 2>&1 &)", true, false},
	{"short-lived setsid orphans", "for i in 1 2 3; do (setsid true &); done; (setsid sleep 0.05 &)", false, true},
}

var noSurvivorEndings = []struct {
	name    string
	suffix  string
	signals bool // end signals the shell's process group (see awaitEscaped)
	end     func(t *testing.T, h *testTask)
	check   func(t *testing.T, o messages.Outcome)
}{
	{
		name:   "after it completes",
		suffix: "\necho ready",
		end:    func(*testing.T, *testTask) {},
		check: func(t *testing.T, o messages.Outcome) {
			assert.Equal(t, messages.Completed, o.Status)
			assert.True(t, strings.HasPrefix(o.Detail, "exit code: 0"), o.Detail)
		},
	},
	{
		name:    "after it is killed",
		suffix:  "\necho ready; sleep 1000",
		signals: true,
		end: func(t *testing.T, h *testTask) {
			readUntil(t, h, "ready", settleLimit)
			require.NoError(t, h.Cancel("user asked"))
		},
		check: func(t *testing.T, o messages.Outcome) {
			assert.Equal(t, messages.Killed, o.Status)
			assert.Equal(t, "signal: SIGTERM", o.Detail)
		},
	},
	{
		name:    "after its owner is disposed",
		suffix:  "\necho ready; sleep 1000 & wait",
		signals: true,
		end: func(t *testing.T, h *testTask) {
			readUntil(t, h, "ready", settleLimit)
			require.NoError(t, h.Cancel("owner disposed"))
		},
		check: func(t *testing.T, o messages.Outcome) {
			assert.Equal(t, messages.Killed, o.Status)
			assert.Contains(t, []string{"signal: SIGTERM", "signal: SIGKILL"}, o.Detail)
		},
	},
}

// sleeps numbers uniqueSleep's durations.
var sleeps atomic.Int64

// uniqueSleep is a `sleep` command whose duration no other process on the machine
// uses: its command line identifies the processes it runs.
func uniqueSleep() string {
	return fmt.Sprintf("sleep 1000.%d%06d", selfPid%1000, sleeps.Add(1))
}

// processesRunning lists the live processes whose command line is command (split
// on spaces), anywhere on the machine.
func processesRunning(t testing.TB, command string) []int {
	t.Helper()
	want := strings.ReplaceAll(command, " ", "\x00") + "\x00"
	procs, err := scanProcs()
	require.NoError(t, err)
	var pids []int
	for _, p := range procs {
		if p.zombie || p.kthread {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		if err == nil && string(b) == want {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// awaitEscaped waits, for an escape that runs SLEEP, until its sleep runs: the
// escape (a new session, a double fork) is then complete. Sweep mode needs it
// before a kill: a process that the kill's signal reaches while it is still in the
// shell's process group, and that leaves the group and the session before the
// signal lands (setsid between the two), dies as a zombie that no scan saw alive —
// no session, group, marker or recorded start time names it as the task's, and it
// is left unreaped (the gap producers/bash/doc.go names under sweep mode). Cgroup
// mode names it by the cgroup it died in, so its tests kill mid-escape too.
func awaitEscaped(t *testing.T, spawn, sleep string) {
	t.Helper()
	if !strings.Contains(spawn, "SLEEP") {
		return
	}
	pollProcesses(t, fmt.Sprintf("%q never ran", sleep), func() bool { return len(processesRunning(t, sleep)) > 0 })
}

// pollProcesses calls done every 5 ms until it reports true, and fails the test
// with what after settleLimit. Polling is for observing OS processes only.
func pollProcesses(t *testing.T, what string, done func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(settleLimit)
	for !done() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal(what)
		}
	}
}

func TestAnInternalPanicFailsTheTaskAndStillLeavesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		testHookLeaderExited = func() { panic("injected") }
		t.Cleanup(func() { testHookLeaderExited = nil })
		p := newTestProducer(t, mode)
		h := startTask(t, p, Command{Command: "sleep 1000 & setsid sleep 1000 & echo hi"})
		o := h.awaitDone(t, settleLimit)
		assert.Equal(t, messages.Outcome{Status: messages.Failed, Detail: "internal error: panic: injected"}, o)
		assert.Equal(t, "hi\n", h.ReadOutput())
		requireQuiet(t, p)
	})
}

func TestMarkerSweepWithoutTheSubreaperFlag(t *testing.T) {
	// The flag is process-wide and already set by other tests; WithoutSubreaper
	// still switches the sweep to reading every process's marker, which is what it
	// relies on when orphans go to init.
	p := newTestProducer(t, WithContainment(SweepContainment), WithoutSubreaper())
	h := startTask(t, p, Command{Command: "setsid sleep 1000 & sleep 1000 & echo ready"})
	o := h.awaitDone(t, settleLimit)
	assert.Equal(t, "exit code: 0; killed 2 leftover processes", o.Detail)
	requireQuiet(t, p)
}

func TestLeftoversAfterANormalExitAreNamedInTheDetail(t *testing.T) {
	tests := []struct {
		name, command, want string
	}{
		{"no leftovers, plain detail", "echo hi", "exit code: 0"},
		{"one leftover holding the pipe still settles", "sleep 1000 & echo hi", "exit code: 0; killed 1 leftover process"},
		{"two leftovers are counted", "sleep 1000 & setsid sleep 1000 & exit 4", "exit code: 4; killed 2 leftover processes"},
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := startTask(t, p, Command{Command: tc.command})
				assert.Equal(t, tc.want, h.awaitDone(t, settleLimit).Detail)
				requireQuiet(t, p)
			})
		}
	})
}

// A process the producer cannot track (no marker, own session: sweep mode only; in
// cgroup mode no process of the task is untracked) that holds the output pipe must
// not hang Done: the drain is bounded and the detail says why.
func TestDrainIsBoundedWhenAnUntrackedProcessHoldsThePipe(t *testing.T) {
	p := newTestProducer(t, WithContainment(SweepContainment), WithDrainTimeout(100*time.Millisecond))
	fifo := filepath.Join(t.TempDir(), "escaped")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	// The escapee (no marker, own session) reports through the FIFO once it runs
	// on its own, so the shell exits only after the escape is complete.
	h := startTask(t, p, Command{Command: fmt.Sprintf(
		`env -i setsid -f /bin/sh -c 'echo pid $$; echo escaped > %[1]q; exec sleep 1000'; read -r _ < %[1]q`, fifo)})
	o := h.awaitDone(t, settleLimit)
	var pid int
	out := h.ReadOutput()
	_, err := fmt.Sscanf(out, "pid %d", &pid)
	require.NoError(t, err, "escapee pid in %q", out)
	killAndReap(t, pid)
	assert.Equal(t, "exit code: 0; output pipe held open by an untracked process; stopped reading", o.Detail)
}

// killAndReap kills and reaps a process the test deliberately let escape.
func killAndReap(t *testing.T, pid int) {
	require.NoError(t, unix.Kill(pid, syscall.SIGKILL))
	var ws unix.WaitStatus
	_, err := unix.Wait4(pid, &ws, 0, nil)
	require.NoError(t, err, "the escapee was re-parented to this subreaper")
}

func TestFloodKeepsMemoryBoundedAndCountsDroppedBytesExactly(t *testing.T) {
	const (
		floods   = 4
		size     = 100_000_000 // bytes per flood, exact thanks to head -c
		head     = 16 << 10
		tail     = 64 << 10
		spillCap = 1 << 20
	)
	p := newTestProducer(t, WithOutput(output.WithMemory(head, tail)), WithOutput(output.WithSpillCap(spillCap)))
	var baseline runtime.MemStats
	runtime.ReadMemStats(&baseline)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		peakHeap uint64
	)
	for i := range floods {
		wg.Go(func() {
			h := startTask(t, p, Command{Command: fmt.Sprintf("yes flood%d | head -c %d", i, size)})
			src := []byte(fmt.Sprintf("flood%d\n", i))
			source := func(off int64) byte { return src[off%int64(len(src))] }
			var cursor, leftTotal int64
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for settled := false; !settled; {
				select {
				case o := <-h.Done:
					h.settled = true
					settled = true
					assert.Equal(t, "exit code: 0", o.Detail)
				case <-tick.C:
				}
				end, left := account(t, cursor, h.ReadOutput(), source)
				cursor, leftTotal = end, leftTotal+left
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				mu.Lock()
				peakHeap = max(peakHeap, m.HeapInuse)
				mu.Unlock()
			}
			st := h.task.out.Stats()
			assert.Equal(t, int64(size), cursor, "reads cover the whole output")
			assert.Equal(t, int64(size), st.Written)
			assert.Equal(t, int64(size-tail-spillCap), st.Dropped, "dropped bytes")
			assert.Equal(t, int64(spillCap), st.SpillLen)
			assert.Greater(t, leftTotal, int64(size/2), "most of the flood was left out of reads")
		})
	}
	wg.Wait()
	grew := int64(peakHeap) - int64(baseline.HeapInuse)
	t.Logf("heap in use: baseline %d KiB, peak %d KiB (+%d KiB) for %d floods of %d MB; VmHWM %s",
		baseline.HeapInuse>>10, peakHeap>>10, grew>>10, floods, size/1_000_000, vmHWM(t))
	assert.Less(t, grew, int64(32<<20), "heap growth under %d floods", floods)
	requireQuiet(t, p)
}

func TestFloodCancelledMidway(t *testing.T) {
	p := newTestProducer(t, WithOutput(output.WithSpillCap(1<<20)), WithGrace(time.Second))
	h := startTask(t, p, Command{Command: "yes"})
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var cursor, left int64
	source := func(off int64) byte { return "y\n"[off%2] }
	for h.task.out.Stats().Written < 50_000_000 {
		end, l := account(t, cursor, h.ReadOutput(), source)
		cursor, left = end, left+l
		<-tick.C
	}
	require.NoError(t, h.Cancel("enough"))
	o := h.awaitDone(t, settleLimit)
	assert.Equal(t, "signal: SIGTERM", o.Detail)
	end, l := account(t, cursor, h.ReadOutput(), source)
	st := h.task.out.Stats()
	assert.Equal(t, st.Written, end, "reads cover the whole output")
	assert.Equal(t, st.Written-int64(outputTail)-(1<<20), st.Dropped)
	t.Logf("yes wrote %d MB before it was killed; %d bytes left out of reads", st.Written/1_000_000, left+l)
	requireQuiet(t, p)
}

func TestOneVeryLongLine(t *testing.T) {
	p := newTestProducer(t)
	h := startTask(t, p, Command{Command: "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo done"})
	o := h.awaitDone(t, settleLimit)
	require.Equal(t, "exit code: 0", o.Detail)
	got := h.ReadOutput()
	source := func(off int64) byte {
		switch {
		case off < 3_000_000:
			return 'a'
		case off == 3_000_000:
			return '\n'
		}
		return "done\n"[off-3_000_001]
	}
	end, left := account(t, 0, got, source)
	assert.Equal(t, int64(3_000_006), end)
	assert.Equal(t, int64(3_000_006-outputMaxRead), left, "exactly one read's worth is shown")
	assert.True(t, strings.HasSuffix(got, "\ndone\n"))
	lines := strings.Split(got, "\n")
	assert.Contains(t, lines[1], "saved in ")
}

func TestBinaryOutputIsRenderedSafely(t *testing.T) {
	p := newTestProducer(t)
	h := startTask(t, p, Command{Command: `printf 'a\0b\377\376c\342\202\254\n'; head -c 20000 /dev/urandom`})
	require.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
	got := h.ReadOutput()
	assert.True(t, strings.HasPrefix(got, "a\u2400b\uFFFD\uFFFDc\u20ac\n"), "got %q", got[:min(len(got), 40)])
	assert.NotContains(t, got, "\x00")
	assert.True(t, utf8.ValidString(got))
}

func TestForegroundRun(t *testing.T) {
	t.Run("a command runs to completion", func(t *testing.T) {
		p := newTestProducer(t)
		res, err := p.Run(context.Background(), Command{Command: "echo hi; exit 2"}, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, Result{Output: "hi\n", ExitCode: 2, Outcome: messages.Outcome{Status: messages.Completed, Detail: "exit code: 2"}}, res)
	})
	t.Run("the timeout kills the whole group", func(t *testing.T) {
		p := newTestProducer(t)
		begin := time.Now()
		res, err := p.Run(context.Background(), Command{Command: "sleep 1000 & setsid sleep 1000 & echo started; sleep 1000"}, 300*time.Millisecond)
		require.NoError(t, err)
		t.Logf("timeout-to-return: %s", time.Since(begin)-300*time.Millisecond)
		assert.True(t, res.TimedOut)
		assert.Equal(t, -1, res.ExitCode)
		assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}, res.Outcome)
		assert.Equal(t, "started\n", res.Output)
		requireQuiet(t, p)
	})
	t.Run("the caller's context ends the run", func(t *testing.T) {
		p := newTestProducer(t)
		ctx, cancel := context.WithCancel(context.Background())
		h := make(chan struct{})
		go func() {
			defer close(h)
			res, err := p.Run(ctx, Command{Command: "echo started; sleep 1000"}, 0)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, messages.Killed, res.Outcome.Status)
		}()
		for p.Live() == 0 {
			select {
			case <-h:
				t.Fatal("run returned early")
			default:
			}
		}
		cancel()
		<-h
		requireQuiet(t, p)
	})
	t.Run("output is bounded and names no removed file", func(t *testing.T) {
		spills := t.TempDir()
		p := newTestProducer(t, WithOutput(output.WithMaxRead(1000), output.WithSpillDir(spills)))
		res, err := p.Run(context.Background(), Command{Command: "seq 1 100000"}, time.Minute)
		require.NoError(t, err)
		assert.Less(t, len(res.Output), 1200)
		assert.Regexp(t, `\n\[\.\.\. \d+ bytes left out \(output offsets \d+-\d+\) \.\.\.\]\n`, res.Output)
		entries, err := os.ReadDir(spills)
		require.NoError(t, err)
		assert.Empty(t, entries, "the spill file is removed")
	})
	t.Run("a done context starts nothing", func(t *testing.T) {
		p := newTestProducer(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := p.Run(ctx, Command{Command: "echo never"}, 0)
		assert.True(t, errors.Is(err, context.Canceled))
	})
}

func TestManyConcurrentShortCommands(t *testing.T) {
	const n = 64
	p := newTestProducer(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h := startTask(t, p, Command{Command: fmt.Sprintf("echo task %d; exit %d", i, i%5)})
			o := h.awaitDone(t, settleLimit)
			assert.Equal(t, fmt.Sprintf("exit code: %d", i%5), o.Detail)
			assert.Equal(t, fmt.Sprintf("task %d\n", i), h.ReadOutput())
		})
	}
	wg.Wait()
	requireQuiet(t, p)
}

func TestSpecAndRelease(t *testing.T) {
	p := newTestProducer(t, WithOutput(output.WithMaxRead(1000)))
	spec := p.Spec("agent-1", Command{Command: "seq 1 100000\necho more"})
	assert.Equal(t, Kind, spec.Kind)
	assert.Equal(t, "seq 1 100000 …", spec.Label)
	assert.Equal(t, messages.AgentID("agent-1"), spec.Owner)
	assert.True(t, messages.KindPattern().MatchString(spec.Kind))
	h, err := spec.Run()
	require.NoError(t, err)
	o := <-h.Done
	assert.Equal(t, "exit code: 0", o.Detail)
	out := h.ReadOutput()
	m := spillRE.FindStringSubmatch(out)
	require.Len(t, m, 2, "the marker names the spill file: %q", out)
	_, err = os.Stat(m[1])
	require.NoError(t, err, "the spill file lives while the record does")
	h.Release()
	_, err = os.Stat(m[1])
	assert.True(t, os.IsNotExist(err), "release removes it")
	assert.Empty(t, h.ReadOutput(), "a released task has nothing more to read")
	h.Release() // idempotent
}

func TestLiveCountsRunningProcesses(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode)
		other := newTestProducer(t, mode)
		h := startTask(t, p, Command{Command: "sleep 1000 & setsid sleep 1000 & echo ready; wait"})
		readUntil(t, h, "ready", settleLimit)
		assert.Equal(t, 3, p.Live(), "the shell and its two children")
		assert.Zero(t, other.Live(), "another producer's count is its own")
		assert.Equal(t, 3, liveProcesses(), "every producer of this process")
		assert.GreaterOrEqual(t, machineLiveProcesses(), 3)
		require.NoError(t, h.Cancel("done"))
		h.awaitDone(t, settleLimit)
		requireQuiet(t, p)
		assert.Zero(t, liveProcesses())
	})
}

var spillRE = regexp.MustCompile(`saved in (\S+) at the same offsets`)

// vmHWM is this process's peak resident set size.
func vmHWM(t *testing.T) string {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
