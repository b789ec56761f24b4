package actors_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// A completion notice carries its task's id to the injector in the context
// (messages.NoticeTask), so that a session can relate it to the task without reading
// the text back; text injected otherwise carries none.
func TestNotifyTellsTheInjectorWhichTask(t *testing.T) {
	rt := newRT(t)
	type got struct {
		id   messages.TaskID
		ok   bool
		text string
	}
	injected := make(chan got, 2)
	require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(func(ctx context.Context, text string) error {
		id, ok := messages.NoticeTask(ctx)
		injected <- got{id, ok, text}
		return nil
	})))
	f := newFake()
	id := start(t, rt, f.spec("bash", "a1", true))
	r := record(rt)
	f.Finish(messages.Outcome{Status: messages.Completed})
	r.next(t)

	delivered, err := rt.Tasks().Notify(bg, id, "the notice")
	require.NoError(t, err)
	require.True(t, delivered)
	assert.Equal(t, got{id, true, "the notice"}, <-injected, "a notice names its task")

	require.NoError(t, rt.Agents().Inject(bg, "a1", "other text"))
	assert.Equal(t, got{"", false, "other text"}, <-injected, "other text names none")
}
