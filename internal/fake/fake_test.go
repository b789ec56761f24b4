package fake_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
)

func TestFakeFollowsTheProducerContract(t *testing.T) {
	t.Run("stream reads are consuming deltas", func(t *testing.T) {
		f := fake.New(true)
		h := f.Hooks()
		f.Emit("a")
		f.Emit("b")
		assert.Equal(t, "ab", h.ReadOutput())
		assert.Equal(t, "", h.ReadOutput())
	})
	t.Run("a final-output task has no ReadOutput", func(t *testing.T) {
		assert.Nil(t, fake.New(false).Hooks().ReadOutput)
	})
	t.Run("the first outcome wins", func(t *testing.T) {
		f := fake.New(false)
		f.Finish(messages.Outcome{Status: messages.Completed})
		f.Finish(messages.Outcome{Status: messages.Failed})
		require.NoError(t, f.Hooks().Cancel("late"))
		assert.Equal(t, messages.Completed, (<-f.Hooks().Done).Status)
		assert.Equal(t, "late", <-f.Cancels)
	})
	t.Run("cancel settles as killed unless held", func(t *testing.T) {
		f := fake.New(false)
		require.NoError(t, f.Hooks().Cancel("stop"))
		assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"}, <-f.Hooks().Done)
		g := fake.New(false)
		g.HoldCancel()
		require.NoError(t, g.Hooks().Cancel("stop"))
		assert.Empty(t, g.Hooks().Done)
	})
	t.Run("cancel can fail or panic", func(t *testing.T) {
		f := fake.New(false)
		boom := errors.New("boom")
		f.FailCancel(boom)
		assert.ErrorIs(t, f.Hooks().Cancel("x"), boom)
		f.PanicOnCancel()
		assert.Panics(t, func() { _ = f.Hooks().Cancel("x") })
	})
	t.Run("Done closed without an outcome", func(t *testing.T) {
		f := fake.New(false)
		f.CloseDone()
		_, ok := <-f.Hooks().Done
		assert.False(t, ok)
	})
	t.Run("Run is counted and Release closes Released", func(t *testing.T) {
		f := fake.New(false)
		s := f.Spec("job", "a job", "a1")
		h, err := s.Run()
		require.NoError(t, err)
		assert.Equal(t, 1, f.Runs())
		h.Release()
		h.Release()
		<-f.Released
	})
}
