//go:build linux

package bash

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// idleHostChildren makes n idle processes children of this process, the way a
// long-lived host collects them: a shell starts them and exits, and this process,
// a child subreaper, receives them on its main thread, where the orphans of tasks
// arrive too. The test's cleanup kills them and reaps each by pid, which fails if
// anything else reaped one meanwhile (a stolen status).
func idleHostChildren(t *testing.T, n int) []int {
	t.Helper()
	require.NoError(t, enableSubreaper())
	if n == 0 {
		return nil
	}
	sleep := uniqueSleep()
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do %s </dev/null >/dev/null 2>&1 & echo $!; done`, n, sleep))
	cmd.Env = append(os.Environ(), markerEnv+"=")
	out, err := cmd.Output()
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, n)
	t.Cleanup(func() {
		for _, pid := range pids {
			require.NoError(t, unix.Kill(pid, unix.SIGKILL))
		}
		for _, pid := range pids {
			var ws unix.WaitStatus
			for {
				_, err := unix.Wait4(pid, &ws, 0, nil)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				require.NoError(t, err, "idle host child %d is still this process's to reap", pid)
				assert.Equal(t, syscall.SIGKILL, ws.Signal(), "idle host child %d died of the test's SIGKILL", pid)
				break
			}
		}
	})
	return pids
}

// TestASettleReadsOnlyItsOwnTasksProcesses pins the cost rule of cgroup mode (no
// per-task step reads the host's children): what a settle reads in /proc does not
// grow with the host's children. Each subtest settles the same tasks with 0 and
// with 300 idle host children and counts the reaper's reads of single processes'
// files; before the reaper knew its children, a settle read two files per host
// child (600 here). Where a pids controller counts the task's processes (zombies
// included, until reaped), a task that leaves nothing but its leader is settled
// without reading this process's children list at all; a task that leaves an
// orphan (a zombie already, or killed by the settle) is not, and its orphans are
// reaped all the same. No idle child's status is taken.
func TestASettleReadsOnlyItsOwnTasksProcesses(t *testing.T) {
	requireCgroups(t)
	const settles = 8
	for _, tc := range []struct {
		name    string
		command string
		perTask int64 // reads a settle may cost, beside its own processes'
		// how it settles where tasks are counted: "spared" (nothing left, no reaping),
		// "named" (its orphans reaped by name: from its process group, or as
		// processes the kill found) — neither with a look at this process's
		// children —, "either" of them (the subshell may reap its background job
		// itself when the job ends first), or "round" (the reaper's round reads them)
		want string
	}{
		{"a task that leaves nothing", "/bin/true", 4, "spared"},
		{"a task whose orphan in its group is a zombie before it ends", "( /bin/true & ); sleep 0.05", 4, "either"},
		{"a task whose orphan in its group the settle kills", "sleep 1000 & exit 0", 4, "named"},
		{"a task whose orphans in and out of its group the settle kills", "sleep 1000 & setsid -f sleep 1000; exit 0", 4, "named"},
		// The orphan writes its pid, and the shell waits until it is a zombie: a fixed
		// sleep was too short on a loaded machine, where the settle then found it
		// alive and killed it ("named").
		{"a task whose orphan out of its group is a zombie before it ends", `d=$(mktemp -d)
setsid -f sh -c 'echo $$ > "$0/pid"; exec /bin/true' "$d"
for i in $(seq 1000); do [ -s "$d/pid" ] && [ "$(cut -d' ' -f3 "/proc/$(cat "$d/pid")/stat" 2>/dev/null)" = Z ] && break; sleep 0.01; done
rm -r "$d"`, 10, "round"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perSettle := map[int]float64{}
			for _, n := range []int{0, 300} {
				idleHostChildren(t, n)
				p := newTestProducer(t, WithContainment(CgroupContainment))
				run := func() {
					h := startTask(t, p, Command{Command: tc.command})
					o := h.awaitDone(t, settleLimit)
					require.Equal(t, messages.Completed, o.Status, o.Detail)
					h.Release()
				}
				run() // the reaper meets the host's children once
				before, lists, spared, named := reaps.children.reads.Load(), reaps.children.lists.Load(), reaps.spared.Load(), reaps.named.Load()
				for range settles {
					run()
				}
				got := reaps.children.reads.Load() - before
				perSettle[n] = float64(got) / settles
				assert.LessOrEqual(t, got, settles*tc.perTask, "reads in %d settles with %d idle host children", settles, n)
				gotLists, gotSpared, gotNamed := reaps.children.lists.Load()-lists, reaps.spared.Load()-spared, reaps.named.Load()-named
				want := tc.want
				if !p.tree.countsTasks() {
					want = "round" // without a count, every settle takes the round
				}
				switch want {
				case "either":
					assert.Equal(t, int64(settles), gotSpared+gotNamed, "settles that needed no reaping or reaped by name")
				default:
					wantSpared, wantNamed := map[bool]int64{true: settles}[want == "spared"], map[bool]int64{true: settles}[want == "named"]
					assert.Equal(t, wantSpared, gotSpared, "settles that needed no reaping")
					assert.Equal(t, wantNamed, gotNamed, "settles whose orphans were reaped by name")
				}
				if want == "round" {
					assert.GreaterOrEqual(t, gotLists, int64(settles), "readings of this process's children")
				} else {
					assert.Zero(t, gotLists, "readings of this process's children")
				}
				requireQuiet(t, p)
			}
			t.Logf("reads per settle: %v", perSettle)
		})
	}
}

// BenchmarkReaperRound is one reaper round with no task settling (what a settle
// adds to its own processes' reads): reading and matching this process's children,
// with 0 and 2,000 idle host children.
func BenchmarkReaperRound(b *testing.B) {
	for _, n := range []int{0, 2000} {
		b.Run(fmt.Sprintf("host-children=%d", n), func(b *testing.B) {
			stop := benchHostChildren(b, n)
			defer stop()
			var r reaper
			req := []*reapReq{{line: "0::/nothing-settles-here\n"}}
			r.round(req)
			reads := r.children.reads.Load()
			b.ResetTimer()
			for b.Loop() {
				r.round(req)
			}
			b.ReportMetric(float64(r.children.reads.Load()-reads)/float64(b.N), "reads/op")
		})
	}
}

// benchHostChildren is idleHostChildren for benchmarks.
func benchHostChildren(b *testing.B, n int) (stop func()) {
	b.Helper()
	require.NoError(b, enableSubreaper())
	if n == 0 {
		return func() {}
	}
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do %s </dev/null >/dev/null 2>&1 & echo $!; done`, n, uniqueSleep()))
	cmd.Env = append(os.Environ(), markerEnv+"=")
	out, err := cmd.Output()
	require.NoError(b, err)
	return func() {
		for _, f := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(f)
			_ = unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		}
	}
}

// fakeProcs is a process table for children.match: pid → (start time, cgroup).
type fakeProcs map[int]struct {
	start uint64
	line  string
}

func (f fakeProcs) install(cs *children) {
	cs.readStat = func(pid int) (procInfo, bool) {
		p, ok := f[pid]
		return procInfo{pid: pid, start: p.start}, ok
	}
	cs.cgroupOf = func(pid int) string { return f[pid].line }
}

// The reaper reads what a child is once: a later reading of the children list is
// matched in the kernel's order against the previous one, and a pid that was reaped
// and reused by a new child is caught by its start time, wherever it sits. Each case
// is two readings of the list with the process table between them; want is each
// child's cgroup after the second, and reads what the second cost.
func TestChildrenAreReadOnceAndReusedPidsAreCaught(t *testing.T) {
	type proc = struct {
		start uint64
		line  string
	}
	host, task := "0::/\n", "0::/taskrt/task-1-1\n"
	for _, tc := range []struct {
		name          string
		first, second []int
		change        func(f fakeProcs) // between the readings
		want          []string
		maxReads      int64
	}{
		{"nothing changed: one stat proves the list", []int{10, 11, 12}, []int{10, 11, 12},
			func(fakeProcs) {}, []string{host, host, host}, 1},
		{"children reaped, new ones appended", []int{10, 11, 12}, []int{10, 12, 13},
			func(f fakeProcs) { delete(f, 11); f[13] = proc{50, task} }, []string{host, host, task}, 1 + 3},
		{"the last child's pid reused by a task's orphan", []int{10, 11}, []int{10, 11},
			func(f fakeProcs) { f[11] = proc{60, task} }, []string{host, task}, 2 + 3},
		{"a middle pid reused, appended after the others", []int{10, 11, 12}, []int{10, 12, 11},
			func(f fakeProcs) { f[11] = proc{60, task} }, []string{host, host, task}, 1 + 3},
		{"the last two pids reaped and reused in order", []int{10, 11, 12}, []int{10, 11, 12},
			func(f fakeProcs) { f[11] = proc{60, task}; f[12] = proc{61, task} }, []string{host, task, task}, 3 + 6},
		{"the last matched child vanished before its check", []int{10, 11, 12}, []int{10, 11, 12},
			func(f fakeProcs) { delete(f, 12) }, []string{host, host}, 2 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeProcs{10: {1, host}, 11: {2, host}, 12: {3, host}}
			var cs children
			f.install(&cs)
			cs.match(tc.first)
			tc.change(f)
			before := cs.reads.Load()
			var got []string
			for _, c := range cs.match(tc.second) {
				got = append(got, c.line)
				assert.Equal(t, f[c.pid].start, c.start, "pid %d is known as the process it is", c.pid)
			}
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, cs.reads.Load()-before, tc.maxReads, "reads of the second reading")
		})
	}
}

// The process count is sound where a task's last processes end with its shell: a
// background job that exits just before the shell (a zombie of the shell, then of
// this process), with it (between leaving the cgroup and becoming a zombie) or
// after it (killed by the settle) leaves no zombie, whichever way each settle went:
// spared by the count, reaped by name, or through the reaper's round.
func TestNoZombieWhenABackgroundJobEndsWithTheShell(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment))
	const runs = 60
	spared, named, lists := reaps.spared.Load(), reaps.named.Load(), reaps.children.lists.Load()
	for i := range runs {
		h := startTask(t, p, Command{Command: "/bin/true & exit 0"})
		o := h.awaitDone(t, settleLimit)
		require.Equal(t, messages.Completed, o.Status, o.Detail)
		require.True(t, strings.HasPrefix(o.Detail, "exit code: 0"), o.Detail) // "; killed 1 leftover process" when the job outlived the shell
		h.Release()
		require.Empty(t, zombieChildren(t), "zombie children after run %d", i)
	}
	gotSpared, gotNamed, gotLists := reaps.spared.Load()-spared, reaps.named.Load()-named, reaps.children.lists.Load()-lists
	assert.GreaterOrEqual(t, gotSpared+gotNamed+gotLists, int64(runs), "every settle was spared, reaped by name or took a round")
	t.Logf("%d of %d settles spared by the count, %d reaped by name, %d readings of the children list", gotSpared, runs, gotNamed, gotLists)
	requireQuiet(t, p)
}

// BenchmarkSettleWithAnOrphan: a task whose shell leaves a background job, killed
// by the settle and reaped, with 0 and 2,000 idle host children; ns/op is one
// task from Start to its outcome. The orphan stays in the task's process group.
func BenchmarkSettleWithAnOrphan(b *testing.B) {
	for _, n := range []int{0, 2000} {
		b.Run(fmt.Sprintf("host-children=%d", n), func(b *testing.B) {
			stop := benchHostChildren(b, n)
			defer stop()
			p := New(WithContainment(CgroupContainment), WithOutput(output.WithSpillDir(b.TempDir())))
			defer func() { _ = p.Close() }()
			if p.Containment() != CgroupContainment {
				b.Skip("no cgroup containment here")
			}
			for b.Loop() {
				h, err := p.Start(Command{Command: "sleep 1000 & exit 0"})
				if err != nil {
					b.Fatal(err)
				}
				if o := <-h.Done; o.Status != messages.Completed {
					b.Fatal(o.Detail)
				}
				h.Release()
			}
		})
	}
}
