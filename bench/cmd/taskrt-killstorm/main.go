// Command taskrt-killstorm measures the bash producer's containment: what it adds
// to one command, and whether a storm of disposals leaves anything behind.
//
// The kill storm: -tasks bash tasks over -owners agents through the runtime, half
// of them `trap ” TERM; setsid sleep N & sleep N` (they ignore SIGTERM and leave a
// process outside their session), half a plain `sleep N`; once every process is in
// place, every owner is disposed at once. It reports how long the disposals took,
// how the tasks ended (killed, abandoned, …), and the survivors and zombies left;
// it exits 1 when the storm left anything, abandoned a task, or took longer than
// the grace period plus the mode's budget (2 s in cgroup mode, 10 s in sweep mode).
//
// With -true it first prints the containment table: the mean time of one
// `/bin/true` through the producer in each mode next to plain os/exec
// (`bash -c /bin/true`), with 0 and with 2,000 idle processes elsewhere on the
// machine (-idle), and with 2,000 idle processes as children of this process
// (-children: what a long-lived host has among its children).
//
// Usage:
//
//	taskrt-killstorm [-mode both|cgroup|sweep] [-tasks 2000] [-owners 200] [-grace 3s] [-true] [-idle 0,2000] [-children 2000] [-runs 300] [-json FILE]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/taskrt/taskrt/bench/internal/bench"
	"github.com/taskrt/taskrt/producers/bash"
)

func main() {
	mode := flag.String("mode", "both", "containment modes to storm: both, cgroup or sweep")
	tasks := flag.Int("tasks", 2000, "bash tasks in the storm")
	owners := flag.Int("owners", 200, "agents owning them")
	grace := flag.Duration("grace", bash.DefaultGrace, "the producer's grace period between SIGTERM and SIGKILL")
	trueTable := flag.Bool("true", false, "first measure /bin/true per mode, idle and with idle processes")
	idle := flag.String("idle", "0,2000", "idle process counts of the /bin/true table (elsewhere on the machine)")
	children := flag.String("children", "2000", "idle host-children counts of the /bin/true table (children of this process)")
	runs := flag.Int("runs", 300, "/bin/true runs per measurement")
	rounds := flag.Int("rounds", 3, "measurements per cell of the /bin/true table (the median is kept)")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	verbose := flag.Bool("v", false, "progress on stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	}
	fmt.Printf("# nproc %d, %s, %s/%s\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	out := struct {
		True  []bench.ContainmentRow  `json:"true,omitempty"`
		Storm []bench.KillStormResult `json:"storm"`
	}{}
	failed := false

	if *trueTable {
		var idles []bench.Idle
		for _, set := range []struct {
			flag, list string
			children   bool
		}{{"idle", *idle, false}, {"children", *children, true}} {
			for _, f := range strings.Split(set.list, ",") {
				if strings.TrimSpace(f) == "" {
					continue
				}
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					fmt.Fprintf(os.Stderr, "taskrt-killstorm: -%s: %v\n", set.flag, err)
					os.Exit(2)
				}
				idles = append(idles, bench.Idle{N: n, Children: set.children})
			}
		}
		rows, err := bench.ContainmentTableAt(ctx, idles, *runs, *rounds)
		if err != nil {
			fmt.Fprintln(os.Stderr, "taskrt-killstorm:", err)
			os.Exit(2)
		}
		out.True = rows
		fmt.Printf("\n/bin/true, mean of %d runs (median of %d rounds)\n", *runs, *rounds)
		fmt.Printf("%-36s %10s %10s %10s %14s %14s\n", "processes on machine (idle added)", "cgroup", "sweep", "os/exec", "cgroup/exec", "sweep/exec")
		for _, r := range rows {
			ex := r.PerRun[bench.ContainExec]
			cell := func(i bench.ContainmentImpl) string {
				if d, ok := r.PerRun[i]; ok {
					return fmt.Sprintf("%.2f ms", float64(d)/1e6)
				}
				return "n/a"
			}
			ratio := func(i bench.ContainmentImpl) string {
				if d, ok := r.PerRun[i]; ok && ex > 0 {
					return fmt.Sprintf("%.2f×", float64(d)/float64(ex))
				}
				return "n/a"
			}
			fmt.Printf("%-36s %10s %10s %10s %14s %14s\n", fmt.Sprintf("%d (%s)", r.Machine, bench.Idle{N: r.Idle, Children: r.Children}),
				cell(bench.ContainCgroup), cell(bench.ContainSweep), cell(bench.ContainExec), ratio(bench.ContainCgroup), ratio(bench.ContainSweep))
			for i, why := range r.Unusable {
				fmt.Printf("  %s: %s\n", i, why)
			}
		}
	}

	var modes []bash.Containment
	switch *mode {
	case "both":
		modes = []bash.Containment{bash.CgroupContainment, bash.SweepContainment}
	case "cgroup":
		modes = []bash.Containment{bash.CgroupContainment}
	case "sweep":
		modes = []bash.Containment{bash.SweepContainment}
	default:
		fmt.Fprintln(os.Stderr, "taskrt-killstorm: -mode must be both, cgroup or sweep")
		os.Exit(2)
	}
	fmt.Printf("\nkill storm: %d tasks over %d owners, half `trap '' TERM; setsid sleep N & sleep N`, grace %s\n", *tasks, *owners, *grace)
	fmt.Printf("%-7s %9s %9s %10s %7s %9s %7s %10s %10s %8s %s\n", "mode", "processes", "start", "settle", "budget", "killed", "failed", "abandoned", "survivors", "zombies", "")
	for _, m := range modes {
		res, err := bench.KillStorm(ctx, bench.KillStormConfig{Tasks: *tasks, Owners: *owners, Mode: m, Grace: *grace, Log: logf})
		if err != nil {
			fmt.Fprintf(os.Stderr, "taskrt-killstorm: %s: %v\n", m, err)
			os.Exit(2)
		}
		out.Storm = append(out.Storm, res)
		budget := *grace + 2*time.Second
		if m == bash.SweepContainment {
			budget = *grace + 10*time.Second
		}
		verdict := "ok"
		if res.Settle > budget || res.Abandoned > 0 || res.Survivors > 0 || res.Zombies > 0 || res.Killed != res.Tasks {
			verdict, failed = "FAIL", true
		}
		fmt.Printf("%-7s %9d %9s %10s %7s %9d %7d %10d %10d %8d %s\n", res.Mode, res.Processes, res.Started.Round(time.Millisecond),
			res.Settle.Round(time.Millisecond), budget, res.Killed, res.Failed, res.Abandoned, res.Survivors, res.Zombies, verdict)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "taskrt-killstorm:", err)
			os.Exit(2)
		}
	}
	if failed {
		os.Exit(1)
	}
}
