package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskrt/taskrt/producers/bash"
)

// The baseline names of Figure.Baselines, in table column order.
const (
	BaselineMutex   = "mutex"      // MutexRegistry
	BaselineFloor   = "floor"      // bare protoactor
	BaselineExec    = "os/exec"    // plain os/exec, same command
	BaselineKeepAll = "keep-all"   // the runtime keeping every record until disposal (before retention)
	BaselineOneWait = "one wait"   // a single Tasks.Wait in the same runtime
	BaselinePlain   = "no events"  // the same runtime without an event subscriber
	BaselineNoBox   = "no sandbox" // the same bash producer without a sandbox
	BaselineBounded = "bounded"    // the same flood in the default output mode, no observer
)

var baselineColumns = []string{BaselineMutex, BaselineFloor, BaselineExec, BaselineKeepAll, BaselineOneWait, BaselinePlain, BaselineNoBox, BaselineBounded}

// Figure is one measured figure: our value (the taskrt runtime), each baseline's
// value, and our value divided by the primary baseline's.
type Figure struct {
	Name      string             `json:"name"`
	Value     float64            `json:"value"`
	Unit      string             `json:"unit"`
	Baselines map[string]float64 `json:"baselines"`
	// Ratio is Value / Baselines[RatioTo]; nil when that baseline is zero.
	Ratio   *float64 `json:"ratio"`
	RatioTo string   `json:"ratio_to"`
	// Better says which direction is better for Value: "higher" or "lower". A ratio
	// above 1 is ahead of the baseline for "higher", behind it for "lower".
	Better string `json:"better"`
	Note   string `json:"note,omitempty"`
}

func newFigure(name, unit, better string, ours float64, ratioTo string, baselines map[string]float64, note string) Figure {
	f := Figure{Name: name, Value: ours, Unit: unit, Baselines: baselines, RatioTo: ratioTo, Better: better, Note: note}
	if b := baselines[ratioTo]; b != 0 && !math.IsNaN(b) {
		r := ours / b
		f.Ratio = &r
	}
	return f
}

// Config sizes every figure of Run.
type Config struct {
	Lifecycle    LifecycleConfig
	Routed       RoutedConfig
	Wait         WaitConfig
	Memory       MemoryConfig
	Retention    RetentionConfig
	DisposeSizes []int         // owners' task counts for the dispose figures; the scaling figure compares the last to the first
	Dispose      DisposeConfig // Repeat and Depth for the dispose and chain figures
	True         TrueConfig
	Sandbox      TrueConfig // the sandboxed /bin/true figure
	Flood        FloodConfig
	// Idle sizes the containment figures: /bin/true through the bash producer
	// (cgroup mode, no runtime) against os/exec with Idle.N idle processes elsewhere
	// on the machine and as this process's children, Idle.Runs runs a measurement.
	Idle IdleConfig
	// Rounds is how many times the lifecycle, routed, wait, /bin/true and flood
	// figures are measured (the median is kept); the dispose figures repeat per
	// Dispose.Repeat.
	Rounds int
}

// DefaultConfig is the full run: the sizes the figures are defined at. It takes a
// few minutes on two cores.
func DefaultConfig() Config {
	return Config{
		Lifecycle:    LifecycleConfig{Tasks: 100_000, Owners: 100, Workers: 8},
		Routed:       RoutedConfig{Tasks: 10_000, Owners: 1_000, Samples: 20_000},
		Wait:         WaitConfig{Samples: 5_000},
		Memory:       MemoryConfig{Tasks: 100_000, Owners: 100},
		Retention:    RetentionConfig{Tasks: 100_000, Early: 1_000},
		DisposeSizes: []int{1_000, 10_000},
		Dispose:      DisposeConfig{Repeat: 5, Depth: 10},
		True:         TrueConfig{Runs: 1_000, Workers: 8},
		Sandbox:      TrueConfig{Runs: 200, Workers: 2},
		Flood:        FloodConfig{Bytes: 200 << 20},
		Idle:         IdleConfig{N: 2_000, Runs: 100},
		Rounds:       3,
	}
}

// IdleConfig sizes the containment figures of Run.
type IdleConfig struct {
	N    int // idle processes
	Runs int // /bin/true runs per measurement
}

// QuickConfig is a smoke run: every figure at a small size, in seconds. Its values
// are noisier and, for the size-dependent figures, not comparable to the full run.
func QuickConfig() Config {
	return Config{
		Lifecycle:    LifecycleConfig{Tasks: 5_000, Owners: 50, Workers: 8},
		Routed:       RoutedConfig{Tasks: 1_000, Owners: 100, Samples: 2_000},
		Wait:         WaitConfig{Samples: 500},
		Memory:       MemoryConfig{Tasks: 10_000, Owners: 100},
		Retention:    RetentionConfig{Tasks: 5_000, Early: 500},
		DisposeSizes: []int{100, 1_000},
		Dispose:      DisposeConfig{Repeat: 3, Depth: 10},
		True:         TrueConfig{Runs: 100, Workers: 8},
		Sandbox:      TrueConfig{Runs: 20, Workers: 2},
		Flood:        FloodConfig{Bytes: 16 << 20},
		Idle:         IdleConfig{N: 200, Runs: 20},
		Rounds:       1,
	}
}

// Progress reports a step of Run: once when it starts (Done false) and once when it
// ends (Done true, with Took).
type Progress struct {
	Index, Total int // 1-based step number, number of steps
	Figure       string
	Impl         Impl
	Done         bool
	Took         time.Duration
}

type step struct {
	figure string
	impl   Impl
	run    func() error
}

// Run measures every figure at cfg's sizes, calling progress (if not nil) around
// each step, and returns the figures in a fixed order.
func Run(ctx context.Context, cfg Config, progress func(Progress)) ([]Figure, error) {
	var (
		rounds        = max(cfg.Rounds, 1)
		lifeRuns      = map[Impl][]float64{}
		routedRuns    = map[Impl][]RoutedResult{}
		wakeRuns      = map[Impl][]Latency{}
		trueRunsAll   = map[Impl][]trueRun{}
		floodRuns     = map[Impl][]FloodResult{}
		variantRuns   = map[FloodVariant][]FloodResult{}
		mem           = map[Impl]MemoryResult{}
		disp          = map[int]map[Impl]time.Duration{}
		chain         = map[Impl]time.Duration{}
		registries    = []Impl{ImplActors, ImplMutex, ImplFloor}
		processes     = []Impl{ImplActors, ImplMutex, ImplExec}
		steps         []step
		add           = func(figure string, impl Impl, run func() error) { steps = append(steps, step{figure, impl, run}) }
		lifecycleName = fmt.Sprintf("lifecycle (%d tasks)", cfg.Lifecycle.Tasks)
		routedName    = fmt.Sprintf("routed read/get (%d live tasks)", cfg.Routed.Tasks)
		memoryName    = fmt.Sprintf("memory (%d live tasks)", cfg.Memory.Tasks)
		chainName     = fmt.Sprintf("dispose %d-deep chain", cfg.Dispose.Depth)
		trueName      = fmt.Sprintf("/bin/true ×%d", cfg.True.Runs)
		sandboxName   = fmt.Sprintf("sandboxed /bin/true ×%d", cfg.Sandbox.Runs)
		floodName     = "flood " + sizeName(cfg.Flood.Bytes)
		disposeName   = func(n int) string { return fmt.Sprintf("dispose %d tasks", n) }
		round         = func(name string, r int) string {
			if rounds == 1 {
				return name
			}
			return fmt.Sprintf("%s, round %d/%d", name, r+1, rounds)
		}
	)
	// The timed figures run in rounds, every implementation once per round, so that a
	// burst of load from elsewhere on the machine hits them alike; the median round is
	// kept. The order turns with each round (rotate), so that no implementation always
	// runs first, after another figure, or last, after its rivals warmed the caches.
	for r := range rounds {
		for _, impl := range rotate(append(registries, ImplActorsEvents), r) {
			add(round(lifecycleName, r), impl, func() error {
				v, err := Lifecycle(ctx, impl, cfg.Lifecycle)
				lifeRuns[impl] = append(lifeRuns[impl], v)
				return err
			})
		}
	}
	for r := range rounds {
		for _, impl := range rotate(registries, r) {
			add(round(routedName, r), impl, func() error {
				v, err := Routed(ctx, impl, cfg.Routed)
				routedRuns[impl] = append(routedRuns[impl], v)
				return err
			})
		}
	}
	for r := range rounds {
		for _, impl := range rotate(registries, r) {
			add(round("wait wake-up", r), impl, func() error {
				v, err := WaitWake(ctx, impl, cfg.Wait)
				wakeRuns[impl] = append(wakeRuns[impl], v)
				return err
			})
		}
	}
	var retention []Figure
	var setAny, setOne Latency
	const setSize = 4
	add(fmt.Sprintf("wait-any of %d wake-up", setSize), ImplActors, func() (err error) {
		setAny, setOne, err = WaitSetWake(ctx, cfg.Wait, setSize)
		return err
	})
	add(fmt.Sprintf("retention (%d tasks, one owner)", cfg.Retention.Tasks), ImplActors, func() (err error) {
		retention, err = RetentionFigures(ctx, cfg.Retention)
		return err
	})
	for _, n := range cfg.DisposeSizes {
		disp[n] = map[Impl]time.Duration{}
		for _, impl := range registries {
			c := cfg.Dispose
			c.Tasks = n
			add(disposeName(n), impl, func() (err error) { disp[n][impl], err = Dispose(ctx, impl, c); return err })
		}
	}
	for _, impl := range registries {
		add(chainName, impl, func() (err error) { chain[impl], err = DisposeChain(ctx, impl, cfg.Dispose); return err })
	}
	for r := range rounds {
		for _, impl := range rotate(processes, r) {
			add(round(trueName, r), impl, func() error {
				before, ok := CPUNow()
				v, err := TrueRuns(ctx, impl, cfg.True)
				after, ok2 := CPUNow()
				run := trueRun{wall: v, cpuKnown: ok && ok2}
				if run.cpuKnown {
					run.cpu = CPU{Self: after.Self - before.Self, Children: after.Children - before.Children}
				}
				trueRunsAll[impl] = append(trueRunsAll[impl], run)
				return err
			})
		}
	}
	sandboxRuns := map[bool][]time.Duration{}
	var sandboxErr error
	for r := range rounds {
		for _, sandboxed := range rotate([]bool{false, true}, r) {
			add(round(sandboxName, r), ImplActors, func() error {
				if sandboxErr != nil {
					return nil
				}
				v, err := SandboxTrueRuns(ctx, cfg.Sandbox, sandboxed)
				if err != nil && sandboxed && ctx.Err() == nil {
					sandboxErr = err // no sandbox here: the row says so
					return nil
				}
				sandboxRuns[sandboxed] = append(sandboxRuns[sandboxed], v)
				return err
			})
		}
	}
	for r := range rounds {
		for _, impl := range rotate(processes, r) {
			add(round(floodName, r), impl, func() error {
				v, err := Flood(ctx, impl, cfg.Flood)
				floodRuns[impl] = append(floodRuns[impl], v)
				return err
			})
		}
		for _, v := range []FloodVariant{FloodBlock, FloodObserved} {
			add(round(floodName, r), ImplActors, func() error {
				c := cfg.Flood
				c.Variant = v
				res, err := Flood(ctx, ImplActors, c)
				variantRuns[v] = append(variantRuns[v], res)
				return err
			})
		}
	}
	var idleRows []ContainmentRow
	var idleSets []Idle
	if cfg.Idle.N > 0 {
		idleSets = []Idle{{N: cfg.Idle.N}, {N: cfg.Idle.N, Children: true}}
		add(fmt.Sprintf("/bin/true with %d idle processes", cfg.Idle.N), Impl("producer"), func() (err error) {
			idleRows, err = containmentRows(ctx, idleSets, cfg.Idle.Runs, rounds)
			return err
		})
	}

	// The memory figure runs last. Its mutex baseline parks a goroutine per live task,
	// and Go keeps every goroutine descriptor it ever made (they are reused, never
	// freed): after it, about 130 MB of this process's heap stay live for good, so
	// every later figure ran with a collector goal of about 260 MB — no collection
	// at all during a flood, whose peak heap growth then counted every byte
	// allocated rather than the peak in use — and with the collections of that heap
	// when they came. What a figure measures must not depend on one that ran before
	// it (TestRunMeasuresEveryFigure, "the memory figure runs last").
	for _, impl := range registries {
		add(memoryName, impl, func() (err error) { mem[impl], err = Memory(ctx, impl, cfg.Memory); return err })
	}

	for i, s := range steps {
		if progress != nil {
			progress(Progress{Index: i + 1, Total: len(steps), Figure: s.figure, Impl: s.impl})
		}
		runtime.GC() // each step starts from a collected heap, not the last one's garbage
		t0 := time.Now()
		if err := s.run(); err != nil {
			return nil, fmt.Errorf("%s, impl=%s: %w", s.figure, s.impl, err)
		}
		if progress != nil {
			progress(Progress{Index: i + 1, Total: len(steps), Figure: s.figure, Impl: s.impl, Done: true, Took: time.Since(t0)})
		}
	}
	life := medians(lifeRuns, func(v float64) float64 { return v })
	trueMedian := medians(trueRunsAll, func(v trueRun) float64 { return float64(v.wall) })
	trueRuns := map[Impl]time.Duration{}
	for impl, v := range trueMedian {
		trueRuns[impl] = v.wall
	}
	flood := medians(floodRuns, func(v FloodResult) float64 { return v.Throughput })
	variants := medians(map[Impl][]FloodResult{"block": variantRuns[FloodBlock], "observed": variantRuns[FloodObserved]},
		func(v FloodResult) float64 { return v.Throughput })
	blockRun, observedRun := variants["block"], variants["observed"]
	routed := map[Impl]RoutedResult{}
	for impl, runs := range routedRuns {
		routed[impl] = RoutedResult{
			Read: medianLatency(runs, func(r RoutedResult) Latency { return r.Read }),
			Get:  medianLatency(runs, func(r RoutedResult) Latency { return r.Get }),
		}
	}
	wake := map[Impl]Latency{}
	for impl, runs := range wakeRuns {
		wake[impl] = medianLatency(runs, func(l Latency) Latency { return l })
	}

	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	mib := func(b float64) float64 { return b / (1 << 20) }
	vs := func(get func(Impl) float64, impls ...Impl) map[string]float64 {
		m := map[string]float64{}
		for _, impl := range impls {
			name := map[Impl]string{ImplMutex: BaselineMutex, ImplFloor: BaselineFloor, ImplExec: BaselineExec}[impl]
			m[name] = get(impl)
		}
		return m
	}
	latency := func(name string, get func(Impl) time.Duration, note string) Figure {
		g := func(i Impl) float64 { return us(get(i)) }
		return newFigure(name, "µs", "lower", g(ImplActors), BaselineMutex, vs(g, ImplMutex, ImplFloor), note)
	}

	var figs []Figure
	lifeNote := fmt.Sprintf("%d workers start an instant task and wait for it, over %d owners; floor: spawn + stop + observe Stopped; median of %d rounds",
		cfg.Lifecycle.Workers, cfg.Lifecycle.Owners, rounds)
	figs = append(figs, newFigure("lifecycle throughput", "tasks/s", "higher", life[ImplActors], BaselineMutex,
		vs(func(i Impl) float64 { return life[i] }, ImplMutex, ImplFloor), lifeNote))
	figs = append(figs, newFigure("  with one event subscriber", "tasks/s", "higher", life[ImplActorsEvents], BaselinePlain,
		map[string]float64{BaselinePlain: life[ImplActors]}, "the same lifecycles while a subscriber drains every event (started, settled, …); same rounds"))
	routedNote := fmt.Sprintf("%d live tasks over %d owners, one caller, %d calls; floor: RequestFuture via a forwarding actor (read) or direct (get); median of %d rounds",
		cfg.Routed.Tasks, cfg.Routed.Owners, cfg.Routed.Samples, rounds)
	figs = append(figs,
		latency("routed read p50", func(i Impl) time.Duration { return routed[i].Read.P50 }, routedNote),
		latency("routed read p99", func(i Impl) time.Duration { return routed[i].Read.P99 }, ""),
		latency("routed get p50", func(i Impl) time.Duration { return routed[i].Get.P50 }, ""),
		latency("routed get p99", func(i Impl) time.Duration { return routed[i].Get.P99 }, ""),
		latency("wait wake-up p50", func(i Impl) time.Duration { return wake[i].P50 }, fmt.Sprintf("Done delivered → waiter holds the terminal snapshot; %d samples; median of %d rounds", cfg.Wait.Samples, rounds)),
		latency("wait wake-up p99", func(i Impl) time.Duration { return wake[i].P99 }, ""),
		newFigure(fmt.Sprintf("wait-any of %d wake-up p50", setSize), "µs", "lower", us(setAny.P50), BaselineOneWait,
			map[string]float64{BaselineOneWait: us(setOne.P50)},
			fmt.Sprintf("Tasks.WaitAny over %d running tasks vs Tasks.Wait on one, same runtime, alternating; clock from the settlement; %d samples", setSize, cfg.Wait.Samples)),
		newFigure(fmt.Sprintf("wait-any of %d wake-up p99", setSize), "µs", "lower", us(setAny.P99), BaselineOneWait,
			map[string]float64{BaselineOneWait: us(setOne.P99)}, ""),
	)
	memNote := fmt.Sprintf("at %d live tasks over %d owners, producer excluded; floor = one idle actor", cfg.Memory.Tasks, cfg.Memory.Owners)
	figs = append(figs,
		newFigure("bytes per live task", "B/task", "lower", mem[ImplActors].Total(), BaselineMutex,
			vs(func(i Impl) float64 { return mem[i].Total() }, ImplMutex, ImplFloor), memNote),
		newFigure("  of which heap", "B/task", "lower", mem[ImplActors].Heap, BaselineMutex,
			vs(func(i Impl) float64 { return mem[i].Heap }, ImplMutex, ImplFloor), ""),
		newFigure("  of which stacks", "B/task", "lower", mem[ImplActors].Stacks, BaselineMutex,
			vs(func(i Impl) float64 { return mem[i].Stacks }, ImplMutex, ImplFloor),
			"mutex: one parked goroutine per task (its size follows Go's adaptive starting stack, 2 or 4 KiB); actors: Done watchers shared, up to 32 tasks per goroutine"))
	figs = append(figs, retention...)
	for _, n := range cfg.DisposeSizes {
		figs = append(figs, newFigure(disposeName(n), "ms", "lower", ms(disp[n][ImplActors]), BaselineMutex,
			vs(func(i Impl) float64 { return ms(disp[n][i]) }, ImplMutex, ImplFloor),
			fmt.Sprintf("median of %d; Dispose until every task settled and the owner is gone", max(cfg.Dispose.Repeat, 1))))
	}
	if k := len(cfg.DisposeSizes); k >= 2 {
		small, large := cfg.DisposeSizes[0], cfg.DisposeSizes[k-1]
		scale := func(i Impl) float64 { return float64(disp[large][i]) / float64(disp[small][i]) }
		figs = append(figs, newFigure(fmt.Sprintf("dispose scaling %d/%d", large, small), "×", "lower", scale(ImplActors), BaselineMutex,
			vs(scale, ImplMutex, ImplFloor), fmt.Sprintf("linear = %.0f×", float64(large)/float64(small))))
	}
	figs = append(figs, newFigure(chainName, "ms", "lower", ms(chain[ImplActors]), BaselineMutex,
		vs(func(i Impl) float64 { return ms(chain[i]) }, ImplMutex, ImplFloor),
		"links register a child agent and settle after disposing it; floor: nested actors, two per level"))
	perRun := func(d time.Duration) float64 { return us(d) / float64(max(cfg.True.Runs, 1)) }
	trueNote := fmt.Sprintf("%d at a time, median of %d rounds; per run: actors %.0f µs, os/exec %.0f µs; mutex = same bash producer without the runtime",
		cfg.True.Workers, rounds, perRun(trueRuns[ImplActors]), perRun(trueRuns[ImplExec]))
	if a, m, e := trueMedian[ImplActors], trueMedian[ImplMutex], trueMedian[ImplExec]; a.cpuKnown && m.cpuKnown && e.cpuKnown {
		// The wall time of 8 at a time on few cores is the CPU spent over the cores:
		// the commands' own (children) and this process's (the producer and the
		// runtime, or os/exec) are the two parts of it.
		trueNote += fmt.Sprintf("; CPU per run, this process + the commands: actors %.0f + %.0f µs, mutex %.0f + %.0f µs, os/exec %.0f + %.0f µs",
			perRun(a.cpu.Self), perRun(a.cpu.Children), perRun(m.cpu.Self), perRun(m.cpu.Children), perRun(e.cpu.Self), perRun(e.cpu.Children))
	}
	figs = append(figs, newFigure(trueName+" wall", "ms", "lower", ms(trueRuns[ImplActors]), BaselineExec,
		vs(func(i Impl) float64 { return ms(trueRuns[i]) }, ImplExec, ImplMutex), trueNote))
	figs = append(figs, sandboxFigure(sandboxName, cfg.Sandbox, rounds, sandboxRuns, sandboxErr))
	figs = append(figs,
		newFigure(floodName+" throughput", "MiB/s", "higher", mib(flood[ImplActors].Throughput), BaselineExec,
			vs(func(i Impl) float64 { return mib(flood[i].Throughput) }, ImplExec, ImplMutex),
			fmt.Sprintf("repeated Read until terminal vs reading the pipe directly; median of %d rounds; reads returned %.1f MiB (bounded windows)",
				rounds, mib(float64(flood[ImplActors].ReadBytes)))),
		newFigure(floodName+" block mode throughput", "MiB/s", "higher", mib(blockRun.Throughput), BaselineBounded,
			map[string]float64{BaselineBounded: mib(flood[ImplActors].Throughput)},
			fmt.Sprintf("a text flood (yes | head) whose command waits for the owner's reads: nothing dropped (the reads returned %.0f MiB) vs the bounded flood above", mib(float64(blockRun.ReadBytes)))),
		newFigure(floodName+" with a slow observer", "MiB/s", "higher", mib(observedRun.Throughput), BaselineBounded,
			map[string]float64{BaselineBounded: mib(flood[ImplActors].Throughput)},
			"an observer peeking 4 KiB a millisecond beside the owner's reads vs the flood without it: observers never hold the task"),
		newFigure(floodName+" peak heap growth", "MiB", "lower", mib(float64(flood[ImplActors].PeakHeap)), BaselineExec,
			vs(func(i Impl) float64 { return mib(float64(flood[i].PeakHeap)) }, ImplExec, ImplMutex), "in-use heap (live + not yet collected) sampled every 1 ms, in the median-throughput round"),
		newFigure(floodName+" peak RSS growth", "MiB", "lower", mib(float64(flood[ImplActors].PeakRSS)), BaselineExec,
			vs(func(i Impl) float64 { return mib(float64(flood[i].PeakRSS)) }, ImplExec, ImplMutex), "VmHWM after a clear_refs reset, minus VmRSS at start"),
	)
	for _, r := range idleRows {
		ex, ok := r.PerRun[ContainExec]
		cg, cok := r.PerRun[ContainCgroup]
		if !ok || !cok {
			continue // cgroup containment unusable here: ContainmentTable says why
		}
		where := "elsewhere on the machine"
		if r.Children {
			where = "as children of this process"
		}
		figs = append(figs, newFigure(fmt.Sprintf("/bin/true, %d idle %s", r.Idle, map[bool]string{false: "elsewhere", true: "host children"}[r.Children]),
			"ms", "lower", ms(cg), BaselineExec, map[string]float64{BaselineExec: ms(ex)},
			fmt.Sprintf("one run through the bash producer (cgroup mode, no runtime) vs os/exec bash -c /bin/true, %d idle processes %s; mean of %d runs, median of %d rounds",
				r.Idle, where, cfg.Idle.Runs, rounds)))
	}
	return figs, nil
}

// containmentRows is ContainmentTableAt for the cgroup and os/exec columns only.
func containmentRows(ctx context.Context, idles []Idle, runs, rounds int) ([]ContainmentRow, error) {
	return containmentTable(ctx, idles, []ContainmentImpl{ContainCgroup, ContainExec}, runs, rounds)
}

// Machine describes where the figures were measured.
type Machine struct {
	NumCPU     int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel,omitempty"`
	// Containment is how the bash producer contains commands here by default: "cgroup"
	// or "sweep", with the reason (producers/bash Producer.Containment).
	Containment string `json:"containment,omitempty"`
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPU: "unknown",
		Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if p := bash.New(); p != nil {
		defer func() { _ = p.Close() }()
		m.Containment = p.Containment().String()
		if d := p.ContainmentDetail(); d != "" {
			m.Containment += " (" + d + ")"
		}
	}
	return m
}

// String is the machine on one line: nproc, GOMAXPROCS, CPU model, Go version, OS
// and kernel.
func (m Machine) String() string {
	s := fmt.Sprintf("nproc %d (GOMAXPROCS %d), %s, %s, %s", m.NumCPU, m.GOMAXPROCS, m.CPU, m.Go, m.OS)
	if m.Kernel != "" {
		s += ", Linux " + m.Kernel
	}
	if m.Containment != "" {
		s += "; bash containment: " + m.Containment
	}
	return s
}

// WriteTable writes the machine line and the figures as one aligned table: figure,
// our value, each baseline's value, the ratio to the primary baseline, and the unit
// with the better direction (↑ higher is better, ↓ lower is better); then the
// figures' notes.
func WriteTable(w io.Writer, m Machine, figs []Figure) error {
	rows := [][]string{append(append([]string{"figure", "ours"}, baselineColumns...), "ratio", "unit")}
	for _, f := range figs {
		row := []string{f.Name, formatValue(f.Value)}
		for _, b := range baselineColumns {
			if v, ok := f.Baselines[b]; ok {
				row = append(row, formatValue(v))
			} else {
				row = append(row, "-")
			}
		}
		ratio := "-"
		if f.Ratio != nil {
			ratio = formatValue(*f.Ratio) + "× " + f.RatioTo
		}
		arrow := map[string]string{"higher": "↑", "lower": "↓"}[f.Better]
		rows = append(rows, append(row, ratio, f.Unit+" "+arrow))
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", m)
	for _, r := range rows {
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			case i == len(r)-1:
				b.WriteString("  " + c)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteString("\n")
	}
	for _, f := range figs {
		if f.Note != "" {
			fmt.Fprintf(&b, "  · %s: %s\n", f.Name, f.Note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Report is the JSON document WriteJSON writes.
type Report struct {
	Machine Machine  `json:"machine"`
	Figures []Figure `json:"figures"`
}

// WriteJSON writes the machine and the figures as one indented JSON document.
func WriteJSON(w io.Writer, m Machine, figs []Figure) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Report{Machine: m, Figures: figs})
}

// trueRun is one round of the /bin/true figure: its wall time and the CPU time
// spent meanwhile by this process and by the commands (its reaped children).
type trueRun struct {
	wall     time.Duration
	cpu      CPU
	cpuKnown bool
}

// medians keeps, per implementation, the run whose key is the median.
func medians[T any](runs map[Impl][]T, key func(T) float64) map[Impl]T {
	out := make(map[Impl]T, len(runs))
	for impl, rs := range runs {
		rs = slices.Clone(rs)
		slices.SortFunc(rs, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
		out[impl] = rs[len(rs)/2]
	}
	return out
}

// medianLatency is the median of each percentile over runs.
func medianLatency[T any](runs []T, get func(T) Latency) Latency {
	var p50, p99 []time.Duration
	for _, r := range runs {
		p50, p99 = append(p50, get(r).P50), append(p99, get(r).P99)
	}
	slices.Sort(p50)
	slices.Sort(p99)
	return Latency{P50: p50[len(p50)/2], P99: p99[len(p99)/2], N: get(runs[0]).N}
}

// sizeName names a byte count in whole MiB or KiB.
func sizeName(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// formatValue prints about three significant digits, without exponent.
func formatValue(v float64) string {
	a := math.Abs(v)
	prec := 0
	switch {
	case a == 0:
	case a < 1:
		prec = 3
	case a < 10:
		prec = 2
	case a < 100:
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// rotate returns xs turned left by r places (a new slice).
func rotate[T any](xs []T, r int) []T {
	if len(xs) == 0 {
		return nil
	}
	k := r % len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}
