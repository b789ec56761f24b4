//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
)

// pausedOwnerEnv runs an owner node for TestOwnerNodePausedPastItsLease: "URL
// LEASE DIR MARKER".
const pausedOwnerEnv = "TASKRT_TEST_PAUSED_OWNER"

func init() {
	if spec := os.Getenv(pausedOwnerEnv); spec != "" {
		os.Exit(pausedOwner(spec))
	}
}

// pausedOwner is an owner node that is stopped and continued by the test. It
// starts three commands (the first reads its stdin into DIR/in), says "node
// NODE EPOCH" and "started"; on SIGCONT it at once tries to act on its old lease
// — a kill, an input and a start — racing its own fence, reports how each of its
// three tasks settled ("settled I STATUS DETAIL"), starts one command under its
// new lease ("new EPOCH") and says "done".
func pausedOwner(spec string) int {
	f := strings.Fields(spec)
	lease, _ := time.ParseDuration(f[1])
	dir, mark := f[2], f[3]
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
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
	epoch, _ := p.Epoch()
	fmt.Printf("node %s %d\n", p.Node(), epoch)
	var hooks []messages.Hooks
	for i := range 3 {
		c := bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/run-%d; echo up; exec sleep 60`, dir, i), Env: []string{mark}}
		if i == 0 {
			c = bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/run-0; echo up; exec cat >> %s/in`, dir, dir), Env: []string{mark}, Stdin: bash.StdinPipe}
		}
		h, err := p.Start(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		waitOutput(h)
		hooks = append(hooks, h)
	}
	fmt.Println("started")
	<-cont
	// The worst case of a fence that loses the race: requests under the old epoch
	// sent the moment the process runs again, straight on the wire (the subjects
	// and fields of the package documentation), for every task on every worker.
	for i := range 3 {
		key := fmt.Sprintf("%s-%d", p.Node(), i+1)
		for _, w := range []string{"w1", "w2"} {
			_, _ = nc.Request("taskrt.w."+w+".kill", fmt.Appendf(nil, `{"task":%q,"owner":%q,"epoch":%d,"reason":"stale"}`, key, p.Node(), epoch), lease)
			_, _ = nc.Request("taskrt.w."+w+".input", fmt.Appendf(nil, `{"task":%q,"owner":%q,"epoch":%d,"data":"YWZ0ZXIgdGhlIHBhdXNlCg=="}`, key, p.Node(), epoch), lease)
		}
	}
	_, _ = nc.Request("taskrt.start", fmt.Appendf(nil, `{"task":"%s-stale","owner":%q,"epoch":%d,"command":"echo $$ >> %s/stale","env":[%q],"limits":{}}`, p.Node(), p.Node(), epoch, dir, mark), lease)
	var wg sync.WaitGroup
	wg.Go(func() { _ = hooks[0].Input([]byte("after the pause\n"), false) })
	wg.Go(func() { _ = hooks[1].Cancel("after the pause") })
	wg.Go(func() {
		if h, err := p.Start(bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/late`, dir), Env: []string{mark}}); err == nil {
			<-h.Done
			h.Release()
		}
	})
	for i, h := range hooks {
		o := <-h.Done
		fmt.Printf("settled %d %s %s\n", i, o.Status, o.Detail)
	}
	wg.Wait()
	// A client retries its start, as one would, until the node holds its new
	// lease and takes starts again.
	retry := time.NewTicker(lease / 4)
	for {
		h, err := p.Start(bash.Command{Command: "true"})
		if err == nil {
			<-h.Done
			e, _ := p.Epoch()
			fmt.Printf("new %d\n", e)
			break
		}
		<-retry.C
	}
	retry.Stop()
	fmt.Println("done")
	_ = p.Close(context.Background())
	nc.Close()
	return 0
}

// auditor records every message on the server, in the order one subscription
// receives them, with when: requests of one owner node and the answers to them.
type auditor struct {
	mu   sync.Mutex // protects msgs
	msgs []audited
	sub  *nats.Subscription
}

type audited struct {
	subj, reply string
	data        []byte
	at          time.Time
}

func audit(t *testing.T, url string) *auditor {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	a := &auditor{}
	a.sub, err = nc.Subscribe(">", func(m *nats.Msg) {
		a.mu.Lock()
		a.msgs = append(a.msgs, audited{m.Subject, m.Reply, m.Data, time.Now()})
		a.mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return a
}

// staleEffects lists the requests of node under epoch, sent from since on, that a
// worker answered with success: starts, kills and inputs that took effect.
func (a *auditor) staleEffects(node string, epoch uint64, since time.Time) (sent int, took []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	type req struct {
		Owner string `json:"owner"`
		Epoch uint64 `json:"epoch"`
	}
	pending := map[string]string{} // reply subject → request subject
	for _, m := range a.msgs {
		if m.at.Before(since) {
			continue
		}
		if strings.HasSuffix(m.subj, ".start") || strings.HasSuffix(m.subj, ".kill") || strings.HasSuffix(m.subj, ".input") {
			var r req
			if json.Unmarshal(m.data, &r) == nil && r.Owner == node && r.Epoch == epoch {
				sent++
				if m.reply != "" {
					pending[m.reply] = m.subj
				}
			}
			continue
		}
		if what, ok := pending[m.subj]; ok {
			var rep map[string]any
			_ = json.Unmarshal(m.data, &rep)
			success := len(rep) == 0 // kill, input: an empty reply
			if strings.HasSuffix(what, ".start") {
				_, hasErr := rep["err"]
				_, full := rep["full"]
				success = !hasErr && !full
			}
			if success {
				took = append(took, what+" → "+string(m.data))
			}
		}
	}
	return sent, took
}

func TestOwnerNodePausedPastItsLease(t *testing.T) {
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
	a := audit(t, srv.URL())
	mark, dir := marker(t), t.TempDir()
	cmd, out := helper(t, fmt.Sprintf("%s=%s %s %s %s", pausedOwnerEnv, srv.URL(), testLease, dir, mark))
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := func() string {
		t.Helper()
		require.True(t, out.Scan(), "a line from the owner node")
		return out.Text()
	}
	var node string
	var epoch uint64
	_, err := fmt.Sscanf(line(), "node %s %d", &node, &epoch)
	require.NoError(t, err)
	require.Equal(t, "started", line())
	require.Equal(t, 3, workers[0].Live()+workers[1].Live())

	stopped := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	for _, w := range workers {
		<-w.Drained() // the lease lapsed and the workers killed its commands
	}
	killed := time.Since(stopped)
	assert.Empty(t, survivors(mark), "no process of the paused node's commands runs")
	resumed := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	for i := range 3 {
		var got int
		var status, detail string
		l := line()
		_, err := fmt.Sscanf(l, "settled %d %s", &got, &status)
		require.NoError(t, err, l)
		_, detail, _ = strings.Cut(strings.TrimPrefix(l, fmt.Sprintf("settled %d %s", got, status)), " ")
		assert.Equal(t, i, got)
		assert.Equal(t, "failed", status, "task %d: its own side failed it", i)
		assert.True(t, strings.HasPrefix(detail, "owner lease lost: "), "task %d: %q", i, detail)
	}
	var newEpoch uint64
	_, err = fmt.Sscanf(line(), "new %d", &newEpoch)
	require.NoError(t, err)
	assert.Greater(t, newEpoch, epoch, "resumed, the node works under a new lease")
	require.Equal(t, "done", line())
	require.NoError(t, cmd.Wait())

	sent, took := a.staleEffects(node, epoch, resumed)
	assert.Empty(t, took, "no start, kill or input under the old epoch took effect after the pause")
	b, err := os.ReadFile(filepath.Join(dir, "in"))
	require.True(t, err == nil || os.IsNotExist(err), "%v", err)
	assert.NotContains(t, string(b), "after the pause", "the input under the old epoch never reached the command")
	_, err = os.Stat(filepath.Join(dir, "stale"))
	assert.True(t, os.IsNotExist(err), "the start under the old epoch never ran")
	assert.GreaterOrEqual(t, sent, 13, "the stale requests were sent (and audited)")
	for i := range 3 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", i)))
		require.NoError(t, err)
		assert.Len(t, strings.Fields(string(b)), 1, "command %d ran exactly once", i)
	}
	for _, w := range workers {
		<-w.Drained()
	}
	assert.Empty(t, survivors(mark))
	t.Logf("owner SIGSTOP → its commands gone on both workers: %s; %d requests under the old epoch after SIGCONT, %d took effect",
		killed.Round(time.Millisecond), sent, len(took))
}

func TestWorkerRestartedUnderTheSameName(t *testing.T) {
	srv := newServer(t)
	nc, err := remote.Connect(srv.URL())
	require.NoError(t, err)
	defer nc.Close()
	p, err := remote.New(nc, remote.WithLease(testLease))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	mark, dir := marker(t), t.TempDir()
	args := fmt.Sprintf("%s=-nats %s -name again -lease %s -dir %s", workerHelperEnv, srv.URL(), testLease, t.TempDir())

	first, out := helper(t, args)
	require.True(t, out.Scan())
	require.Contains(t, out.Text(), "worker again ready")
	var hooks []messages.Hooks
	for i := range 2 {
		h, err := p.Start(bash.Command{Command: fmt.Sprintf(`echo $$ >> %s/run-%d; echo up; exec sleep 60`, dir, i), Env: []string{mark}})
		require.NoError(t, err)
		waitOutput(h)
		hooks = append(hooks, h)
	}
	killed := time.Now()
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	second, out2 := helper(t, args)
	defer func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() }()
	ready := make(chan string, 1)
	go func() {
		if out2.Scan() {
			ready <- out2.Text()
		}
		close(ready)
	}()
	for _, h := range hooks {
		assert.Equal(t, messages.Outcome{Status: messages.Failed, Detail: "worker lost: again"}, <-h.Done)
		h.Release()
	}
	lost := time.Since(killed)
	assert.Contains(t, <-ready, "worker again ready", "the new life starts once the old lease has ended")
	restarted := time.Since(killed)
	_ = first.Wait() // its guard killed what the first life left
	assert.Empty(t, survivors(mark), "nothing of the previous life runs")

	h, err := p.Start(bash.Command{Command: `echo "on=$TASKRT_WORKER"`})
	require.NoError(t, err)
	o := <-h.Done
	assert.Equal(t, "exit code: 0", o.Detail)
	assert.Equal(t, "on=again\n", string(h.ReadOutput()))
	h.Release()
	for i := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("run-%d", i)))
		require.NoError(t, err)
		assert.Len(t, strings.Fields(string(b)), 1, "command %d of the first life ran once, and was not resumed", i)
	}
	t.Logf("worker SIGKILL → worker lost: %s; restarted under the same name, ready: %s", lost.Round(time.Millisecond), restarted.Round(time.Millisecond))
}
