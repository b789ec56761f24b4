package actors_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Tasks.Watches counts the live watches of each of an owner's tasks: from the Watch
// call until the watch ended (by its cap here, and by settlement), only for the
// owner's own tasks that have any.
func TestWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t)
		f, id, _ := watched(t, rt, false)
		other := newFake()
		other.Buffered()
		otherID := start(t, rt, other.spec("bash", "a1", true))
		register(t, rt, "a2")
		watches := func(owner messages.AgentID) map[messages.TaskID]int {
			t.Helper()
			got, err := rt.Tasks().Watches(bg, owner)
			require.NoError(t, err)
			return got
		}
		assert.Empty(t, watches("a1"), "no watch yet")

		require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
		require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "WARN", actors.WatchOptions{MaxNotices: 1}))
		require.NoError(t, rt.Tasks().Watch(bg, otherID, "a1", "ERROR", actors.WatchOptions{}))
		assert.Equal(t, map[messages.TaskID]int{id: 2, otherID: 1}, watches("a1"))
		assert.Empty(t, watches("a2"), "another owner's tasks are not counted")
		assert.Empty(t, watches("nobody"), "an unknown owner has none")

		f.Emit("WARN once\n") // the WARN watch reaches its cap of 1 and ends
		synctest.Wait()
		assert.Equal(t, map[messages.TaskID]int{id: 1, otherID: 1}, watches("a1"), "a capped watch is no longer counted")

		other.Finish(messages.Outcome{Status: messages.Completed})
		synctest.Wait()
		assert.Equal(t, map[messages.TaskID]int{id: 1}, watches("a1"), "settlement ends a task's watches")
		f.Finish(messages.Outcome{Status: messages.Completed})
		synctest.Wait()
		assert.Empty(t, watches("a1"))
	})
}
