package stress

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestShortRunKeepsEveryInvariant(t *testing.T) {
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Config{
		// MinOps: however slow the machine, every agent operates enough for each kind
		// of operation (foreign ones included) to come up.
		Duration: 400 * time.Millisecond, Agents: 4, Seed: 7, MinOps: 50,
		Progress: &progress, ProgressEvery: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	var out bytes.Buffer
	rep.Write(&out)
	t.Log("\n" + out.String())

	require.Empty(t, rep.Violations)
	require.Positive(t, rep.Started)
	require.Zero(t, rep.Processes)
	require.Equal(t, rep.Goroutines[0], max(rep.Goroutines[1], rep.Goroutines[0]))
	foreign := 0
	for op := range rep.Ops {
		if strings.HasPrefix(op, "foreign-") {
			foreign++
		}
	}
	require.Positive(t, foreign, "the run tried foreign operations")
	require.Contains(t, out.String(), "tasks started:")
	require.Contains(t, progress.String(), "tasks started")
}

func TestPickBehaviorNeverNestsBelowDepthTwo(t *testing.T) {
	rng := newRand(1)
	for range 1000 {
		require.NotEqual(t, "nested", pickBehavior(rng, 2))
	}
	require.Equal(t, 0, depthOf("agent-1"))
	require.Equal(t, 2, depthOf("agent-1/sub-3/sub-9"))
	require.Equal(t, 1, depthOf("sub-4"))
}
