//go:build linux

package bash

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/messages"
)

// configOf applies opts to the default configuration.
func configOf(opts ...Option) config {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg
}

// One rule for every option: a zero or negative value keeps the default.
func TestZeroAndNegativeOptionValuesKeepTheDefaults(t *testing.T) {
	for _, v := range []int{0, -1} {
		opts := map[string]Option{
			"WithGrace":         WithGrace(time.Duration(v)),
			"WithDrainTimeout":  WithDrainTimeout(time.Duration(v)),
			"WithShell":         WithShell(""),
			"WithLogger":        WithLogger(nil),
			"WithContainment":   WithContainment(Containment(0)),
			"WithCgroupRoot":    WithCgroupRoot(""),
			"WithMaxProcesses":  WithMaxProcesses(v),
			"WithMemoryLimit":   WithMemoryLimit(int64(v)),
			"WithCPULimit":      WithCPULimit(float64(v)),
			"WithTerminalSize":  WithTerminalSize(v, v),
			"Command.Limits.or": optionFunc(func(c *config) { c.limits = Limits{Processes: v, Memory: int64(v), CPU: float64(v)}.or(c.limits) }),
		}
		for name, opt := range opts {
			t.Run(name+" keeps the default for a value of "+time.Duration(v).String(), func(t *testing.T) {
				assert.Equal(t, defaultConfig(), configOf(opt))
			})
		}
	}
}

func TestExplicitNoneOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want func(c config) bool
	}{
		{"WithoutGrace sends SIGKILL right after SIGTERM", WithoutGrace(), func(c config) bool { return c.grace == 0 }},
		{"WithoutSubreaper keeps the process from becoming a subreaper", WithoutSubreaper(), func(c config) bool { return !c.subreaper }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, tc.want(configOf(WithGrace(time.Minute), tc.opt)))
		})
	}
	t.Run("a terminal size past the kernel's is lowered to it", func(t *testing.T) {
		cfg := configOf(WithTerminalSize(1<<20, 1<<17))
		assert.Equal(t, [2]int{65535, 65535}, [2]int{cfg.termCols, cfg.termRows})
	})
}

// WithoutGrace ends a command that ignores SIGTERM with the SIGKILL that follows at
// once.
func TestWithoutGraceKillsATermIgnoringCommand(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode, WithoutGrace())
		h := startTask(t, p, Command{Command: "trap '' TERM; echo ready; sleep 1000"})
		readUntil(t, h, "ready", settleLimit)
		require.NoError(t, h.Cancel("now"))
		assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGKILL"}, h.awaitDone(t, settleLimit))
		requireQuiet(t, p)
	})
}

func init() {
	// subreaper: a fresh process that calls New with or without WithoutSubreaper
	// (SUBREAPER_OPT=without) and prints whether it is now a child subreaper, before
	// any Start.
	testHelpers["subreaper"] = func() {
		opts := []Option{WithContainment(SweepContainment)}
		if os.Getenv("SUBREAPER_OPT") == "without" {
			opts = append(opts, WithoutSubreaper())
		}
		before := receivesOrphans()
		New(opts...)
		fmt.Printf("before New %v, after New %v\n", before, receivesOrphans())
	}
}

// The package documentation and New's say the same: New itself (not the first Start)
// makes the process a child subreaper, and WithoutSubreaper keeps it from doing so.
// Each case runs in a fresh process, since the flag is process-wide and sticky.
func TestNewMakesTheProcessASubreaper(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, opt, want string
	}{
		{"New makes the process a subreaper before any Start", "", "before New false, after New true\n"},
		{"WithoutSubreaper leaves the process as it was", "without", "before New false, after New false\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), helperEnv+"=subreaper", "SUBREAPER_OPT="+tc.opt)
			got, err := cmd.Output()
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
