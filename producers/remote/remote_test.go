//go:build linux

package remote

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

func TestBackgroundCommandOnAWorker(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	w, _ := c.worker("w1")
	o := c.owner()

	t.Run("output is read and the outcome collected; the command sees TASKRT_WORKER", func(t *testing.T) {
		id := o.start(t, "", bash.Command{Command: `echo "on=$TASKRT_WORKER"; read -t 0.2 x </dev/zero; echo end; exit 3`})
		r := o.until(t, id, "", `on=\w+`)
		assert.Equal(t, "on=w1\n", r.Output)
		s := o.settled(t, id, "")
		assert.Equal(t, messages.Completed, s.Status)
		assert.Equal(t, "exit code: 3", s.Detail)
		rr, err := o.rt.Tasks().Read(ctx, id, "")
		require.NoError(t, err)
		assert.Equal(t, "end\n", rr.Output, "the rest of the output, after the consuming read")
	})

	t.Run("kill stops the command on the worker and settles killed", func(t *testing.T) {
		id := o.start(t, "", bash.Command{Command: `echo ready; sleep 60`})
		o.until(t, id, "", `ready`)
		kr, _, err := o.rt.Tasks().Kill(ctx, id, "", "no longer needed")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, kr)
		s := o.settled(t, id, "")
		assert.Equal(t, messages.Killed, s.Status)
		assert.Equal(t, "signal: SIGTERM", s.Detail)
		<-w.Drained()
		assert.Zero(t, w.Processes(), "the worker's processes are gone once the kill settled")
	})

	t.Run("input reaches the command's stdin, in order, and eof closes it", func(t *testing.T) {
		id := o.start(t, "", bash.Command{Command: `while read -r l; do echo "got $l"; done; echo bye`, Stdin: bash.StdinPipe})
		require.NoError(t, o.rt.Tasks().Input(ctx, id, "", []byte("one\n"), false))
		require.NoError(t, o.rt.Tasks().Input(ctx, id, "", []byte("two\n"), true))
		r := o.until(t, id, "", `bye`)
		assert.Equal(t, "got one\ngot two\nbye\n", r.Output)
		s := o.settled(t, id, "")
		assert.Equal(t, "exit code: 0", s.Detail)
		err := o.rt.Tasks().Input(ctx, id, "", []byte("late\n"), false)
		assert.ErrorIs(t, err, messages.ErrTaskEnded)
	})

	t.Run("output of many frames arrives whole", func(t *testing.T) {
		const n = 2_000_000 // two frames at least, many when the worker's buffer grows in small writes
		id := o.start(t, "", bash.Command{Command: `head -c 2000000 /dev/zero | tr '\0' a`})
		s := o.settled(t, id, "")
		assert.Equal(t, "exit code: 0", s.Detail)
		pk, err := o.rt.Tasks().Peek(ctx, id, "", 0, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(n), pk.Written, "every byte reached the owner node")
	})

	t.Run("a foreign owner is fenced exactly as for a local task", func(t *testing.T) {
		require.NoError(t, o.rt.Agents().Register(ctx, "a1"))
		require.NoError(t, o.rt.Agents().Register(ctx, "a2"))
		defer func() {
			require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
			require.NoError(t, o.rt.Agents().Dispose(ctx, "a2"))
		}()
		id := o.start(t, "a1", bash.Command{Command: `sleep 60`})
		_, unknownErr := o.rt.Tasks().Get(ctx, "bash-999", "a2")
		require.ErrorIs(t, unknownErr, messages.ErrTaskNotFound)
		for _, caller := range []messages.AgentID{"a2", ""} {
			_, err := o.rt.Tasks().Get(ctx, id, caller)
			assert.Equal(t, strings.ReplaceAll(unknownErr.Error(), "bash-999", string(id)), err.Error(), "get by %q", caller)
			_, err = o.rt.Tasks().Read(ctx, id, caller)
			assert.ErrorIs(t, err, messages.ErrTaskNotFound, "read by %q", caller)
			_, _, err = o.rt.Tasks().Kill(ctx, id, caller, "")
			assert.ErrorIs(t, err, messages.ErrTaskNotFound, "kill by %q", caller)
			err = o.rt.Tasks().Input(ctx, id, caller, []byte("x"), false)
			assert.ErrorIs(t, err, messages.ErrTaskNotFound, "input by %q", caller)
		}
		s, err := o.rt.Tasks().Get(ctx, id, "a1")
		require.NoError(t, err)
		assert.Equal(t, messages.Running, s.Status, "the foreign calls left the task alone")
	})

	t.Run("an unreported task gets exactly one notice, a killed one none", func(t *testing.T) {
		n := newNotices()
		require.NoError(t, o.rt.Agents().Register(ctx, "a3", n.injector("a3")))
		quiet := o.start(t, "a3", bash.Command{Command: `echo one`})
		killed := o.start(t, "a3", bash.Command{Command: `sleep 60`})
		_, _, err := o.rt.Tasks().Kill(ctx, killed, "a3", "")
		require.NoError(t, err)
		o.settled(t, killed, "a3") // reported: no notice
		<-n.more
		o.settled(t, quiet, "a3")
		require.NoError(t, o.rt.Agents().Dispose(ctx, "a3"))
		got := n.of("a3")
		require.Len(t, got, 1, "notices: %q", got)
		assert.Contains(t, got[0], "background task "+string(quiet)+" (bash: echo one) finished [status: completed, exit code: 0]")
	})

	t.Run("a foreground Run returns the output and exit code", func(t *testing.T) {
		r, err := o.p.Run(ctx, bash.Command{Command: `echo fg; exit 4`}, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "fg\n", r.Output)
		assert.Equal(t, 4, r.ExitCode)
		assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 4"}, r.Outcome)
		r, err = o.p.Run(ctx, bash.Command{Command: `sleep 60`}, 200*time.Millisecond)
		require.NoError(t, err)
		assert.True(t, r.TimedOut)
		assert.Equal(t, messages.Killed, r.Outcome.Status)
	})
	<-w.Drained()
	assert.Zero(t, o.p.Live())
}

func TestDisposalKillsRemoteTasksAndReturnsWhenTheyAreGone(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	w1, _ := c.worker("w1")
	w2, _ := c.worker("w2")
	o := c.owner()
	require.NoError(t, o.rt.Agents().Register(ctx, "a1"))
	var ids []messages.TaskID
	for range 4 {
		id := o.start(t, "a1", bash.Command{Command: `trap 'echo term' TERM; echo up; while :; do sleep 0.05; done`})
		o.until(t, id, "a1", "up")
		ids = append(ids, id)
	}
	require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
	assert.Zero(t, w1.Processes()+w2.Processes(), "every process of the owner's remote tasks is gone when Dispose returns")
	assert.Zero(t, o.p.Live())
	for _, id := range ids {
		_, err := o.rt.Tasks().Get(ctx, id, "a1")
		assert.ErrorIs(t, err, messages.ErrTaskNotFound, "disposed with its owner")
	}
}

func TestPlacement(t *testing.T) {
	ctx := context.Background()
	t.Run("no worker: the start fails with ErrNoWorker and burns no id", func(t *testing.T) {
		c := newCluster(t)
		o := c.owner()
		_, err := o.rt.Tasks().Start(ctx, o.p.Spec("", bash.Command{Command: "true"}))
		require.ErrorIs(t, err, ErrNoWorker)
		c.worker("w1")
		id := o.start(t, "", bash.Command{Command: "true"})
		assert.Equal(t, messages.TaskID("bash-1"), id)
		o.settled(t, id, "")
	})
	t.Run("starts go to workers with a free slot; with none the start fails", func(t *testing.T) {
		c := newCluster(t)
		w1, _ := c.worker("w1", WithMaxTasks(1))
		w2, _ := c.worker("w2", WithMaxTasks(1))
		o := c.owner()
		got := map[string]messages.TaskID{}
		for range 2 {
			id := o.start(t, "", bash.Command{Command: `echo "on=$TASKRT_WORKER"; sleep 60`})
			r := o.until(t, id, "", `on=\w+`)
			got[strings.TrimSpace(strings.TrimPrefix(r.Output, "on="))] = id
		}
		assert.Len(t, got, 2, "one command on each worker: %v", got)
		_, err := o.rt.Tasks().Start(ctx, o.p.Spec("", bash.Command{Command: "true"}))
		require.ErrorIs(t, err, ErrNoWorker)
		_, _, err = o.rt.Tasks().Kill(ctx, got["w1"], "", "")
		require.NoError(t, err)
		o.settled(t, got["w1"], "")
		id := o.start(t, "", bash.Command{Command: `echo "on=$TASKRT_WORKER"`})
		assert.Equal(t, "on=w1\n", o.until(t, id, "", `on=\w+`).Output, "the freed slot takes the next start")
		assert.Equal(t, messages.TaskID("bash-3"), id, "the failed start burned no id")
		_, _, err = o.rt.Tasks().Kill(ctx, got["w2"], "", "")
		require.NoError(t, err)
		o.settled(t, got["w2"], "")
		<-w1.Drained()
		<-w2.Drained()
	})
}

func TestWorkerRefusesStaleWork(t *testing.T) {
	c := newCluster(t)
	w, _ := c.worker("w1")
	o := c.owner()
	epoch, err := o.p.Epoch()
	require.NoError(t, err)
	nc := c.conn()
	ask := func(req startReq) startReply {
		t.Helper()
		msg, err := nc.Request(subjects{defaultPrefix}.start(), encode(req), 5*time.Second)
		require.NoError(t, err)
		var rep startReply
		require.NoError(t, json.Unmarshal(msg.Data, &rep))
		return rep
	}
	for _, tc := range []struct {
		name  string
		owner string
		epoch uint64
	}{
		{"an older epoch of the owner node", o.p.Node(), epoch - 1},
		{"a newer epoch than the owner node holds", o.p.Node(), epoch + 1},
		{"an owner node without a lease", "nobody", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := ask(startReq{Task: "x-" + tc.name[:4], Owner: tc.owner, Epoch: tc.epoch, Command: "echo ran"})
			assert.Contains(t, rep.Err, "not current (stale command)")
			assert.Zero(t, w.Live(), "nothing started")
		})
	}
	t.Run("a start replayed under the same task key never runs twice", func(t *testing.T) {
		req := startReq{Task: o.p.Node() + "-replayed", Owner: o.p.Node(), Epoch: epoch, Command: "echo ran; sleep 60"}
		first := ask(req)
		require.Empty(t, first.Err)
		<-w.Drained() // it ran and ended: the owner node never placed it, so it answered its output with a kill
		second := ask(req)
		assert.Contains(t, second.Err, "already ran or is already running")
		assert.Zero(t, w.Live(), "the replay started nothing")
	})
}

func TestLostLeases(t *testing.T) {
	ctx := context.Background()
	t.Run("a worker cut off from NATS: its tasks settle worker lost, its processes are killed", func(t *testing.T) {
		c := newCluster(t)
		w, wnc := c.worker("w1")
		o := c.owner()
		id := o.start(t, "", bash.Command{Command: `echo up; sleep 60`})
		o.until(t, id, "", "up")
		cut := time.Now()
		wnc.Close()
		s := o.settled(t, id, "")
		lost := time.Since(cut)
		assert.Equal(t, messages.Failed, s.Status)
		assert.Equal(t, "worker lost: w1", s.Detail)
		assert.Less(t, lost, lapseAfter(testLease)+testLease, "lost within the lease and a bounded margin")
		<-w.Drained() // the worker fenced itself: it killed the command
		assert.Zero(t, w.Processes())
		t.Logf("worker cut off → worker lost: %s", lost.Round(time.Millisecond))
	})
	t.Run("an owner node cut off from NATS: it fails its tasks first, the worker kills them", func(t *testing.T) {
		c := newCluster(t)
		w, _ := c.worker("w1")
		o := c.owner()
		require.NoError(t, o.rt.Agents().Register(ctx, "a1"))
		id := o.start(t, "a1", bash.Command{Command: `echo up; sleep 60`})
		o.until(t, id, "a1", "up")
		cut := time.Now()
		o.nc.Close()
		s := o.settled(t, id, "a1")
		fenced := time.Since(cut)
		assert.Equal(t, messages.Failed, s.Status)
		assert.True(t, strings.HasPrefix(s.Detail, "owner lease lost: "), s.Detail)
		<-w.Drained()
		killed := time.Since(cut)
		assert.Zero(t, w.Processes())
		assert.Less(t, fenced, killed, "the owner node fenced itself before the worker acted")
		assert.Less(t, killed, lapseAfter(testLease)+testLease, "killed within the lease and the grace")
		require.NoError(t, o.rt.Agents().Dispose(ctx, "a1"))
		t.Logf("owner cut off → owner fenced: %s, its processes gone on the worker: %s", fenced.Round(time.Millisecond), killed.Round(time.Millisecond))
	})
}
