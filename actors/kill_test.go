package actors_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

func TestKill(t *testing.T) {
	t.Run("running task: requested, reason forwarded, stopping until settled, reported", func(t *testing.T) {
		rt := newRT(t)
		rec := record(rt)
		f := newFake()
		f.HoldCancel()
		id := start(t, rt, f.spec("bash", "", false))
		res, _, err := rt.Tasks().Kill(bg, id, "", "no longer needed")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, res)
		assert.Equal(t, "no longer needed", <-f.Cancels)
		s, err := rt.Tasks().Get(bg, id, "")
		require.NoError(t, err)
		assert.Equal(t, messages.Stopping, s.Status)
		assert.True(t, s.Reported)
		f.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"})
		got := rec.next(t)
		assert.Equal(t, messages.Killed, got.Status)
		assert.True(t, got.Reported, "a killed task gets no notice")
	})
	t.Run("terminal task: already-terminal, no cancel", func(t *testing.T) {
		rt := newRT(t)
		f := newFake()
		id := start(t, rt, f.spec("bash", "", false))
		f.Finish(messages.Outcome{Status: messages.Completed})
		settleWait(t, rt, id, "")
		res, _, err := rt.Tasks().Kill(bg, id, "", "late")
		require.NoError(t, err)
		assert.Equal(t, messages.KillAlreadyTerminal, res)
		assert.Empty(t, f.Cancels)
	})
	t.Run("a kill that finds the task terminal marks it reported", func(t *testing.T) {
		rt := newRT(t)
		register(t, rt, "a1")
		rec := record(rt)
		f := newFake()
		id := start(t, rt, f.spec("bash", "a1", false))
		f.Finish(messages.Outcome{Status: messages.Completed})
		require.False(t, rec.next(t).Reported, "settled unreported: a notice is owed")
		res, _, err := rt.Tasks().Kill(bg, id, "a1", "late")
		require.NoError(t, err)
		require.Equal(t, messages.KillAlreadyTerminal, res)
		s, err := rt.Tasks().Get(bg, id, "a1")
		require.NoError(t, err)
		assert.True(t, s.Reported, "the kill's answer showed the model the end")
		ok, err := rt.Tasks().Notify(bg, id, "notice")
		require.NoError(t, err)
		assert.False(t, ok, "no notice for a task the model has seen end")
	})
	for _, mode := range []string{"errors", "panics"} {
		t.Run("cancel that "+mode+" fails the call and leaves the task untouched", func(t *testing.T) {
			rt := newRT(t)
			rec := record(rt)
			f := newFake()
			if mode == "errors" {
				f.FailCancel(errBoom)
			} else {
				f.PanicOnCancel()
			}
			id := start(t, rt, f.spec("bash", "", false))
			_, _, err := rt.Tasks().Kill(bg, id, "", "stop")
			require.ErrorIs(t, err, messages.ErrCancelFailed)
			if mode == "errors" {
				require.ErrorIs(t, err, errBoom, "wraps the producer's error")
				assert.Equal(t, "cancel failed for task bash-1: boom", err.Error())
			} else {
				assert.Contains(t, err.Error(), "cancel exploded")
			}
			s, err := rt.Tasks().Get(bg, id, "")
			require.NoError(t, err)
			assert.Equal(t, messages.Running, s.Status)
			assert.False(t, s.Reported)
			f.Finish(messages.Outcome{Status: messages.Completed})
			got := rec.next(t)
			assert.False(t, got.Reported, "notice not suppressed")
		})
	}
}

// The first settled outcome wins, and a terminal snapshot never changes.
func TestFirstOutcomeWinsAndTerminalIsImmutable(t *testing.T) {
	rt := newRT(t)
	f := newFake()
	id := start(t, rt, f.spec("bash", "", false))
	f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
	first := settleWait(t, rt, id, "")
	res, _, err := rt.Tasks().Kill(bg, id, "", "late")
	require.NoError(t, err)
	assert.Equal(t, messages.KillAlreadyTerminal, res)
	again, err := rt.Tasks().Get(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, first, again)
}

func TestProducerContractViolations(t *testing.T) {
	tests := []struct {
		name       string
		settle     func(f *fake)
		wantDetail string
	}{
		{"Done closed without an outcome fails the task", func(f *fake) { f.CloseDone() },
			"producer contract violation: Done closed without an outcome"},
		{"a non-terminal outcome fails the task", func(f *fake) { f.Finish(messages.Outcome{Status: messages.Running}) },
			`producer contract violation: outcome status "running" is not terminal`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRT(t)
			f := newFake()
			id := start(t, rt, f.spec("bash", "", false))
			tc.settle(f)
			s := settleWait(t, rt, id, "")
			assert.Equal(t, messages.Failed, s.Status)
			assert.Equal(t, tc.wantDetail, s.Detail)
		})
	}
}

// A producer whose Done settles before its Cancel returns (a process that dies at once
// on SIGTERM): the kill still answers requested and the task is reported, so the model
// that killed it gets no notice.
func TestKillRacingSettlementIsStillAKill(t *testing.T) {
	for i := 0; i < 50; i++ {
		rt := newRT(t)
		rec := record(rt)
		done := make(chan messages.Outcome, 1)
		returned := make(chan struct{})
		id := start(t, rt, messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) {
			return messages.Hooks{Done: done, Cancel: func(string) error {
				done <- messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}
				// Return only once the settlement has been published.
				<-returned
				return nil
			}}, nil
		}})
		published := make(chan messages.Snapshot, 1)
		go func() { published <- rec.next(t); close(returned) }()
		// The settlement listener runs while Cancel is still blocked.
		res, _, err := rt.Tasks().Kill(bg, id, "", "stop")
		require.NoError(t, err)
		assert.Equal(t, messages.KillRequested, res)
		s, err := rt.Tasks().Get(bg, id, "")
		require.NoError(t, err)
		assert.True(t, s.Reported)
		assert.True(t, (<-published).Reported, "the settlement carried no notice")
		rec.stop()
	}
}

// Every answer to a kill carries the task's snapshot after it, in every state the
// kill can find the task in, so that no second request is needed to show it.
func TestKillAnswersWithTheSnapshot(t *testing.T) {
	cases := []struct {
		name       string
		opts       []actors.Option
		prepare    func(t *testing.T, rt *actors.Runtime) messages.TaskID
		wantResult messages.KillResult
		wantStatus messages.Status
	}{
		{"running: stopping", nil, func(t *testing.T, rt *actors.Runtime) messages.TaskID {
			f := newFake()
			f.HoldCancel()
			t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Killed}) }) // before the runtime's close
			return start(t, rt, f.spec("bash", "", false))
		}, messages.KillRequested, messages.Stopping},
		{"settled, still retained: terminal", nil, func(t *testing.T, rt *actors.Runtime) messages.TaskID {
			f := newFake()
			id := start(t, rt, f.spec("bash", "", false))
			f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
			settleWait(t, rt, id, "")
			return id
		}, messages.KillAlreadyTerminal, messages.Completed},
		{"a tombstone: terminal", []actors.Option{actors.WithRetention(1)}, func(t *testing.T, rt *actors.Runtime) messages.TaskID {
			var ids []messages.TaskID
			for range 2 {
				f := newFake()
				id := start(t, rt, f.spec("bash", "", false))
				f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
				settleWait(t, rt, id, "")
				ids = append(ids, id)
			}
			s, err := rt.Tasks().Get(bg, ids[0], "")
			require.NoError(t, err)
			require.True(t, s.Evicted, "the first task is a tombstone")
			return ids[0]
		}, messages.KillAlreadyTerminal, messages.Completed},
		{"queued: killed", []actors.Option{actors.WithOwnerLimit(1), actors.WithQueue(1)}, func(t *testing.T, rt *actors.Runtime) messages.TaskID {
			start(t, rt, newFake().spec("bash", "", false))
			return start(t, rt, newFake().spec("bash", "", false))
		}, messages.KillRequested, messages.Killed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRT(t, tc.opts...)
			id := tc.prepare(t, rt)
			res, s, err := rt.Tasks().Kill(bg, id, "", "stop")
			require.NoError(t, err)
			assert.Equal(t, tc.wantResult, res)
			assert.Equal(t, id, s.ID)
			assert.Equal(t, tc.wantStatus, s.Status)
			assert.True(t, s.Reported, "the answer shows the model the kill")
		})
	}
}
