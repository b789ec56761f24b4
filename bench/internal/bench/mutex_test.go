package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

var bg = context.Background()

// fakeTask is an in-memory producer the test drives: it settles when told to (or,
// by default, when cancelled), streams what the test emits, and can fail its Cancel.
type fakeTask struct {
	done      chan messages.Outcome
	cancels   chan string // every Cancel reason
	once      sync.Once
	mu        sync.Mutex // protects buf and cancelErr
	buf       strings.Builder
	cancelErr error
}

func newFakeTask() *fakeTask {
	return &fakeTask{done: make(chan messages.Outcome, 1), cancels: make(chan string, 16)}
}

func (f *fakeTask) finish(o messages.Outcome) { f.once.Do(func() { f.done <- o }) }

func (f *fakeTask) emit(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.WriteString(s)
}

func (f *fakeTask) spec(kind string, owner messages.AgentID, stream bool) messages.Spec {
	h := messages.Hooks{
		Done: f.done,
		Cancel: func(reason string) error {
			f.cancels <- reason
			f.mu.Lock()
			err := f.cancelErr
			f.mu.Unlock()
			if err == nil {
				f.finish(messages.Outcome{Status: messages.Killed, Output: "partial"})
			}
			return err
		},
	}
	if stream {
		h.ReadOutput = func() string {
			f.mu.Lock()
			defer f.mu.Unlock()
			s := f.buf.String()
			f.buf.Reset()
			return s
		}
	}
	return messages.Spec{Kind: kind, Label: kind + " job", Owner: owner, Run: func() (messages.Hooks, error) { return h, nil }}
}

func newMutex(t *testing.T, owners ...messages.AgentID) *MutexRegistry {
	t.Helper()
	r := NewMutexRegistry()
	for _, o := range owners {
		require.NoError(t, r.Register(bg, o, ""))
	}
	t.Cleanup(func() {
		require.NoError(t, r.Close(bg))
		require.Zero(t, r.Live(), "live tasks after Close")
	})
	return r
}

func startFake(t *testing.T, r *MutexRegistry, kind string, owner messages.AgentID, stream bool) (*fakeTask, messages.TaskID) {
	t.Helper()
	f := newFakeTask()
	id, err := r.Start(bg, f.spec(kind, owner, stream))
	require.NoError(t, err)
	return f, id
}

func notFoundText(id messages.TaskID) string {
	return fmt.Sprintf("%v: %s", messages.ErrTaskNotFound, id)
}

func TestMutexRegistry(t *testing.T) {
	t.Run("ids are per kind and a failed start burns none", func(t *testing.T) {
		r := newMutex(t)
		var got []messages.TaskID
		for _, kind := range []string{"bash", "bash", "sub"} {
			_, id := startFake(t, r, kind, "", false)
			got = append(got, id)
		}
		_, err := r.Start(bg, messages.Spec{Kind: "bash", Label: "x", Run: func() (messages.Hooks, error) { return messages.Hooks{}, errors.New("boom") }})
		require.ErrorContains(t, err, "boom")
		_, err = r.Start(bg, messages.Spec{Kind: "Bad Kind", Label: "x", Run: newFakeTask().spec("x", "", false).Run})
		require.ErrorIs(t, err, messages.ErrInvalidSpec)
		_, id := startFake(t, r, "bash", "", false)
		got = append(got, id)
		require.Equal(t, []messages.TaskID{"bash-1", "bash-2", "sub-1", "bash-3"}, got)
	})

	t.Run("foreign and no-agent callers get the unknown id's error and cause no cancel", func(t *testing.T) {
		r := newMutex(t, "a1", "a2")
		f, id := startFake(t, r, "bash", "a1", true)
		for _, caller := range []messages.AgentID{"a2", ""} {
			_, err := r.Get(bg, id, caller)
			require.EqualError(t, err, notFoundText(id))
			_, err = r.Read(bg, id, caller)
			require.EqualError(t, err, notFoundText(id))
			_, err = r.Kill(bg, id, caller, "foreign")
			require.EqualError(t, err, notFoundText(id))
			_, err = r.Wait(bg, id, caller, time.Millisecond)
			require.EqualError(t, err, notFoundText(id))
			require.ErrorIs(t, err, messages.ErrTaskNotFound)
		}
		_, err := r.Get(bg, "bash-99", "a1")
		require.EqualError(t, err, notFoundText("bash-99"))
		require.Empty(t, f.cancels)
		s, err := r.Get(bg, id, "a1")
		require.NoError(t, err)
		require.Equal(t, messages.Running, s.Status)
	})

	t.Run("unowned tasks are open to every caller", func(t *testing.T) {
		r := newMutex(t, "a1")
		_, id := startFake(t, r, "bash", "", false)
		for _, caller := range []messages.AgentID{"a1", "", "nobody"} {
			_, err := r.Get(bg, id, caller)
			require.NoError(t, err)
		}
	})

	t.Run("stream reads consume deltas", func(t *testing.T) {
		r := newMutex(t)
		f, id := startFake(t, r, "bash", "", true)
		f.emit("one ")
		res, err := r.Read(bg, id, "")
		require.NoError(t, err)
		require.Equal(t, "one ", res.Output)
		require.False(t, res.Snapshot.Reported)
		f.emit("two")
		f.finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		_, err = r.Wait(bg, id, "", time.Minute)
		require.NoError(t, err)
		res, err = r.Read(bg, id, "")
		require.NoError(t, err)
		require.Equal(t, "two", res.Output)
		res, err = r.Read(bg, id, "")
		require.NoError(t, err)
		require.Empty(t, res.Output)
		require.Equal(t, messages.Completed, res.Snapshot.Status)
	})

	t.Run("final reads return nothing while running, then the final output idempotently", func(t *testing.T) {
		r := newMutex(t)
		f, id := startFake(t, r, "sub", "", false)
		res, err := r.Read(bg, id, "")
		require.NoError(t, err)
		require.Empty(t, res.Output)
		f.finish(messages.Outcome{Status: messages.Completed, Output: "answer"})
		_, err = r.Wait(bg, id, "", time.Minute)
		require.NoError(t, err)
		for range 2 {
			res, err = r.Read(bg, id, "")
			require.NoError(t, err)
			require.Equal(t, "answer", res.Output)
			require.True(t, res.Snapshot.Reported)
		}
	})

	t.Run("wait times out with the running snapshot and resolves at settlement", func(t *testing.T) {
		r := newMutex(t)
		f, id := startFake(t, r, "bash", "", false)
		s, err := r.Wait(bg, id, "", time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, messages.Running, s.Status)
		require.False(t, s.Reported)
		await, err := r.waitRegistered(bg, id, "")
		require.NoError(t, err)
		f.finish(messages.Outcome{Status: messages.Failed, Detail: "exit code: 2"})
		s, err = await()
		require.NoError(t, err)
		require.Equal(t, messages.Failed, s.Status)
		require.Equal(t, "exit code: 2", s.Detail)
		require.True(t, s.Reported)
	})

	t.Run("wait ended by its context returns the running snapshot and the context's error", func(t *testing.T) {
		r := newMutex(t)
		f, id := startFake(t, r, "bash", "", false)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		s, err := r.Wait(ctx, id, "", time.Minute)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, messages.Running, s.Status)
		require.Empty(t, f.cancels, "a wait's context never touches the task")
		_, err = r.Wait(bg, id, "", 0)
		require.ErrorIs(t, err, messages.ErrInvalidArgument)
	})

	t.Run("kill forwards its reason to cancel, then reports already-terminal", func(t *testing.T) {
		r := newMutex(t, "a1")
		f, id := startFake(t, r, "bash", "a1", false)
		got, err := r.Kill(bg, id, "a1", "not needed")
		require.NoError(t, err)
		require.Equal(t, "not needed", <-f.cancels)
		s, err := r.Wait(bg, id, "a1", time.Minute)
		require.NoError(t, err)
		require.Equal(t, messages.Killed, s.Status)
		require.True(t, s.Reported)
		require.Contains(t, []messages.KillResult{messages.KillRequested, messages.KillAlreadyTerminal}, got)
		got, err = r.Kill(bg, id, "a1", "again")
		require.NoError(t, err)
		require.Equal(t, messages.KillAlreadyTerminal, got)
	})

	t.Run("a failing cancel fails the kill and leaves the task running", func(t *testing.T) {
		r := newMutex(t)
		f, id := startFake(t, r, "bash", "", false)
		f.cancelErr = errors.New("no such process")
		_, err := r.Kill(bg, id, "", "stop")
		require.ErrorIs(t, err, messages.ErrCancelFailed)
		require.ErrorContains(t, err, "no such process")
		s, err := r.Get(bg, id, "")
		require.NoError(t, err)
		require.Equal(t, messages.Running, s.Status)
		require.False(t, s.Reported)
		f.finish(messages.Outcome{Status: messages.Completed})
	})

	t.Run("dispose cancels and awaits the owner's and its children's tasks", func(t *testing.T) {
		r := newMutex(t, "a1")
		require.NoError(t, r.Register(bg, "a1/sub", "a1"))
		f1, id1 := startFake(t, r, "bash", "a1", false)
		f2, id2 := startFake(t, r, "bash", "a1/sub", false)
		require.NoError(t, r.Dispose(bg, "a1"))
		require.Equal(t, "owner disposed", <-f1.cancels)
		require.Equal(t, "owner disposed", <-f2.cancels)
		require.Zero(t, r.Live())
		_, err := r.Get(bg, id1, "a1")
		require.ErrorIs(t, err, messages.ErrTaskNotFound)
		_, err = r.Get(bg, id2, "a1/sub")
		require.ErrorIs(t, err, messages.ErrTaskNotFound)
		_, err = r.Start(bg, newFakeTask().spec("bash", "a1", false))
		require.ErrorIs(t, err, messages.ErrOwnerUnknown)
		require.ErrorIs(t, r.Dispose(bg, "a1"), messages.ErrOwnerUnknown)
		require.NoError(t, r.Register(bg, "a1", ""), "an id can be registered again after Dispose")
	})

	t.Run("close cancels every task and refuses starts", func(t *testing.T) {
		r := NewMutexRegistry()
		require.NoError(t, r.Register(bg, "a1", ""))
		f1, _ := startFake(t, r, "bash", "", false)
		f2, _ := startFake(t, r, "bash", "a1", false)
		require.NoError(t, r.Close(bg))
		require.Equal(t, "runtime closed", <-f1.cancels)
		require.Equal(t, "runtime closed", <-f2.cancels)
		require.Zero(t, r.Live())
		_, err := r.Start(bg, newFakeTask().spec("bash", "", false))
		require.ErrorIs(t, err, messages.ErrClosed)
	})
}
