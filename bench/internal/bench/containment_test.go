//go:build linux

package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/internal/leakcheck"
	"github.com/taskrt/taskrt/producers/bash"
)

// The containment figures run at tiny sizes and leave nothing: this checks that
// they measure and clean up, not how fast anything is.
func TestContainmentTableMeasuresEveryColumn(t *testing.T) {
	rows, err := ContainmentTable(bg, []int{0, 20}, 3, 1)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		for _, impl := range []ContainmentImpl{ContainCgroup, ContainSweep, ContainExec} {
			if why, bad := r.Unusable[impl]; bad {
				t.Logf("%s unusable here: %s", impl, why)
				continue
			}
			assert.Positive(t, r.PerRun[impl], "%s with %d idle processes", impl, r.Idle)
		}
	}
	assert.Zero(t, leakcheck.Live())
}

func TestKillStormLeavesNothing(t *testing.T) {
	for _, mode := range []bash.Containment{bash.CgroupContainment, bash.SweepContainment} {
		t.Run("mode="+mode.String(), func(t *testing.T) {
			res, err := KillStorm(bg, KillStormConfig{Tasks: 20, Owners: 4, Mode: mode, Grace: 200 * time.Millisecond})
			if mode == bash.CgroupContainment && err != nil {
				require.ErrorIs(t, err, bash.ErrCgroupUnavailable)
				t.Skipf("cgroup containment is not available here: %v", err)
			}
			require.NoError(t, err)
			assert.Equal(t, mode.String(), res.Mode)
			assert.Equal(t, 40, res.Processes, "20 tasks: 10 × 3 + 10 × 1 processes")
			assert.Equal(t, 20, res.Killed)
			assert.Zero(t, res.Abandoned)
			assert.Zero(t, res.Survivors)
			assert.Zero(t, res.Zombies)
		})
	}
}
