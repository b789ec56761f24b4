package bench

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/producers/bash"
)

// tinyConfig runs every figure at a size that finishes in a second or two under the
// race detector: it checks that each measurement runs and cleans up, not how fast.
func tinyConfig() Config {
	return Config{
		Lifecycle:    LifecycleConfig{Tasks: 40, Owners: 4, Workers: 4},
		Routed:       RoutedConfig{Tasks: 20, Owners: 5, Samples: 20},
		Wait:         WaitConfig{Samples: 10},
		Memory:       MemoryConfig{Tasks: 20, Owners: 2},
		Retention:    RetentionConfig{Tasks: 30, Early: 10},
		DisposeSizes: []int{5, 10},
		Dispose:      DisposeConfig{Repeat: 1, Depth: 3},
		True:         TrueConfig{Runs: 4, Workers: 2},
		Sandbox:      TrueConfig{Runs: 2, Workers: 2},
		Flood:        FloodConfig{Bytes: 256 << 10},
		Rounds:       2,
	}
}

func TestRunMeasuresEveryFigure(t *testing.T) {
	var steps []string
	figs, err := Run(bg, tinyConfig(), func(p Progress) {
		if p.Done {
			steps = append(steps, p.Figure)
		}
	})
	require.NoError(t, err)
	require.Len(t, steps, 54) // five figures in two rounds of three impls (lifecycle: four), the flood's two variants in two rounds, the sandbox figure in two rounds of two, four once, retention and wait-any once
	t.Run("the memory figure runs last", func(t *testing.T) {
		// Its mutex baseline leaves this process a live heap of goroutine
		// descriptors for good (see Run): no figure may run after it.
		memory := "memory (20 live tasks)"
		require.NotContains(t, steps[:len(steps)-3], memory)
		require.Equal(t, []string{memory, memory, memory}, steps[len(steps)-3:])
	})

	var names []string
	for _, f := range figs {
		names = append(names, f.Name)
		require.NotEmpty(t, f.Unit, f.Name)
		require.Contains(t, []string{"higher", "lower"}, f.Better, f.Name)
		require.Contains(t, f.Baselines, f.RatioTo, f.Name)
	}
	require.Equal(t, []string{
		"lifecycle throughput", "  with one event subscriber",
		"routed read p50", "routed read p99", "routed get p50", "routed get p99",
		"wait wake-up p50", "wait wake-up p99", "wait-any of 4 wake-up p50", "wait-any of 4 wake-up p99",
		"bytes per live task", "  of which heap", "  of which stacks",
		"one owner, 30 tasks: heap growth after the first 10", "one owner, 30 tasks: live actors", "heap per tombstone",
		"dispose 5 tasks", "dispose 10 tasks", "dispose scaling 10/5",
		"dispose 3-deep chain",
		"/bin/true ×4 wall",
		"sandboxed /bin/true ×2 per run",
		"flood 256 KiB throughput", "flood 256 KiB block mode throughput", "flood 256 KiB with a slow observer",
		"flood 256 KiB peak heap growth", "flood 256 KiB peak RSS growth",
	}, names)
	for _, f := range figs[:7] { // the timed figures are always positive
		require.Positive(t, f.Value, f.Name)
		require.NotNil(t, f.Ratio, f.Name)
	}
	sandboxRow := figs[slices.Index(names, "sandboxed /bin/true ×2 per run")]
	require.Positive(t, sandboxRow.Baselines[BaselineNoBox], "the unsandboxed runs are measured everywhere")
	if err := bash.New().CheckSandbox(); err == nil {
		require.Positive(t, sandboxRow.Value, "sandboxed runs where bwrap works")
		require.NotNil(t, sandboxRow.Ratio)
	} else {
		require.Zero(t, sandboxRow.Value, "no value without a sandbox")
		require.Nil(t, sandboxRow.Ratio)
		require.Contains(t, sandboxRow.Note, "no sandbox here")
	}

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, ThisMachine(), figs))
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	require.True(t, strings.HasPrefix(lines[0], "# nproc "), lines[0])
	require.Regexp(t, `^figure\s+ours\s+mutex\s+floor\s+os/exec\s+keep-all\s+one wait\s+no events\s+no sandbox\s+bounded\s+ratio\s+unit$`, lines[1])
	require.Contains(t, table.String(), "lifecycle throughput")

	var doc bytes.Buffer
	require.NoError(t, WriteJSON(&doc, ThisMachine(), figs))
	var back Report
	require.NoError(t, json.Unmarshal(doc.Bytes(), &back))
	require.Len(t, back.Figures, len(figs))
	require.Equal(t, figs[0].Baselines, back.Figures[0].Baselines)
}

func TestSummarize(t *testing.T) {
	samples := make([]time.Duration, 100)
	for i := range samples {
		samples[i] = time.Duration(100-i) * time.Microsecond
	}
	require.Equal(t, Latency{P50: 50 * time.Microsecond, P99: 99 * time.Microsecond, N: 100}, summarize(samples))
	require.Equal(t, Latency{}, summarize(nil))
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.1234: "0.123", 5.678: "5.68", 56.78: "56.8", 5678.9: "5679"} {
		require.Equal(t, want, formatValue(v))
	}
}

// The rounds of a timed figure turn the order of the implementations, so that none
// always runs first or last.
func TestRotateTurnsTheOrderEachRound(t *testing.T) {
	impls := []Impl{ImplActors, ImplMutex, ImplExec}
	for r, want := range [][]Impl{
		{ImplActors, ImplMutex, ImplExec},
		{ImplMutex, ImplExec, ImplActors},
		{ImplExec, ImplActors, ImplMutex},
		{ImplActors, ImplMutex, ImplExec},
	} {
		if got := rotate(impls, r); !slices.Equal(got, want) {
			t.Errorf("round %d: got %v, want %v", r, got, want)
		}
	}
	if got := impls; !slices.Equal(got, []Impl{ImplActors, ImplMutex, ImplExec}) {
		t.Errorf("rotate changed its argument: %v", got)
	}
}
