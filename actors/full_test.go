package actors_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// fullTask starts a stream task of a1 whose output is in block mode with a read's
// worth of 256 bytes, and a writer that writes 600 bytes of lines into it — begun
// before the task starts when early is set. It returns the task's id and the
// writer's end.
func fullTask(t *testing.T, rt *actors.Runtime, f *fake, early bool) (messages.TaskID, <-chan struct{}) {
	t.Helper()
	buf := f.Buffered(output.WithBlocking(), output.WithMaxRead(256), output.WithMemory(256, 256))
	done := make(chan struct{})
	write := func() {
		defer close(done)
		_, _ = buf.WriteString(strings.Repeat("123456789\n", 60))
	}
	if early {
		go write()
		synctest.Wait() // the writer waits for a read before the task follows the output
	}
	require.NoError(t, rt.Agents().Register(bg, "a1"))
	id := start(t, rt, f.spec("bash", "a1", true))
	if !early {
		go write()
	}
	return id, done
}

// A task whose writer waits for a read says so, however early the writer filled
// the output; a wait and a read up to a pattern answer at once instead of sitting
// out their caps; a read clears it; a kill ends it, and a wait after the kill
// waits for the end.
func TestOutputFull(t *testing.T) {
	for _, early := range []bool{false, true} {
		name := "a writer that fills the output as the task runs"
		if early {
			name = "a writer that filled the output before the task followed it"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newRT(t)
				sub, err := rt.Subscribe(bg)
				require.NoError(t, err)
				defer sub.Close()
				f := newFake()
				id, done := fullTask(t, rt, f, early)

				s, err := rt.Tasks().Wait(bg, id, "a1", time.Hour)
				require.NoError(t, err)
				assert.True(t, s.OutputFull, "the wait returned at once, full (not after its hour)")
				assert.Equal(t, messages.Running, s.Status)

				u, err := rt.Tasks().ReadUntil(bg, id, "a1", "no such line", time.Hour)
				require.NoError(t, err)
				assert.Equal(t, messages.UntilFull, u.Reason)
				assert.Equal(t, strings.Repeat("123456789\n", 25), u.Output, "whole lines, a read's worth")
				synctest.Wait()
				g, err := rt.Tasks().Get(bg, id, "a1")
				require.NoError(t, err)
				assert.True(t, g.OutputFull, "the writer filled it again")

				r, err := rt.Tasks().Read(bg, id, "a1")
				require.NoError(t, err)
				assert.Equal(t, strings.Repeat("123456789\n", 25), r.Output)
				assert.False(t, r.Snapshot.OutputFull, "a read makes room")
				synctest.Wait()
				<-done // 100 bytes left: the writer is through

				var fulls []bool
				for len(sub.Events()) > 0 {
					if ev := <-sub.Events(); ev.Kind == messages.EventTaskOutputFull {
						fulls = append(fulls, ev.Task.OutputFull)
					}
				}
				// One event per change the task saw. A writer that fills the output
				// again while the read up to the pattern is being answered leaves
				// it full throughout: no change, so no pair of events for it.
				if len(fulls) != 2 {
					assert.Equal(t, []bool{true, false, true, false}, fulls, "one event per change")
				} else {
					assert.Equal(t, []bool{true, false}, fulls, "one event per change")
				}
				f.Finish(messages.Outcome{Status: messages.Completed})
			})
		})
	}
	t.Run("a kill ends full, and a wait after it waits for the end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f := newFake()
			f.HoldCancel()
			id, _ := fullTask(t, rt, f, false)
			s, err := rt.Tasks().Wait(bg, id, "a1", time.Hour)
			require.NoError(t, err)
			require.True(t, s.OutputFull)
			_, ks, err := rt.Tasks().Kill(bg, id, "a1", "test")
			require.NoError(t, err)
			assert.False(t, ks.OutputFull, "a stopping task is not full")
			s, err = rt.Tasks().Wait(bg, id, "a1", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, messages.Stopping, s.Status, "the wait sat out its minute: the cancel is held")
			assert.False(t, s.OutputFull)
			f.Finish(messages.Outcome{Status: messages.Killed})
		})
	})
}
