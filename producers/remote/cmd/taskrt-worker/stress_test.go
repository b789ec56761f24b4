//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
)

// stressNode is an owner node of the stress: a producer, a runtime, and what it
// saw settle and notify.
type stressNode struct {
	p  *remote.Producer
	rt *actors.Runtime

	mu      sync.Mutex // protects settled, notices
	settled map[messages.TaskID][]messages.Snapshot
	notices map[messages.AgentID][]string
	change  chan struct{} // poked on each settlement and notice
}

func (n *stressNode) poke() {
	select {
	case n.change <- struct{}{}:
	default:
	}
}

// until waits until ok holds (checked under n.mu on every change).
func (n *stressNode) until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	limit := time.NewTimer(60 * time.Second)
	defer limit.Stop()
	for {
		n.mu.Lock()
		done := ok()
		n.mu.Unlock()
		if done {
			return
		}
		select {
		case <-n.change:
		case <-limit.C:
			t.Fatalf("%s: not within 60s", what)
		}
	}
}

// stressTask is what the stress knows of one started task.
type stressTask struct {
	node     *stressNode
	id       messages.TaskID
	agent    messages.AgentID
	run      int  // its command records its start in run-<run>
	killed   bool // its agent killed it while it ran (reported: no notice)
	lateKill bool // its agent's kill found it settled (a notice may have gone out before)
	disposed bool // its agent was disposed (no notice owed)
}

func TestManyOwnersOnTwoWorkersWithACrash(t *testing.T) {
	const (
		owners   = 20
		perOwner = 10
		crashAt  = owners * perOwner / 2
	)
	ctx := context.Background()
	srv := newServer(t)
	mark, dir := marker(t), t.TempDir()
	var procs []*workerProc
	for _, name := range []string{"wa", "wb"} {
		procs = append(procs, startWorkerProc(t, srv.URL(), name))
	}
	var nodes []*stressNode
	for range 2 {
		nc, err := remote.Connect(srv.URL())
		require.NoError(t, err)
		defer nc.Close()
		p, err := remote.New(nc, remote.WithLease(testLease))
		require.NoError(t, err)
		rt, err := actors.NewRuntime()
		require.NoError(t, err)
		n := &stressNode{p: p, rt: rt, settled: map[messages.TaskID][]messages.Snapshot{}, notices: map[messages.AgentID][]string{}, change: make(chan struct{}, 1)}
		detach := rt.Tasks().AttachSurface("stress")
		unsubscribe := rt.Tasks().OnDone(func(s messages.Snapshot) {
			n.mu.Lock()
			n.settled[s.ID] = append(n.settled[s.ID], s)
			n.mu.Unlock()
			n.poke()
			_, _ = rt.Tasks().Notify(ctx, s.ID, fmt.Sprintf("background task %s finished [status: %s, %s]", s.ID, s.Status, s.Detail))
		})
		defer func() {
			unsubscribe()
			detach()
			require.NoError(t, rt.Close(ctx))
			require.NoError(t, p.Close(ctx))
		}()
		nodes = append(nodes, n)
	}

	var (
		started   atomic.Int64
		runSeq    atomic.Int64
		crashOnce sync.Once
		crashed   = make(chan struct{})
		mu        sync.Mutex // protects tasks, fenceBreaks, startErrs
		tasks     []*stressTask
		broken    []string
		startErrs []string
		wg        sync.WaitGroup
	)
	crash := func() {
		crashOnce.Do(func() {
			require.NoError(t, procs[0].cmd.Process.Signal(syscall.SIGKILL))
			close(crashed)
		})
	}
	for i := range owners {
		node := nodes[i%2]
		agent := messages.AgentID(fmt.Sprintf("a%d", i))
		foreign := messages.AgentID(fmt.Sprintf("a%d", (i+2)%owners)) // same node, another owner
		inject := actors.WithInjector(func(_ context.Context, text string) error {
			node.mu.Lock()
			node.notices[agent] = append(node.notices[agent], text)
			node.mu.Unlock()
			node.poke()
			return nil
		})
		require.NoError(t, node.rt.Agents().Register(ctx, agent, inject))
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 26))
			var mine []*stressTask
			for range perOwner {
				kind := rng.IntN(4)
				var id messages.TaskID
				var err error
				var k int
				for attempt := range 3 { // a start that reached the crashing worker fails; try again
					k = int(runSeq.Add(1)) // each attempt records its starts apart
					record := fmt.Sprintf(`echo $$ >> %s/run-%d; echo up; `, dir, k)
					c := bash.Command{Env: []string{mark}}
					switch kind {
					case 0:
						c.Command = record + "exit 3"
					case 1:
						c.Command = record + "exec sleep 60"
					case 2:
						c.Command, c.Stdin = record+`while read -r l; do echo "got $l"; done`, bash.StdinPipe
					case 3:
						c.Command = record + "sleep 0.3"
					}
					if id, err = node.rt.Tasks().Start(ctx, node.p.Spec(agent, c)); err == nil {
						break
					}
					mu.Lock()
					startErrs = append(startErrs, fmt.Sprintf("attempt %d: %v", attempt, err))
					mu.Unlock()
				}
				if err != nil {
					continue
				}
				st := &stressTask{node: node, id: id, agent: agent, run: k}
				mine = append(mine, st)
				mu.Lock()
				tasks = append(tasks, st)
				mu.Unlock()
				if started.Add(1) == crashAt {
					crash()
				}
				if rng.IntN(4) == 0 { // the fence: another owner can neither kill nor feed it
					_, _, kerr := node.rt.Tasks().Kill(ctx, id, foreign, "foreign")
					ierr := node.rt.Tasks().Input(ctx, id, foreign, []byte("foreign\n"), false)
					if !errors.Is(kerr, messages.ErrTaskNotFound) || !errors.Is(ierr, messages.ErrTaskNotFound) {
						mu.Lock()
						broken = append(broken, fmt.Sprintf("%s of %s: foreign kill %v, input %v", id, agent, kerr, ierr))
						mu.Unlock()
					}
				}
				switch {
				case kind == 2:
					for _, l := range []string{"a\n", "b\n"} {
						_ = node.rt.Tasks().Input(ctx, id, agent, []byte(l), false) // fails once its worker is lost
					}
					_ = node.rt.Tasks().Input(ctx, id, agent, nil, true)
				case kind == 1 && (i%4 != 0 || rng.IntN(2) == 0): // the rest go with their owner's disposal
					kr, _, err := node.rt.Tasks().Kill(ctx, id, agent, "random kill")
					require.NoError(t, err)
					st.killed = kr == messages.KillRequested
					st.lateKill = kr == messages.KillAlreadyTerminal
				}
			}
			if i%4 == 0 { // disposal, with whatever still runs
				for _, st := range mine {
					st.disposed = true
				}
				require.NoError(t, node.rt.Agents().Dispose(ctx, agent))
			}
		})
	}
	wg.Wait()
	<-crashed
	// Every started task settles, exactly once (the crashed worker's as lost).
	for _, n := range nodes {
		n.until(t, "every task settled", func() bool {
			for _, st := range tasks {
				if st.node == n && len(n.settled[st.id]) == 0 {
					return false
				}
			}
			return true
		})
	}
	_ = procs[0].cmd.Wait() // its guard has killed what the crashed worker left
	var lost, completed, killed int
	for _, st := range tasks {
		n := st.node
		n.mu.Lock()
		got := n.settled[st.id]
		n.mu.Unlock()
		require.Len(t, got, 1, "%s settled exactly once", st.id)
		switch s := got[0]; {
		case s.Detail == "worker lost: wa":
			lost++
		case s.Status == messages.Killed:
			killed++
		case s.Status == messages.Completed:
			completed++
		default:
			assert.Fail(t, "unexpected settlement", "%s: %s %s", st.id, s.Status, s.Detail)
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", st.run)))
		if err == nil {
			assert.LessOrEqual(t, len(strings.Fields(string(b))), 1, "%s ran at most once", st.id)
		}
	}
	// Exactly-once notices: one for each unreported task of a live owner, none for a
	// task its owner killed, never two.
	for _, n := range nodes {
		want := map[messages.AgentID]int{}
		for _, st := range tasks {
			if st.node == n && !st.killed && !st.disposed && !st.lateKill {
				want[st.agent]++
			}
		}
		n.until(t, "every notice", func() bool {
			for a, c := range want {
				if len(n.notices[a]) < c {
					return false
				}
			}
			return true
		})
		n.mu.Lock()
		for _, st := range tasks {
			if st.node != n {
				continue
			}
			c := 0
			for _, text := range n.notices[st.agent] {
				if strings.Contains(text, "task "+string(st.id)+" ") {
					c++
				}
			}
			switch {
			case st.killed || st.disposed || st.lateKill:
				assert.LessOrEqual(t, c, 1, "%s: at most one notice", st.id)
				if st.killed {
					assert.Zero(t, c, "%s: killed by its owner, no notice", st.id)
				}
			default:
				assert.Equal(t, 1, c, "%s: exactly one notice", st.id)
			}
		}
		n.mu.Unlock()
	}
	assert.Empty(t, broken, "the fences held")
	assert.Empty(t, survivors(mark), "no process of any task runs on any worker")
	assert.Positive(t, lost, "the crash cost some tasks")
	// A failed start attempt may have run on the crashing worker (it died before
	// answering): at most once, and its process is gone too (survivors above).
	for k := 1; k <= int(runSeq.Load()); k++ {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", k))); err == nil {
			assert.LessOrEqual(t, len(strings.Fields(string(b))), 1, "start attempt %d ran at most once", k)
		}
	}
	t.Logf("%d tasks over %d owners on 2 workers, one SIGKILLed after %d starts: %d completed, %d killed, %d worker lost; %d start attempts failed (%v)",
		len(tasks), owners, crashAt, completed, killed, lost, len(startErrs), startErrs)
}

// workerProc is a taskrt-worker in a process of its own (this test binary).
type workerProc struct {
	cmd  *exec.Cmd
	name string
}

// startWorkerProc starts a worker process named name and waits for its ready line;
// the test's end stops it (SIGTERM: it kills its commands and exits).
func startWorkerProc(t *testing.T, url, name string) *workerProc {
	t.Helper()
	cmd, out := helper(t, fmt.Sprintf("%s=-nats %s -name %s -lease %s -max-tasks 150 -dir %s", workerHelperEnv, url, name, testLease, t.TempDir()))
	require.True(t, out.Scan(), "the ready line of worker %s", name)
	require.Contains(t, out.Text(), "worker "+name+" ready")
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return &workerProc{cmd: cmd, name: name}
}
