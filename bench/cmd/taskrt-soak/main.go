// Command taskrt-soak runs a steady mixed load on one taskrt runtime for a while and
// fails when a resource keeps growing: the leak detector of the runtime, the tools
// and the producers.
//
// Several agents work through the model-facing tools, as a model would: background
// bash commands that print a little and exit (some sleep a moment), background
// sub-agents (quick, or running a command of their own), foreground calls, reads,
// waits, kills, lists; each agent also keeps one long-running command and one
// sub-agent that hangs, which it now and then kills and replaces. Each agent is
// disposed after -lifetime (ending its long-running tasks) and registered again
// under a new id. The load creates at most -rate OS processes per second, and is
// shaped to be steady (see agent).
//
// Every -interval it samples the heap in use (after a full GC), the goroutines, the
// open file descriptors, the child processes (zombies included) and the runtime's
// Stats; each count is the least of ten readings over the interval (see sample.go).
// After the warm-up it fits a least-squares line to each resource and fails when
// one grows faster than its tolerance per minute:
//
//	heap in use       1 MiB/min
//	goroutines        5/min
//	open fds          2/min
//	child processes   1/min
//	runtime tasks    10/min   (task records; dropped when their owner is disposed)
//	runtime running   2/min   (tasks not yet terminal)
//	runtime agents    1/min
//	runtime actors   10/min
//	runtime tombstones 10/min (evicted tasks still answered; bounded per owner)
//
// The tolerances follow from the noise of the fit. Over the 96 s fitted in a default
// run, the slope of a healthy run scatters with a standard error (corrected for the
// samples' autocorrelation, measured over several runs) of at most about 0.04
// MiB/min for the heap, 1.1/min for goroutines, 0.4 for descriptors, 0.2 for child
// processes, 2.9 for task records, 0.3 for running tasks, 0.15 for agents and 2.9
// for actors; each tolerance is at least 3.4 of them, so a healthy run fails by
// chance rarely. A leak is far beyond them: the default load disposes about 65
// agents and starts about 1200 tasks a minute, so one goroutine, descriptor, process
// or record lost per disposal, or per 100 tasks, grows by 12 or more a minute.
// Longer runs (-duration) shrink the noise, and the same tolerances then catch
// slower leaks.
//
// Besides the agents that come and go, -long-lived agents (one by default) are
// registered once and never disposed while the load runs: owners that live for days,
// whose records only retention bounds. Their settled tasks pile up to the retention
// bound and are then evicted to tombstones, which pile up to their own bound and are
// then forgotten; so their heap, records and tombstones must level off like the rest.
// The soak runs the runtime with small bounds (-retention 10, -tombstones 20) so
// that the plateau comes within the warm-up (a long-lived agent settles about three
// tasks a second); the default bounds (100 and 10,000) level off the same way after
// 10,100 tasks of one owner.
//
// The actor system's process registry is warmed up before the load (see
// prewarmRegistry): it grows by about 8 MiB over the first minutes of any load and
// then stops, which a short soak would read as a leak.
//
// At the end it closes the runtime and checks that nothing is left: no task, agent,
// actor, task process or child process, no abandoned task, and the goroutines and
// descriptors back at their level before the runtime was built. It prints the seed
// first, a progress line every 10 samples on stderr, then a table of start, end and
// growth per resource, and PASS or FAIL; it exits 1 on FAIL, 2 on bad flags.
//
// Usage:
//
//	taskrt-soak [-duration 2m] [-agents 6] [-seed N] [-warmup 0.2] [-rate 20] [-interval 1s]
//	            [-lifetime 5s] [-long-lived 1] [-retention 10] [-tombstones 20]
//	            [-samples FILE.csv] [-memprofile FILE]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/taskrt/taskrt/actors"
)

func main() {
	cfg := config{progress: os.Stderr, prewarm: prewarmRegistryIDs}
	flag.DurationVar(&cfg.duration, "duration", 2*time.Minute, "how long the load runs")
	flag.IntVar(&cfg.agents, "agents", 6, "concurrent top-level agents")
	flag.Uint64Var(&cfg.seed, "seed", 0, "seed of the agents' random choices (0: from the clock)")
	flag.Float64Var(&cfg.warmup, "warmup", 0.2, "fraction of the duration left out of the fit")
	flag.IntVar(&cfg.rate, "rate", 20, "most OS processes the load creates per second")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "time between samples")
	flag.DurationVar(&cfg.lifetime, "lifetime", 5*time.Second, "how long each agent operates before it is disposed and registered again")
	flag.IntVar(&cfg.longLived, "long-lived", 1, "agents that are never disposed while the load runs")
	flag.IntVar(&cfg.retention, "retention", 10, "settled tasks per owner that keep their record (the runtime's WithRetention; 0: its default, 100)")
	flag.IntVar(&cfg.tombstones, "tombstones", 20, "tombstones per owner (the runtime's WithTombstones; 0: its default, 10,000)")
	csvPath := flag.String("samples", "", "also write every sample to this CSV file")
	flag.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile to this file when the load ends, before the runtime is closed")
	flag.Parse()
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-soak:", err)
		os.Exit(2)
	}
	fmt.Printf("taskrt-soak: seed %d (replay with -seed %d), %d agents, %s (warm-up %s), at most %d processes/s, a sample every %s\n",
		cfg.seed, cfg.seed, cfg.agents, cfg.duration, cfg.warmupDuration(), cfg.rate, cfg.interval)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-soak:", err)
		os.Exit(2)
	}
	rep.write(os.Stdout)
	if *csvPath != "" {
		if err := writeCSV(*csvPath, rep.samples); err != nil {
			fmt.Fprintln(os.Stderr, "taskrt-soak:", err)
			os.Exit(2)
		}
	}
	if !rep.ok() {
		os.Exit(1)
	}
}

// config is one soak run.
type config struct {
	duration time.Duration
	agents   int
	seed     uint64
	warmup   float64 // fraction of duration
	rate     int     // processes per second
	interval time.Duration
	lifetime time.Duration // of each agent between registration and disposal
	prewarm  int           // throwaway PIDs that warm up the process registry
	// longLived agents are registered once and never disposed before the load ends:
	// the owners that live for days, whose records only retention bounds.
	longLived  int
	retention  int // the runtime's WithRetention
	tombstones int // the runtime's WithTombstones
	// minSamples keeps the load going past duration until that many samples were
	// taken, so that a short run on a loaded machine still has enough to fit
	// (tests); 0: duration alone decides.
	minSamples int
	progress   io.Writer // nil: no progress lines
	// memProfile, when set, is where a heap profile is written once the load ended
	// and every agent disposed itself, before Close: what it holds then is retained
	// by the runtime across disposals.
	memProfile string
}

func (c config) check() error {
	switch {
	case c.duration <= 0 || c.interval <= 0 || c.lifetime <= 0:
		return fmt.Errorf("-duration, -interval and -lifetime must be positive")
	case c.agents < 1 || c.rate < 1:
		return fmt.Errorf("-agents and -rate must be at least 1")
	case c.longLived < 0 || c.retention < 0 || c.tombstones < 0:
		return fmt.Errorf("-long-lived, -retention and -tombstones must not be negative")
	case c.warmup < 0 || c.warmup >= 1:
		return fmt.Errorf("-warmup must be in [0, 1)")
	case c.interval < readingsPerSample*time.Millisecond:
		return fmt.Errorf("-interval must be at least %dms", readingsPerSample)
	}
	return nil
}

func (c config) warmupDuration() time.Duration {
	return time.Duration(float64(c.duration) * c.warmup).Round(time.Millisecond)
}

// resources are what the soak judges, with their tolerances per minute.
var resources = []resource{
	{"heap in use", 1 << 20, "MiB", 1, func(s sample) float64 { return float64(s.heap) }},
	{"goroutines", 1, "", 5, func(s sample) float64 { return float64(s.goroutines) }},
	{"open fds", 1, "", 2, func(s sample) float64 { return float64(s.fds) }},
	{"child processes", 1, "", 1, func(s sample) float64 { return float64(s.children) }},
	{"runtime tasks", 1, "", 10, func(s sample) float64 { return float64(s.stats.Tasks) }},
	{"runtime running", 1, "", 2, func(s sample) float64 { return float64(s.stats.Running) }},
	{"runtime agents", 1, "", 1, func(s sample) float64 { return float64(s.stats.Agents) }},
	{"runtime actors", 1, "", 10, func(s sample) float64 { return float64(s.stats.Actors) }},
	{"runtime tombstones", 1, "", 10, func(s sample) float64 { return float64(s.stats.Tombstones) }},
}

// report is the outcome of a soak run.
type report struct {
	cfg     config
	samples []sample
	fits    []fit
	load    string // what the load did
	final   []string
	// problems are invariant violations of the load and leftovers after Close.
	problems []string
}

func (r *report) ok() bool {
	if len(r.problems) > 0 {
		return false
	}
	for _, f := range r.fits {
		if !f.ok {
			return false
		}
	}
	return true
}

// run performs a soak run. The error is for a run that could not be set up;
// everything else is in the report.
func run(ctx context.Context, cfg config) (*report, error) {
	baseGoroutines, baseFDs := runtime.NumGoroutine(), openFDs()
	h, err := newHarness(cfg.rate, cfg.prewarm, cfg.retention, cfg.tombstones)
	if err != nil {
		return nil, err
	}
	rep := &report{cfg: cfg}

	// 1. The load and the sampler, until the duration ends and minSamples samples
	// were taken (or ctx ends).
	began := time.Now()
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	enough := make(chan struct{}) // closed once minSamples samples were taken
	if cfg.minSamples <= 0 {
		close(enough)
	}
	var agents sync.WaitGroup
	for i := range cfg.agents {
		a := &agent{h: h, ctx: loadCtx, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))), lifetime: cfg.lifetime}
		agents.Go(func() { a.run(i, cfg.agents) })
	}
	for i := range cfg.longLived {
		a := &agent{h: h, ctx: loadCtx, rng: rand.New(rand.NewPCG(cfg.seed, uint64(cfg.agents+i)))}
		agents.Go(func() { a.live(i) })
	}
	var (
		mu      sync.Mutex // protects samples
		samples []sample
		sampled sync.WaitGroup
	)
	sampled.Go(func() {
		sampler(loadCtx, h.rt, began, cfg.interval, func(s sample) {
			mu.Lock()
			samples = append(samples, s)
			n := len(samples)
			mu.Unlock()
			if n == cfg.minSamples {
				close(enough)
			}
			if cfg.progress != nil && n%10 == 0 {
				fmt.Fprintf(cfg.progress, "  %6.0fs  ops %d  heap %.2f MiB  goroutines %d  fds %d  children %d  tasks %d  agents %d  actors %d\n",
					s.at.Seconds(), h.ops.Load(), float64(s.heap)/(1<<20), s.goroutines, s.fds, s.children,
					s.stats.Tasks, s.stats.Agents, s.stats.Actors)
			}
		})
	})
	sampled.Go(func() { // ends the load: the duration, then enough samples
		defer stop()
		t := time.NewTimer(cfg.duration)
		defer t.Stop()
		select {
		case <-t.C:
		case <-loadCtx.Done():
			return
		}
		select {
		case <-enough:
		case <-loadCtx.Done():
		}
	})
	agents.Wait() // each agent disposed its last agent, once the load ended
	stop()
	sampled.Wait()
	operated := time.Since(began)
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			rep.problems = append(rep.problems, fmt.Sprintf("heap profile: %v", err))
		}
	}
	rep.samples = samples
	rep.fits = judge(samples, cfg.warmupDuration(), resources)

	// 2. Close the runtime, then the tools and the launcher's runs.
	closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.rt.Close(closeCtx); err != nil {
		rep.problems = append(rep.problems, fmt.Sprintf("close: %v", err))
	}
	h.tt.Close()
	if err := h.children.Close(closeCtx, "runtime closed"); err != nil {
		rep.problems = append(rep.problems, fmt.Sprintf("sub-agent runs: %v", err))
	}
	if err := h.bash.Close(); err != nil { // the cgroups and descriptors it keeps between tasks
		rep.problems = append(rep.problems, fmt.Sprintf("bash producer: %v", err))
	}
	h.procs.stop()

	// 3. Nothing may be left.
	st := h.rt.Stats()
	if st != (actors.Stats{}) {
		rep.problems = append(rep.problems, fmt.Sprintf("runtime stats after close: %+v, want zero", st))
	}
	procs, children := h.bash.Live(), childProcesses()
	if procs != 0 || children != 0 {
		rep.problems = append(rep.problems, fmt.Sprintf("after close: %d task processes, %d child processes", procs, children))
	}
	goroutines := settleGoroutines(baseGoroutines, 5*time.Second)
	if goroutines > baseGoroutines {
		rep.problems = append(rep.problems, fmt.Sprintf("goroutines after close: %d, %d before the runtime", goroutines, baseGoroutines))
	}
	fds := openFDs()
	if fds > baseFDs {
		rep.problems = append(rep.problems, fmt.Sprintf("open fds after close: %d, %d before the runtime", fds, baseFDs))
	}
	rep.final = []string{
		fmt.Sprintf("tasks %d, running %d, agents %d, actors %d, abandoned %d", st.Tasks, st.Running, st.Agents, st.Actors, st.Abandoned),
		fmt.Sprintf("task processes %d, child processes %d", procs, children),
		fmt.Sprintf("goroutines %d (%d before), open fds %d (%d before)", goroutines, baseGoroutines, fds, baseFDs),
	}
	h.mu.Lock()
	rep.problems = append(rep.problems, h.violations...)
	h.mu.Unlock()
	rep.load = h.summary(operated)
	return rep, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeCSV writes the samples, one line each, under a header line.
func writeCSV(path string, samples []sample) error {
	var b strings.Builder
	b.WriteString("seconds")
	for _, r := range resources {
		b.WriteString("," + strings.ReplaceAll(r.name, " ", "_"))
	}
	b.WriteString("\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.3f", s.at.Seconds())
		for _, r := range resources {
			fmt.Fprintf(&b, ",%g", r.value(s))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// settleGoroutines waits up to limit for the goroutine count to fall to want (the
// runtime's last goroutines may still be returning) and returns the last count.
func settleGoroutines(want int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		<-tick.C
	}
}

func (h *harness) summary(operated time.Duration) string {
	ops := h.ops.Load()
	return fmt.Sprintf("%d ops in %s (%.0f/s): %d background bash, %d background sub-agents, %d foreground calls, "+
		"%d reads, %d waits, %d kills, %d lists, %d disposals and re-registrations, %d starts refused by the cap; "+
		"settled %d completed, %d killed, %d failed; %d notices",
		ops, operated.Round(time.Millisecond), float64(ops)/operated.Seconds(), h.bgBash.Load(), h.bgSub.Load(), h.fgCalls.Load(),
		h.reads.Load(), h.waits.Load(), h.kills.Load(), h.lists.Load(), h.disposals.Load(), h.capped.Load(),
		h.completed.Load(), h.killed.Load(), h.failed.Load(), h.notices.Load())
}

// write prints the report.
func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "\nload         %s\n", r.load)
	fmt.Fprintf(w, "samples      %d, fitted after the warm-up of %s\n\n", len(r.samples), r.cfg.warmupDuration())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "resource\tstart\tend\tgrowth/min\ttolerance/min\tverdict\t")
	for _, f := range r.fits {
		verdict := "ok"
		switch {
		case f.samples < 2:
			verdict = "TOO FEW SAMPLES"
		case !f.ok:
			verdict = "GROWS"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", f.name, f.format(f.start), f.format(f.end),
			f.formatRate(f.perMinute), f.format(f.tolerance), verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nafter close  %s\n", strings.Join(r.final, "\n             "))
	if r.ok() {
		fmt.Fprintln(w, "result       PASS")
		return
	}
	var why []string
	for _, f := range r.fits {
		switch {
		case f.ok:
		case f.samples < 2:
			why = append(why, fmt.Sprintf("%s: %d samples after the warm-up, too few to fit", f.name, f.samples))
		default:
			why = append(why, fmt.Sprintf("%s grows %s per minute (tolerance %s)", f.name, f.formatRate(f.perMinute), f.format(f.tolerance)))
		}
	}
	const maxShown = 20
	for i, p := range r.problems {
		if i == maxShown {
			why = append(why, fmt.Sprintf("… and %d more problems", len(r.problems)-maxShown))
			break
		}
		why = append(why, p)
	}
	fmt.Fprintf(w, "result       FAIL\n  %s\n", strings.Join(why, "\n  "))
}
