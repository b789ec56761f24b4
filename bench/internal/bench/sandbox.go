package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// SandboxTrueRuns measures the wall time of cfg.Runs foreground runs of `/bin/true`
// through one bash producer, cfg.Workers at a time, each in a workspace-write
// sandbox (bubblewrap: namespaces, mounts, a private /tmp, no network) when
// sandboxed is set, else without one: the cost of the sandbox per command start,
// everything else equal. It fails when the sandbox cannot be had here.
func SandboxTrueRuns(ctx context.Context, cfg TrueConfig, sandboxed bool) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "taskrt-bench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	p := bash.New(bash.WithOutput(output.WithSpillDir(dir)))
	defer func() { _ = p.Close() }()
	c := bash.Command{Command: "/bin/true", Dir: dir}
	if sandboxed {
		c.Sandbox = &bash.Sandbox{Mode: bash.SandboxWorkspaceWrite}
		if err := p.CheckSandbox(); err != nil {
			return 0, err
		}
	}
	cfg.Workers = max(cfg.Workers, 1)
	timer := timerOr(cfg.Timer)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	timer.ResetTimer()
	t0 := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for next.Add(1) <= int64(cfg.Runs) && ctx.Err() == nil {
				res, err := p.Run(ctx, c, 0)
				if err == nil && res.Outcome.Detail != "exit code: 0" {
					err = fmt.Errorf("/bin/true ended %s (%s): %q", res.Outcome.Status, res.Outcome.Detail, res.Output)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	timer.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return elapsed, ctx.Err()
}

// sandboxFigure is the sandboxed /bin/true row: µs per run in a sandbox, next to the
// same producer without one, from the median rounds; 0 and no ratio, with the
// reason in the note, where there is no sandbox.
func sandboxFigure(name string, cfg TrueConfig, rounds int, runs map[bool][]time.Duration, unavailable error) Figure {
	perRun := func(sandboxed bool) float64 {
		if len(runs[sandboxed]) == 0 {
			return math.NaN()
		}
		d := medianDuration(runs[sandboxed])
		return float64(d) / float64(time.Microsecond) / float64(max(cfg.Runs, 1))
	}
	if unavailable != nil {
		f := newFigure(name+" per run", "µs", "lower", 0, BaselineNoBox,
			map[string]float64{BaselineNoBox: perRun(false)}, "no sandbox here: "+unavailable.Error())
		f.Ratio = nil
		return f
	}
	return newFigure(name+" per run", "µs", "lower", perRun(true), BaselineNoBox,
		map[string]float64{BaselineNoBox: perRun(false)},
		fmt.Sprintf("foreground Run of /bin/true through one bash producer, %d at a time, in a workspace-write sandbox (bwrap) vs none; median of %d rounds", cfg.Workers, rounds))
}
