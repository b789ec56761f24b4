//go:build linux

package bash

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

// printCgroup prints the task's cgroup v2 line ("0::/…").
const printCgroup = `grep '^0::' /proc/self/cgroup`

// runIn runs c to its end and returns its outcome and output.
func runIn(t *testing.T, p *Producer, c Command) (messages.Outcome, string) {
	t.Helper()
	h := startTask(t, p, c)
	o := h.awaitDone(t, settleLimit)
	return o, h.ReadOutput()
}

// The pool: a producer keeps the empty cgroups of its settled tasks without
// limits and gives them to its next tasks without limits (see cgroupPool).
func TestCgroupPool(t *testing.T) {
	requireCgroups(t)
	newPoolProducer := func(t *testing.T) *Producer {
		p := newTestProducer(t, WithContainment(CgroupContainment))
		t.Cleanup(func() { assert.NoError(t, p.Close()) })
		return p
	}
	// parkOne runs a task and returns the cgroup the pool then keeps.
	parkOne := func(t *testing.T, p *Producer) string {
		t.Helper()
		o, out := runIn(t, p, Command{Command: printCgroup})
		require.Equal(t, "exit code: 0", o.Detail)
		parked := pooledCgroups(p)
		require.Len(t, parked, 1)
		require.Equal(t, p.tree.cgroupLine(parked[0])+"\n", out, "the task ran in the cgroup now kept")
		return parked[0]
	}

	t.Run("a settled task's cgroup is empty and kept for the next task without limits", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		assert.Equal(t, 0, populated(dir), "nothing lives in the kept cgroup")
		requireQuiet(t, p)
		o, out := runIn(t, p, Command{Command: printCgroup})
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.Equal(t, p.tree.cgroupLine(dir)+"\n", out, "the next task runs in the same cgroup")
		assert.Equal(t, []string{dir}, pooledCgroups(p))
		requireQuiet(t, p)
	})

	t.Run("Close removes every kept cgroup; tasks after it get cgroups of their own", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		require.NoError(t, p.Close())
		assert.NoDirExists(t, dir)
		assert.Empty(t, p.tree.taskDirs(p.taskDirPrefix()), "no cgroup of the producer, v2 or v1")
		o, out := runIn(t, p, Command{Command: printCgroup})
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.NotEqual(t, p.tree.cgroupLine(dir)+"\n", out)
		assert.Empty(t, p.tree.taskDirs(p.taskDirPrefix()), "the task's cgroup was removed at Done")
		require.NoError(t, p.Close(), "a second Close")
	})

	t.Run("a task with limits gets cgroups of its own, removed at Done, and passes no limit on", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		o, out := runIn(t, p, Command{Command: printCgroup, Limits: Limits{Processes: 50}})
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.NotEqual(t, p.tree.cgroupLine(dir)+"\n", out, "not the kept cgroup")
		assert.Equal(t, []string{dir}, pooledCgroups(p))
		assert.Empty(t, taskCgroups(p), "the limited task's cgroups are removed")
		// The kept cgroup still has no limit: its process count (v1 or v2) has none.
		var c *taskCgroup
		p.pool.mu.Lock()
		c = p.pool.idle[0]
		p.pool.mu.Unlock()
		if c.counter != "" {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(c.counter), "pids.max"))
			require.NoError(t, err)
			assert.Equal(t, "max\n", string(b))
		}
	})

	t.Run("a cgroup this producer killed is not reused, and the next task runs", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		o, _ := runIn(t, p, Command{Command: "sleep 1000 & echo hi"})
		assert.Equal(t, "exit code: 0; killed 1 leftover process", o.Detail)
		assert.NoDirExists(t, dir, "the killed cgroup is removed")
		assert.Empty(t, pooledCgroups(p))
		o, _ = runIn(t, p, Command{Command: "exit 3"})
		assert.Equal(t, "exit code: 3", o.Detail, "not killed at its start")
	})

	t.Run("a cgroup its task killed through cgroup.kill is not reused, and the next task runs", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		o, _ := runIn(t, p, Command{Command: fmt.Sprintf("echo 1 > %s/cgroup.kill; sleep 1000", dir)})
		assert.Equal(t, "signal: SIGKILL", o.Detail)
		assert.NoDirExists(t, dir)
		o, _ = runIn(t, p, Command{Command: "exit 3"})
		assert.Equal(t, "exit code: 3", o.Detail, "not killed at its start")
		requireQuiet(t, p)
	})

	t.Run("a cgroup killed through cgroup.kill after its shell exited is not reused, and the next task runs", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		// The monitor is held once the shell has exited; the task's last process
		// kills the cgroup then, and is a zombie of this process when the settle looks.
		goFile := filepath.Join(t.TempDir(), "go")
		exited, release := make(chan struct{}), make(chan struct{})
		testHookLeaderExited = func() { close(exited); <-release }
		t.Cleanup(func() { testHookLeaderExited = nil })
		h := startTask(t, p, Command{Command: fmt.Sprintf(
			`(trap '' TERM; while [ ! -e %s ]; do sleep 0.01; done; echo 1 > %s/cgroup.kill; sleep 1000) & exit 0`, goFile, dir)})
		<-exited
		testHookLeaderExited = nil
		require.NoError(t, os.WriteFile(goFile, nil, 0o600))
		require.Eventually(t, func() bool { return populated(dir) == 0 }, settleLimit, time.Millisecond, "the task's process killed its cgroup")
		close(release)
		o := h.awaitDone(t, settleLimit)
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.NoDirExists(t, dir, "the killed cgroup is removed")
		o, _ = runIn(t, p, Command{Command: "exit 3"})
		assert.Equal(t, "exit code: 3", o.Detail, "not killed at its start")
		requireQuiet(t, p)
	})

	t.Run("a cgroup its task changed is not reused", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			change func(dir string, c *taskCgroup) string // the command that changes the cgroup
		}{
			{"a nested cgroup", func(dir string, _ *taskCgroup) string { return "mkdir " + dir + "/nested" }},
			{"its process count's limit", func(_ string, c *taskCgroup) string {
				if c.counter == "" {
					return ""
				}
				return "echo 100 > " + filepath.Join(filepath.Dir(c.counter), "pids.max")
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newPoolProducer(t)
				dir := parkOne(t, p)
				p.pool.mu.Lock()
				c := p.pool.idle[0]
				p.pool.mu.Unlock()
				command := tc.change(dir, c)
				if command == "" {
					t.Skip("no process count here")
				}
				o, _ := runIn(t, p, Command{Command: command})
				require.Equal(t, "exit code: 0", o.Detail)
				assert.NoDirExists(t, dir, "removed, nested cgroup and all")
				assert.Empty(t, pooledCgroups(p))
				requireQuiet(t, p)
			})
		}
	})

	t.Run("a frozen or unproven cgroup is not reused", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			change func(c *taskCgroup)
		}{
			{"frozen", func(c *taskCgroup) {
				require.NoError(t, writeFile(c.dir+"/cgroup.freeze", "1"))
				require.Equal(t, 0, c.look()) // as a settle does
			}},
			{"its settle failed", func(c *taskCgroup) { c.proven = false }},
			{"it was killed", func(c *taskCgroup) { c.killed = true }},
			{"its count said more than the leader was left", func(c *taskCgroup) { c.alone = false }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newPoolProducer(t)
				c, err := p.pool.get(p.cfg.logger)
				require.NoError(t, err)
				require.Equal(t, 0, c.look()) // as a settle that found nothing left
				c.proven, c.alone = true, true
				tc.change(c)
				require.NoError(t, c.release())
				assert.NoDirExists(t, c.dir)
				assert.Empty(t, pooledCgroups(p))
			})
		}
		t.Run("as a control, a proven cgroup is kept", func(t *testing.T) {
			p := newPoolProducer(t)
			c, err := p.pool.get(p.cfg.logger)
			require.NoError(t, err)
			require.Equal(t, 0, c.look())
			c.proven, c.alone = true, true
			require.NoError(t, c.release())
			assert.Equal(t, []string{c.dir}, pooledCgroups(p))
		})
	})

	t.Run("at most poolMax empty cgroups are kept", func(t *testing.T) {
		p := newPoolProducer(t)
		const n = poolMax + 4
		var tasks []*testTask
		for range n { // all running at once: n cgroups
			tasks = append(tasks, startTask(t, p, Command{Command: "read -r _", Stdin: StdinPipe}))
		}
		for _, h := range tasks {
			require.NoError(t, h.Input(nil, true))
		}
		var wg sync.WaitGroup
		for _, h := range tasks {
			wg.Go(func() { assert.Equal(t, "exit code: 1", h.awaitDone(t, settleLimit).Detail) })
		}
		wg.Wait()
		assert.Len(t, pooledCgroups(p), poolMax)
		requireQuiet(t, p)
	})

	t.Run("a cgroup unused for poolIdle is removed", func(t *testing.T) {
		p := newPoolProducer(t)
		dir := parkOne(t, p)
		require.NoError(t, p.pool.trim(time.Now()))
		assert.Equal(t, []string{dir}, pooledCgroups(p), "kept while fresh")
		require.NoError(t, p.pool.trim(time.Now().Add(poolIdle)))
		assert.NoDirExists(t, dir)
		assert.Empty(t, pooledCgroups(p))
		assert.Empty(t, p.tree.taskDirs(p.taskDirPrefix()))
	})

	t.Run("a garbage-collected producer's kept cgroups are removed", func(t *testing.T) {
		dir, prefix, tree := func() (string, string, *cgroupTree) {
			p := newTestProducer(t, WithContainment(CgroupContainment))
			o, _ := runIn(t, p, Command{Command: "true"})
			require.Equal(t, "exit code: 0", o.Detail)
			parked := pooledCgroups(p)
			require.Len(t, parked, 1)
			return parked[0], p.taskDirPrefix(), p.tree
		}()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(settleLimit)
		for {
			runtime.GC()
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("%s still exists after the producer was collected", dir)
			}
		}
		assert.Empty(t, tree.taskDirs(prefix))
	})
}

// The cgroups of tasks without limits are named for the pool: task-<producer>-p<k>.
func TestPooledCgroupsAreNamedForTheirProducer(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment))
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	o, out := runIn(t, p, Command{Command: printCgroup})
	require.Equal(t, "exit code: 0", o.Detail)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(out), "/"+p.taskDirPrefix()+"p1"), out)
}

// A thread that forked a leader from inside the task's v1 cgroups (the process
// count on a hybrid mount) goes back to this process's v1 cgroups: after many
// starts, every thread of this process is where the process is.
func TestSpawningThreadsReturnToThisProcesssCgroups(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment))
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				h := startTask(t, p, Command{Command: "true"})
				assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
			}
		})
	}
	wg.Wait()
	v1Lines := func(b []byte) []string {
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(line, "0::") {
				lines = append(lines, line)
			}
		}
		return lines
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	want := v1Lines(self)
	tids, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid.Name() + "/cgroup")
		if os.IsNotExist(err) {
			continue // the thread ended meanwhile
		}
		require.NoError(t, err)
		assert.Equal(t, want, v1Lines(b), "thread %s", tid.Name())
	}
}

// A command's standard streams: stdin is /dev/null (one descriptor shared by every
// task, opened once), stdout and stderr are one blocking pipe (the read end alone
// is non-blocking, in this process).
func TestTheShellsStreamsAreDevNullAndOneBlockingPipe(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode)
		t.Cleanup(func() { assert.NoError(t, p.Close()) })
		for range 2 { // the second start reuses the shared /dev/null
			o, out := runIn(t, p, Command{Command: `readlink /proc/self/fd/0; ` +
				`[ "$(readlink /proc/$$/fd/1)" = "$(readlink /proc/$$/fd/2)" ] && echo merged; ` +
				`echo nonblock $(( 0$(awk '/^flags/ {print $2}' /proc/$$/fdinfo/1) & 04000 ))`})
			assert.Equal(t, "exit code: 0", o.Detail)
			assert.Equal(t, "/dev/null\nmerged\nnonblock 0\n", out)
		}
		requireQuiet(t, p)
	})
}

// keyedValue reads "key N" lines of a flat-keyed cgroup file (cgroup.events,
// memory.events, pids.events, cpu.stat) without allocating.
func TestKeyedValueReadsFlatKeyedFiles(t *testing.T) {
	for _, tc := range []struct {
		name, file, key string
		want            int64
		found           bool
	}{
		{"the first line", "populated 1\nfrozen 0\n", "populated", 1, true},
		{"a later line", "populated 0\nfrozen 1\n", "frozen", 1, true},
		{"no final newline", "max 7", "max", 7, true},
		{"a key that is a prefix of another", "nr_periods 3\nnr_throttled 9\n", "nr_throttled", 9, true},
		{"a missing key", "populated 0\n", "frozen", 0, false},
		{"a negative value", "low -2\n", "low", -2, true},
		{"a value that is not a number", "populated x\n", "populated", 0, false},
		{"an empty file", "", "populated", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := keyedValue([]byte(tc.file), tc.key)
			assert.Equal(t, tc.found, found)
			assert.Equal(t, tc.want, got)
		})
	}
	b := []byte("populated 0\nfrozen 0\n")
	assert.Zero(t, testing.AllocsPerRun(100, func() { keyedValue(b, "frozen") }), "allocations")
}

// Close releases every descriptor the producer keeps between tasks: its /dev/null
// and its kept cgroups' (directory, cgroup.events, process count, the twin's
// tasks and pids.max).
func TestCloseReleasesEveryDescriptor(t *testing.T) {
	// The descriptors open now, by number and what they name: a descriptor of an
	// earlier test's work may close meanwhile, which is not this producer's doing.
	openFDs := func() map[string]string {
		entries, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		fds := map[string]string{}
		for _, e := range entries {
			target, err := os.Readlink("/proc/self/fd/" + e.Name())
			if err == nil {
				fds[e.Name()] = target
			}
		}
		return fds
	}
	opened := func(before, after map[string]string) []string {
		var added []string
		for fd, target := range after {
			if before[fd] != target {
				added = append(added, fd+" → "+target)
			}
		}
		return added
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		quiesceEvents() // an earlier test's watch may still be ending
		before := openFDs()
		p := newTestProducer(t, mode)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				h := startTask(t, p, Command{Command: "true"})
				assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
				h.Release()
			})
		}
		wg.Wait()
		// A task that leaves a process: its settle watches cgroup events, whose
		// inotify instance ends in the background after the last watch.
		h := startTask(t, p, Command{Command: "sleep 1000 & exit 0"})
		assert.Equal(t, messages.Completed, h.awaitDone(t, settleLimit).Status)
		h.Release()
		if p.Containment() == CgroupContainment {
			assert.NotEmpty(t, pooledCgroups(p), "kept cgroups, with their descriptors")
		}
		require.NoError(t, p.Close())
		assert.Empty(t, opened(before, openFDs()), "descriptors opened and left open")
		// Close returned once the reader closed its stopped channel, its last act; the
		// goroutine itself may still be on its way out (a loaded make flake saw it
		// runnable at read's closing brace). Look until it is gone, within a bound.
		watchers := func() []string {
			buf := make([]byte, 1<<20)
			var found []string
			for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
				if strings.Contains(g, "bash.(*watcher)") {
					found = append(found, g)
				}
			}
			return found
		}
		for deadline := time.Now().Add(settleLimit); len(watchers()) > 0 && time.Now().Before(deadline); {
			pause(time.Millisecond)
		}
		assert.Empty(t, watchers(), "a goroutine of the events watch after Close")
	})
}

// A running task holds no descriptor of its cgroups, and neither does a kept
// cgroup: every descriptor of this process is copied and closed by each later
// spawn, so descriptors per task would make a burst of starts cost O(n²).
func TestNoDescriptorOfATaskCgroupIsHeld(t *testing.T) {
	requireCgroups(t)
	p := newTestProducer(t, WithContainment(CgroupContainment))
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	heldUnder := func() []string {
		entries, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		var held []string
		for _, e := range entries {
			target, err := os.Readlink("/proc/self/fd/" + e.Name())
			if err == nil && strings.Contains(target, "/"+p.tree.name+"/") {
				held = append(held, target)
			}
		}
		return held
	}
	for round := range 2 { // a new cgroup, then a kept one
		h := startTask(t, p, Command{Command: "read -r _", Stdin: StdinPipe})
		assert.Empty(t, heldUnder(), "round %d, while the task runs", round)
		require.NoError(t, h.Input(nil, true))
		assert.Equal(t, "exit code: 1", h.awaitDone(t, settleLimit).Detail)
		assert.Len(t, pooledCgroups(p), 1)
		assert.Empty(t, heldUnder(), "round %d, while its cgroup is kept", round)
	}
}
