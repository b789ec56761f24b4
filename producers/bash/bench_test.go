//go:build linux

package bash

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// BenchmarkTrue measures the cost of one short command from start to settlement:
// the producer in each containment mode (pipe, cgroup or sweep, monitor, drain)
// against plain os/exec running the same `bash -c /bin/true` (and /bin/true alone,
// for scale), with 0 and 2,000 idle processes on the machine.
func BenchmarkTrue(b *testing.B) {
	for _, idle := range []int{0, 2000} {
		stop, err := idleProcesses(idle)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []Containment{CgroupContainment, SweepContainment} {
			b.Run(fmt.Sprintf("idle=%d/impl=producer/mode=%s", idle, mode), func(b *testing.B) {
				p := New(WithOutput(output.WithSpillDir(b.TempDir())), WithContainment(mode))
				if p.startErr != nil {
					b.Skip(p.startErr)
				}
				for b.Loop() {
					h, err := p.Start(Command{Command: "/bin/true"})
					if err != nil {
						b.Fatal(err)
					}
					if o := <-h.Done; o.Detail != "exit code: 0" {
						b.Fatalf("outcome %+v", o)
					}
					h.Release()
				}
			})
		}
		b.Run(fmt.Sprintf("idle=%d/impl=exec", idle), func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("/bin/bash", "-c", "/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("idle=%d/impl=exec-direct", idle), func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := stop(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrueGuarantees takes make bench's "/bin/true ×1000" row apart (bash -c
// /bin/true, 8 at a time, its output collected), one guarantee at a time, so that
// what each costs is measured:
//
//   - impl=exec: os/exec, with a context that can end (as the row runs it);
//   - impl=producer/jail=none: this producer with no containment at all
//     (testHookBareJail: the leader's process group and nothing else, what no mode
//     does) — its own machinery: streams, output buffer, monitor, exit waiter, reader;
//   - jail=cgroup-uncounted: a cgroup per task (every process in it from its first
//     instruction, cgroup.kill, a settle that waits for "populated 0") but no
//     process count (testHookNoOrphans: as in a process that is no subreaper, the
//     task's orphans are init's and nothing is reaped) — and so no reuse: without a
//     count nothing proves that no process of the task wrote cgroup.kill, so each
//     task's cgroup is made for it and removed after (see taskCgroup.reusable);
//   - jail=cgroup: as the producer runs — and the process count (pids.current, in the
//     pids v1 hierarchy on a hybrid mount, which the spawning thread enters for the
//     fork), which lets a settle prove that not even a zombie of the task is left
//     without a look at this process's other children.
//
// Besides ns/op (the wall time of a run, 8 at a time) it reports this process's CPU
// a run (cpu-µs/run) and the commands' (cmd-cpu-µs/run). Sub-benchmarks interleave
// with -count, so benchstat can pair them:
//
//	go test -run '^$' -bench TrueGuarantees -benchtime 1000x -count 10 ./producers/bash > g.txt
//	benchstat -col /impl g.txt
func BenchmarkTrueGuarantees(b *testing.B) {
	const workers = 8
	run := func(b *testing.B, one func() error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		var before, after, cbefore, cafter syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cbefore)
		b.ResetTimer()
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := one(); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cafter)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		cpu := func(a, z *syscall.Rusage) float64 {
			return float64(z.Utime.Nano()+z.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano()) / 1e3 / float64(b.N)
		}
		b.ReportMetric(cpu(&before, &after), "cpu-µs/run")
		b.ReportMetric(cpu(&cbefore, &cafter), "cmd-cpu-µs/run")
	}
	b.Run("impl=exec", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		run(b, func() error {
			out, err := exec.CommandContext(ctx, "/bin/bash", "-c", "/bin/true").CombinedOutput()
			if err == nil && len(out) > 0 {
				err = fmt.Errorf("unexpected output %q", out)
			}
			return err
		})
	})
	for _, jail := range []string{"none", "cgroup-uncounted", "cgroup"} {
		b.Run("impl=producer/jail="+jail, func(b *testing.B) {
			switch jail {
			case "none":
				testHookBareJail.Store(true)
				defer testHookBareJail.Store(false)
			case "cgroup-uncounted":
				testHookNoOrphans.Store(true)
				defer testHookNoOrphans.Store(false)
			}
			p := New(WithOutput(output.WithSpillDir(b.TempDir())), WithContainment(CgroupContainment))
			if p.startErr != nil {
				b.Skip(p.startErr)
			}
			defer p.Close()
			run(b, func() error {
				h, err := p.Start(Command{Command: "/bin/true"})
				if err != nil {
					return err
				}
				o := <-h.Done
				out := h.ReadOutput()
				h.Release()
				if o.Detail != "exit code: 0" || out != "" {
					return fmt.Errorf("outcome %+v, output %q", o, out)
				}
				return nil
			})
		})
	}
}

// BenchmarkScanProcs measures one /proc scan, the unit of a sweep; a task with no
// leftovers costs one scan (shared with every task settling at the same moment).
func BenchmarkScanProcs(b *testing.B) {
	for b.Loop() {
		procs, err := scanProcs()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(procs)), "procs")
	}
}

// idleProcesses starts n idle processes on the machine: `sleep` children of one
// holder shell, neither children of this process nor tasks (bench.IdleProcesses,
// which this package cannot import). stop kills and reaps them.
func idleProcesses(n int) (stop func() error, err error) {
	if n == 0 {
		return func() error { return nil }, nil
	}
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(
		"trap 'kill $(jobs -p) 2>/dev/null; wait; exit 0' TERM; for i in $(seq 1 %d); do sleep 100000 & done; echo ready; wait", n))
	cmd.Env = append(os.Environ(), markerEnv+"=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("idle processes: %q, %v", line, err)
	}
	return func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return cmd.Wait()
	}, nil
}

// BenchmarkInputRoundTrip measures an interactive round trip through the runtime:
// from Tasks.Input writing a line to a command that answers it (`while read -r l; do
// echo "got $l"; done`) to Tasks.ReadUntil returning the answer, in each stdin mode.
// Next to it, in the same run, the floor: the same command driven directly, with
// os/exec on pipes (pipe) or on a creack/pty terminal (tty), reading the answer with
// a bufio.Reader. Each op is one round trip; p50-µs and p99-µs are the median and the
// 99th percentile of the op's latencies (run it with -benchtime=400x or more).
func BenchmarkInputRoundTrip(b *testing.B) {
	const script = `while read -r l; do echo "got $l"; done`
	for _, mode := range interactiveModes {
		b.Run("stdin="+mode.String()+"/impl=runtime", func(b *testing.B) {
			ctx := context.Background()
			rt, err := actors.NewRuntime()
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = rt.Close(ctx) }()
			defer rt.Tasks().AttachSurface("bench")()
			p := New(WithOutput(output.WithSpillDir(b.TempDir())))
			id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: script, Stdin: mode}))
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				i++
				begin := time.Now()
				if err := rt.Tasks().Input(ctx, id, "", []byte(strconv.Itoa(i)+"\n"), false); err != nil {
					b.Fatal(err)
				}
				r, err := rt.Tasks().ReadUntil(ctx, id, "", `got `+strconv.Itoa(i)+`\r?\n`, time.Minute)
				if err != nil || r.Reason != messages.UntilMatched {
					b.Fatalf("round trip %d: %v, %s, %q", i, err, r.Reason, r.Output)
				}
				lat = append(lat, time.Since(begin))
			}
			reportLatencies(b, lat)
			if err := rt.Tasks().Input(ctx, id, "", nil, true); err != nil {
				b.Fatal(err)
			}
			if s, err := rt.Tasks().Wait(ctx, id, "", time.Minute); err != nil || s.Detail != "exit code: 0" {
				b.Fatalf("end: %v %+v", err, s)
			}
		})
		b.Run("stdin="+mode.String()+"/impl=direct", func(b *testing.B) {
			cmd := exec.Command(defaultShell, "-c", script)
			var (
				w   io.WriteCloser
				r   io.Reader
				err error
			)
			if mode == StdinTTY {
				var f *os.File
				if f, err = pty.Start(cmd); err == nil {
					defer f.Close()
					w, r = f, f
				}
			} else {
				if w, err = cmd.StdinPipe(); err == nil {
					r, err = cmd.StdoutPipe()
				}
				if err == nil {
					err = cmd.Start()
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReader(r)
			lat := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				i++
				want := "got " + strconv.Itoa(i)
				begin := time.Now()
				if _, err := io.WriteString(w, strconv.Itoa(i)+"\n"); err != nil {
					b.Fatal(err)
				}
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.TrimRight(line, "\r\n") == want {
						break
					}
				}
				lat = append(lat, time.Since(begin))
			}
			reportLatencies(b, lat)
			if mode == StdinTTY {
				_, err = w.Write([]byte{ctrlD})
			} else {
				err = w.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// reportLatencies reports the median and the 99th percentile of lat.
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
