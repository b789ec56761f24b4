package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// The process figures run real commands: through a registry with the bash producer
// (ImplActors, and ImplMutex to separate the registry's cost from the producer's),
// and with plain os/exec (ImplExec) running the same `/bin/bash -c COMMAND`.

// TrueConfig sizes the /bin/true figure.
type TrueConfig struct {
	Runs    int   // commands run in total
	Workers int   // commands in flight at once, the same for every impl
	Timer   Timer // optional
}

// TrueRuns measures the wall time of Runs runs of `/bin/true`, Workers at a time:
// through a registry, each worker starts a bash task and waits for it to settle;
// with ImplExec, each worker runs `/bin/bash -c /bin/true` with os/exec and collects
// its combined output, which is what the bash producer does minus the runtime.
func TrueRuns(ctx context.Context, impl Impl, cfg TrueConfig) (_ time.Duration, err error) {
	const command = "/bin/true"
	cfg.Workers = max(cfg.Workers, 1)
	timer := timerOr(cfg.Timer)
	var one func() error
	switch impl {
	case ImplExec:
		one = func() error {
			out, err := exec.CommandContext(ctx, "/bin/bash", "-c", command).CombinedOutput()
			if err == nil && len(out) > 0 {
				err = fmt.Errorf("unexpected output %q", out)
			}
			return err
		}
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return 0, rerr
		}
		defer closeWithin(reg, &err)
		dir, rerr := os.MkdirTemp("", "taskrt-bench-")
		if rerr != nil {
			return 0, rerr
		}
		defer os.RemoveAll(dir)
		p := bash.New(bash.WithOutput(output.WithSpillDir(dir)))
		defer func() {
			if cerr := p.Close(); err == nil {
				err = cerr
			}
		}()
		one = func() error {
			_, err := runBash(ctx, reg, p, command)
			return err
		}
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	timer.ResetTimer()
	t0 := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for next.Add(1) <= int64(cfg.Runs) && ctx.Err() == nil {
				if err := one(); err != nil {
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

// runBash starts command as an unowned bash task and reads it until it is terminal;
// it returns how many output bytes the reads returned, and an error unless the
// command completed with exit code 0.
func runBash(ctx context.Context, reg Registry, p *bash.Producer, command string) (int64, error) {
	id, err := reg.Start(ctx, p.Spec("", bash.Command{Command: command}))
	if err != nil {
		return 0, err
	}
	return readToEnd(ctx, reg, id, command, false)
}

// readToEnd reads task id until it is terminal (and, with rest, until a read of
// the settled task returns nothing: block mode leaves up to a read's worth for
// after the settlement); it returns how many output bytes the reads returned, and
// an error unless the command completed with exit code 0.
func readToEnd(ctx context.Context, reg Registry, id messages.TaskID, command string, rest bool) (int64, error) {
	var n int64
	for {
		r, err := reg.Read(ctx, id, "")
		if err != nil {
			return n, err
		}
		n += int64(len(r.Output))
		if s := r.Snapshot; s.Status.Terminal() {
			if s.Status != messages.Completed || !strings.Contains(s.Detail, "exit code: 0") {
				return n, fmt.Errorf("%s %q ended %s (%s)", id, command, s.Status, s.Detail)
			}
			if rest && r.Output != "" {
				continue
			}
			return n, nil
		}
		if r.Output == "" {
			// Nothing new: block until the task settles, its output is full or 1 ms
			// passes, rather than spin on Read.
			if _, err := reg.Wait(ctx, id, "", time.Millisecond); err != nil {
				return n, err
			}
		}
	}
}

// FloodConfig sizes the flood figure.
type FloodConfig struct {
	Bytes int64 // what the command writes
	Timer Timer // optional
	// Variant, for ImplActors only: FloodBlock runs the command in block mode
	// (bash.Command.BlockOutput), read as it comes; FloodObserved adds a slow
	// observer that peeks at the output 4 KiB a millisecond beside the owner's reads.
	Variant FloodVariant
}

// FloodVariant is how the flood figure's command is run and watched.
type FloodVariant int

// The flood variants.
const (
	FloodBounded  FloodVariant = iota // the default bounded output, read by the owner
	FloodBlock                        // block mode: nothing dropped, the command waits for reads
	FloodObserved                     // bounded, with a slow observer beside the owner
)

// FloodResult is what one flood run measured.
type FloodResult struct {
	Throughput float64 // command output bytes per second, start to terminal
	ReadBytes  int64   // bytes the reads returned (the runtime's reads return a bounded window)
	PeakHeap   uint64  // growth of the in-use heap at its peak, sampled every millisecond
	PeakRSS    uint64  // growth of the resident set at its peak (VmHWM after a reset); 0 if unknown
}

// Flood measures the output throughput of `head -c Bytes /dev/zero`: through a
// registry (a bash task, read with repeated Read calls until terminal) or, with
// ImplExec, by reading the same command's pipe directly with a 32 KiB buffer. It also
// reports how much the heap and the resident set grew at their peak meanwhile.
func Flood(ctx context.Context, impl Impl, cfg FloodConfig) (res FloodResult, err error) {
	command := fmt.Sprintf("head -c %d /dev/zero", cfg.Bytes)
	timer := timerOr(cfg.Timer)
	var run func() (int64, error)
	switch impl {
	case ImplExec:
		run = func() (int64, error) {
			cmd := exec.CommandContext(ctx, "/bin/bash", "-c", command)
			out, err := cmd.StdoutPipe()
			if err != nil {
				return 0, err
			}
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			n, cerr := io.CopyBuffer(io.Discard, out, make([]byte, 32<<10))
			return n, errors.Join(cerr, cmd.Wait())
		}
	default:
		reg, rerr := NewRegistry(impl)
		if rerr != nil {
			return res, rerr
		}
		defer closeWithin(reg, &err)
		dir, rerr := os.MkdirTemp("", "taskrt-bench-")
		if rerr != nil {
			return res, rerr
		}
		defer os.RemoveAll(dir)
		p := bash.New(bash.WithOutput(output.WithSpillDir(dir)))
		defer func() { _ = p.Close() }()
		run = func() (int64, error) { return runBash(ctx, reg, p, command) }
		if cfg.Variant != FloodBounded {
			a, ok := reg.(*actorsRegistry)
			if !ok {
				return res, fmt.Errorf("bench: flood variant %d needs the actors runtime", cfg.Variant)
			}
			if cfg.Variant == FloodBlock {
				// Text, as a log is: every byte of it is read and rendered, and
				// NULs would be rendered escaped, three bytes each.
				command = fmt.Sprintf("yes 'block mode flood: every line of it is read, none is dropped' | head -c %d", cfg.Bytes)
			}
			run = func() (int64, error) { return floodVariant(ctx, a, p, command, cfg.Variant) }
		}
	}

	resetOK := resetPeakRSS()
	rss0 := procStatus("VmRSS")
	liveMemory()
	sampler := startHeapSampler(time.Millisecond)
	heap0 := sampler.base()
	timer.ResetTimer()
	t0 := time.Now()
	n, err := run()
	elapsed := time.Since(t0)
	timer.StopTimer()
	peak := sampler.Stop()
	if err != nil {
		return res, err
	}
	if impl == ImplExec && n != cfg.Bytes {
		return res, fmt.Errorf("read %d bytes of %d", n, cfg.Bytes)
	}
	res = FloodResult{Throughput: float64(cfg.Bytes) / elapsed.Seconds(), ReadBytes: n}
	if peak > heap0 {
		res.PeakHeap = peak - heap0
	}
	if hwm := procStatus("VmHWM"); resetOK && hwm > rss0 {
		res.PeakRSS = hwm - rss0
	}
	return res, nil
}

// floodVariant runs command as runBash does, in block mode (FloodBlock) or with a
// slow observer peeking beside the owner (FloodObserved), and returns the bytes the
// owner's reads returned.
func floodVariant(ctx context.Context, a *actorsRegistry, p *bash.Producer, command string, v FloodVariant) (int64, error) {
	rt := a.rt
	id, err := rt.Tasks().Start(ctx, p.Spec("", bash.Command{Command: command, BlockOutput: v == FloodBlock}))
	if err != nil {
		return 0, err
	}
	stop := make(chan struct{})
	observed := make(chan struct{})
	if v == FloodObserved {
		go func() { // a slow observer: 4 KiB a millisecond, from where it got to
			defer close(observed)
			var off int64
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				pk, err := rt.Tasks().Peek(ctx, id, "", off, 4<<10)
				if err != nil {
					return
				}
				off = pk.Next
			}
		}()
	} else {
		close(observed)
	}
	defer func() { close(stop); <-observed }()
	return readToEnd(ctx, a, id, command, true)
}
