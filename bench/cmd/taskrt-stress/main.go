// Command taskrt-stress runs the randomized stress of package bench/internal/stress: agents
// start bash commands and background sub-agents, read, wait, kill, list, operate on
// each other's tasks, dispose themselves and register again, for -duration; then the
// runtime is closed and the invariants are checked. It prints the seed first (pass
// it back with -seed to replay the same operation choices), a progress line every
// 10 s, and a summary; it exits 1 on any violation.
//
// Usage:
//
//	taskrt-stress [-duration 60s] [-agents 16] [-seed N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/taskrt/taskrt/bench/internal/stress"
)

func main() {
	duration := flag.Duration("duration", 60*time.Second, "how long the agents operate before the runtime is closed")
	agents := flag.Int("agents", 16, "concurrent top-level agents")
	seed := flag.Uint64("seed", 0, "seed of the agents' random choices (0: from the clock)")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("taskrt-stress: seed %d (replay with -seed %d), %d agents, %s\n", *seed, *seed, *agents, *duration)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := stress.Run(ctx, stress.Config{Duration: *duration, Agents: *agents, Seed: *seed, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-stress:", err)
		os.Exit(2)
	}
	rep.Write(os.Stdout)
	if !rep.OK() {
		os.Exit(1)
	}
}
