package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// A panic in the agent actor's own code is a runtime bug that loses the message it
// was handling. Wherever in the disposal it strikes, Dispose still returns — after
// the cleanups that could run ran and every task settled — and returns the panic;
// nothing is left behind (newRT's cleanup asserts the zero).
func TestAgentPanicMidDisposalIsReportedAndDisposeReturns(t *testing.T) {
	for _, tc := range []struct {
		rule     string
		message  string // the agent message whose handling panics
		nth      int32  // which one of them (1: the first)
		midDrain bool   // the cleanup registered from inside the drain still runs
	}{
		{"a lost runCleanups is sent again", "*actors.runCleanups", 1, true},
		{"a lost cleanup end gives up that cleanup, the rest still run", "*actors.cleanupDone", 1, true},
		{"a mid-drain registration that panics is answered with the fault", "*actors.addCleanup", 2, false},
		{"a lost tearDownTasks is sent again", "*actors.tearDownTasks", 1, true},
		{"a lost teardownDone asks the task again", "*actors.teardownDone", 1, true},
		{"a lost stopAgent is sent again", "*actors.stopAgent", 1, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var seen atomic.Int32
			var fired atomic.Bool
			rt := newRT(t, actors.WithAgentHook(func(agent messages.AgentID, m any) {
				if agent == "a1" && fmt.Sprintf("%T", m) == tc.message && seen.Add(1) == tc.nth {
					fired.Store(true)
					panic("agent bug")
				}
			}))
			register(t, rt, "a1")
			f := newFake()
			start(t, rt, f.spec("bash", "a1", true))
			registered, second := make(chan error, 1), make(chan struct{})
			_, err := rt.Agents().OnCleanup(bg, "a1", func(ctx context.Context) error {
				_, err := rt.Agents().OnCleanup(ctx, "a1", func(context.Context) error {
					close(second)
					return nil
				})
				registered <- err
				return nil
			})
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			err = rt.Agents().Dispose(ctx, "a1")
			require.NotErrorIs(t, err, context.DeadlineExceeded, "Dispose returns")
			var pe *messages.PanicError
			require.ErrorAs(t, err, &pe, "Dispose reports the panic: %v", err)
			assert.Equal(t, "agent actor", pe.Where)
			assert.Equal(t, "agent bug", pe.Value)
			assert.True(t, fired.Load())

			registerErr := <-registered // the first cleanup ran
			assert.Equal(t, "owner disposed", <-f.Cancels, "the task was torn down")
			if tc.midDrain {
				require.NoError(t, registerErr)
				<-second
			} else {
				require.ErrorAs(t, registerErr, &pe, "the registration that hit the panic gets it")
			}
			_, err = rt.Tasks().List(bg, "a1")
			require.NoError(t, err, "the runtime still answers")
			require.NoError(t, rt.Agents().Register(bg, "a1"), "the id can be registered again")
			require.NoError(t, rt.Agents().Dispose(bg, "a1"), "a disposal without a panic reports none")
		})
	}
}
