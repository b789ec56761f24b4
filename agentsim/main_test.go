package agentsim

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is the generous limit on anything a test waits for; a test that hits it has
// found a hang, not a slow machine.
const bound = time.Minute

// newSim builds a Sim and registers its teardown: Close, which checks quiescence (no
// live task, agent, actor or bash process of this Sim), and the runtime's own count.
func newSim(t *testing.T, opts ...Option) *Sim {
	t.Helper()
	sim, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := sim.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if st := sim.Runtime().Stats(); st.Tasks != 0 || st.Running != 0 || st.Agents != 0 || st.Actors != 0 {
			t.Errorf("runtime Stats after Close = %+v, want zero", st)
		}
	})
	return sim
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}
