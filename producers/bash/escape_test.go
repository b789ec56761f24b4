//go:build linux

package bash

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Escape tests: commands that work hard at leaving processes behind. Whatever the
// command does and however its task ends, once the task settles no process of it
// may be alive and no zombie child may be left in this process (requireQuiet: the
// marker scan plus the zombie scan).

const (
	// bombDepth bounds the fork bomb: every process forks two children until depth
	// bombDepth, so the tree holds 2^(bombDepth+1)-1 = 127 processes, bombLeaves of
	// them leaves.
	bombDepth  = 6
	bombLeaves = 1 << bombDepth
	bombSize   = 2*bombLeaves - 1
	// bombSlack is how many processes over this user's current count `ulimit -u`
	// allows the bomb.
	bombSlack = 300
)

// bombScript is a fork bomb that cannot exhaust the machine. It is bounded twice:
//
//   - `ulimit -Su` caps the processes of this user at the current count plus
//     bombSlack. That is the classic defence, but the kernel does not enforce
//     RLIMIT_NPROC for a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, so it does
//     nothing when the tests run as root (as they do in CI containers);
//   - hence the explicit depth counter, which holds for root too: each process forks
//     two children until depth bombDepth, bombSize (127) processes in all.
//
// The leaves report up (see upFunc) and then sleep; the inner nodes wait for their
// children. With escape set, every process ignores SIGTERM and the second child of
// each depth-2 node leaves the session with setsid (a new bash that re-declares the
// functions), so only the SIGKILL after the grace period, the environment marker and
// the parent links catch them.
func bombScript(escape bool) string {
	trap, second := "", `bomb $(($1+1)) &`
	if escape {
		trap = "trap '' TERM"
		second = `if [ "$1" -eq 2 ]; then setsid bash -c "$(declare -f bomb up); bomb $(($1+1))" & else bomb $(($1+1)) & fi`
	}
	return fmt.Sprintf(`ulimit -Su %d 2>/dev/null
bomb() {
  %s
  if [ "$1" -lt %d ]; then
    bomb $(($1+1)) &
    %s
    wait
  else
    up; exec sleep 1000
  fi
}
bomb 0 &`, userProcesses()+bombSlack, trap, bombDepth, second)
}

// userProcesses counts the processes of this user, for the bomb's ulimit.
func userProcesses() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	uid := uint32(os.Getuid())
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
				n++
			}
		}
	}
	return n
}

// upFunc declares `up`, which an escaped process runs once it is in place: it
// appends its pid to the file $UP. A file rather than the output, so that a process
// whose output is closed can report too, so that the command itself can wait for
// its escape to be complete, and so that the test can check that every process
// that reported is gone, marker or not. Inside a sandbox ($UP_NS set) it appends its
// pid namespace and start time too, since its pid is its sandbox's (see
// requireGone); outside, it starts no process for that.
var upFunc = `up() { local id=; ` + upReport("$BASHPID") + `; }` + "\n"

// upLine is what a `bash -c` escapee appends to $UP itself, as up does.
var upLine = `id=; ` + upReport("$$")

// upReport appends pid's line to $UP, and in a sandbox only a whole one: a process
// killed while it reports (its sandbox torn down mid-escape) may have lost a command
// substitution's output, and a line without its namespace would name a pid of this
// process's namespace instead — some other process, often a kernel thread
// (TestTheSuiteInsideTheSandbox once read "process 38 ... still runs (state S,
// parent 2)" so). No single quote: escapees embed it in bash -c '…'.
func upReport(pid string) string {
	return `if [ -n "$UP_NS" ]; then id="$(readlink /proc/self/ns/pid) $(cut -d" " -f22 /proc/` + pid + `/stat)"; fi; ` +
		`case "$UP_NS:$id" in :|?*:"pid:["*"] "[0-9]*) echo ` + pid + ` $id >> "$UP";; esac`
}

// escapee is a command that leaves processes behind.
type escapee struct {
	name    string
	spawn   string // starts the escape in the background
	ups     int    // lines in $UP once the escape is complete
	minLive int    // processes of the task, at least, once the escape is complete
	hidden  bool   // no marker and a new session: contained in cgroup mode only
}

var escapees = []escapee{
	{"a bounded fork bomb", bombScript(false), bombLeaves, bombSize, false},
	{"a bounded fork bomb that ignores SIGTERM and escapes with setsid", bombScript(true), bombLeaves, bombSize, false},
	{"a child that closes its output and keeps running",
		`(exec >&- 2>&- </dev/null; up; exec sleep 1000) &`, 1, 1, false},
	{"a setsid child that closes its output and keeps running",
		`setsid bash -c 'exec >&- 2>&- </dev/null; ` + upLine + `; exec sleep 1000' &`, 1, 1, false},
	{"an env -i setsid -f child that closes its output and keeps running",
		`env -i UP="$UP" UP_NS="$UP_NS" setsid -f bash -c 'exec >&- 2>&- </dev/null; trap "" TERM; ` + upLine + `; exec sleep 1000'`, 1, 1, true},
	{"a setsid child without the marker that keeps running",
		`(unset TASKRT_BASH_TASK; setsid bash -c '` + upLine + `; exec sleep 1000' </dev/null >/dev/null 2>&1 &)`, 1, 1, true},
}

// upFile is the $UP file of one run of an escapee.
type upFile string

// command is e followed by suffix, reporting to f.
func (f upFile) command(e escapee, suffix string) Command {
	env := []string{"UP=" + string(f)}
	if os.Getenv(sandboxEnv) != "" {
		env = append(env, "UP_NS=1")
	}
	return Command{Command: upFunc + e.spawn + "\n" + suffix, Env: env}
}

func newUpFile(t *testing.T) upFile {
	f := filepath.Join(t.TempDir(), "up")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	return upFile(f)
}

// requireGone asserts that every process that reported up is gone: no such pid,
// or a zombie whose parent is not this process (init reaps it; zombie children of
// this process are requireQuiet's). A process that reported from a pid namespace
// other than this process's (a sandbox) gave its pid in that namespace and its
// start time: no live process of the machine may have that identity.
func (f upFile) requireGone(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(string(f))
	require.NoError(t, err)
	own, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue // nobody reported
		}
		fields := strings.Fields(line)
		pid, err := strconv.Atoi(fields[0])
		require.NoError(t, err)
		if len(fields) == 3 && fields[1] != own {
			start, err := strconv.ParseUint(fields[2], 10, 64)
			require.NoError(t, err)
			if host := aliveInNamespace(t, fields[1], pid, start); host != 0 {
				t.Errorf("process %d of %s, which reported up, still runs (pid %d here)", pid, fields[1], host)
			}
			continue
		}
		if p, ok := readStat(pid); ok && !p.zombie {
			t.Errorf("process %d, which reported up, still runs (state %c, parent %d)", pid, p.state, p.ppid)
		}
	}
}

// aliveInNamespace returns the pid here of the live process that is pid nsPid in
// the pid namespace ns ("pid:[INODE]") and started at start (clock ticks after
// boot), or 0. The namespace alone is no identity: once a sandbox is gone, a new
// one (another test's, anywhere on the machine) may get its inode number.
func aliveInNamespace(t *testing.T, ns string, nsPid int, start uint64) int {
	t.Helper()
	procs, err := scanProcs()
	require.NoError(t, err)
	for _, p := range procs {
		if p.zombie || p.start != start {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.pid)); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if ids, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(ids); len(f) > 0 && f[len(f)-1] == strconv.Itoa(nsPid) {
					return p.pid
				}
			}
		}
	}
	return 0
}

// await waits until n processes reported up.
func (f upFile) await(t *testing.T, n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(settleLimit)
	for {
		b, err := os.ReadFile(string(f))
		require.NoError(t, err)
		if bytes.Count(b, []byte("\n")) >= n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d of %d processes reported up within %s", bytes.Count(b, []byte("\n")), n, settleLimit)
		}
	}
}

var leftoverRE = regexp.MustCompile(`killed (\d+) leftover process`)

// TestEscapesLeaveNothing runs each escapee and ends it five ways: it exits once its
// escape is complete, it exits while the escape is still under way, it is killed
// once the escape is complete, it is killed while the escape is still under way, and
// its owner is disposed through the runtime. Every time, nothing survives and no
// zombie is left.
func TestEscapesLeaveNothing(t *testing.T) {
	const grace = 200 * time.Millisecond
	endings := []struct {
		name   string
		suffix func(e escapee) string
		end    func(t *testing.T, p *Producer, h *testTask, up upFile, e escapee)
		check  func(t *testing.T, o messages.Outcome, e escapee)
	}{
		{
			name: "after it exits once the escape is complete",
			suffix: func(e escapee) string {
				return fmt.Sprintf(`until [ "$(wc -l < "$UP")" -ge %d ]; do sleep 0.01; done; exit 0`, e.ups)
			},
			end: func(*testing.T, *Producer, *testTask, upFile, escapee) {},
			check: func(t *testing.T, o messages.Outcome, e escapee) {
				assert.Equal(t, messages.Completed, o.Status)
				if os.Getenv(sandboxEnv) != "" {
					// In a sandbox the leftovers die with it the moment the shell exits,
					// uncounted (see sandboxJail.settle).
					assert.Equal(t, "exit code: 0", o.Detail)
					return
				}
				m := leftoverRE.FindStringSubmatch(o.Detail)
				require.NotNil(t, m, "the detail counts the leftovers: %q", o.Detail)
				n, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				assert.GreaterOrEqual(t, n, e.minLive, "leftovers killed")
			},
		},
		{
			name:   "after it exits mid-escape",
			suffix: func(escapee) string { return "exit 0" },
			end:    func(*testing.T, *Producer, *testTask, upFile, escapee) {},
			check: func(t *testing.T, o messages.Outcome, _ escapee) {
				assert.Equal(t, messages.Completed, o.Status)
				assert.True(t, strings.HasPrefix(o.Detail, "exit code: 0"), o.Detail)
			},
		},
		{
			name:   "after it is killed once the escape is complete",
			suffix: func(escapee) string { return "sleep 1000" },
			end: func(t *testing.T, p *Producer, h *testTask, up upFile, e escapee) {
				up.await(t, e.ups)
				require.GreaterOrEqual(t, p.Live(), e.minLive, "the escape is complete")
				require.NoError(t, h.Cancel("user asked"))
			},
			check: func(t *testing.T, o messages.Outcome, _ escapee) {
				assert.Equal(t, messages.Killed, o.Status)
				assert.Contains(t, []string{"signal: SIGTERM", "signal: SIGKILL"}, o.Detail)
			},
		},
		{
			name:   "after it is killed mid-escape",
			suffix: func(escapee) string { return "sleep 1000" },
			end: func(t *testing.T, _ *Producer, h *testTask, up upFile, _ escapee) {
				up.await(t, 1)
				require.NoError(t, h.Cancel("user asked"))
			},
			check: func(t *testing.T, o messages.Outcome, _ escapee) {
				assert.Equal(t, messages.Killed, o.Status)
			},
		},
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		sweep := New(mode).Containment() == SweepContainment
		for _, e := range escapees {
			if e.hidden && sweep {
				continue // TestSweepModeCannotSeeHiddenEscapes
			}
			for _, end := range endings {
				t.Run(e.name+" leaves nothing "+end.name, func(t *testing.T) {
					p := newTestProducer(t, mode, WithGrace(grace))
					up := newUpFile(t)
					h := startTask(t, p, up.command(e, end.suffix(e)))
					end.end(t, p, h, up, e)
					o := h.awaitDone(t, settleLimit)
					t.Logf("outcome: %s, %s", o.Status, o.Detail)
					end.check(t, o, e)
					h.Release()
					requireQuiet(t, p)
					up.requireGone(t)
				})
			}
			t.Run(e.name+" leaves nothing after its owner is disposed", func(t *testing.T) {
				p := newTestProducer(t, mode, WithGrace(grace))
				up := newUpFile(t)
				ctx := context.Background()
				rt, err := actors.NewRuntime()
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, rt.Close(ctx)) })
				t.Cleanup(rt.Tasks().AttachSurface("escape test"))
				require.NoError(t, rt.Agents().Register(ctx, "a1"))
				_, err = rt.Tasks().Start(ctx, p.Spec("a1", up.command(e, "sleep 1000")))
				require.NoError(t, err)
				up.await(t, e.ups)
				require.GreaterOrEqual(t, p.Live(), e.minLive, "the escape is complete")

				require.NoError(t, rt.Agents().Dispose(ctx, "a1"), "dispose returns once the task is quiescent")
				requireQuiet(t, p)
				up.requireGone(t)
				st := rt.Stats()
				assert.Zero(t, st.Running, "running tasks")
				assert.Zero(t, st.Abandoned, "abandoned tasks")
			})
		}
	})
}

// Sweep mode cannot see a process that cleared its environment (or unset the
// marker) and left the task's session: the documented limit. This pins exactly what
// it leaves: the task settles as if nothing were left, the process runs on, and
// Live does not count it. The test then kills and reaps it (it was re-parented to
// this subreaper).
func TestSweepModeCannotSeeHiddenEscapes(t *testing.T) {
	for _, e := range noSurvivorEscapes {
		if !e.hidden {
			continue
		}
		t.Run(e.name+" survives its task in sweep mode", func(t *testing.T) {
			p := newTestProducer(t, WithContainment(SweepContainment))
			sleep := uniqueSleep()
			h := startTask(t, p, Command{Command: strings.ReplaceAll(e.spawn, "SLEEP", sleep) + "\nuntil pgrep -f '^" + sleep + "$' >/dev/null; do sleep 0.01; done"})
			o := h.awaitDone(t, settleLimit)
			assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}, o, "nothing left, as far as sweep mode can tell")
			pids := processesRunning(t, sleep)
			require.Len(t, pids, 1, "the hidden process survives")
			assert.Zero(t, p.Live(), "and is not counted")
			killAndReap(t, pids[0])
			requireQuiet(t, p)
		})
	}
}
