// Command taskrt-bench measures what the taskrt runtime costs beside the work it runs,
// next to a hand-written mutex registry, bare protoactor and plain os/exec, and
// prints one table of the figures to stdout (progress goes to stderr).
//
// Usage:
//
//	taskrt-bench [-quick] [-json FILE]
//
// The default run takes a few minutes on two cores; -quick runs every figure at a
// small size in seconds (a smoke run, not a measurement). -json also writes the
// figures to FILE ("-" for stdout, instead of the table). See bench/README.md for
// what each figure means.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/taskrt/taskrt/bench/internal/bench"
)

func main() {
	quick := flag.Bool("quick", false, "run every figure at a small size (a fast smoke run)")
	jsonOut := flag.String("json", "", `also write the figures as JSON to this file ("-": stdout, instead of the table)`)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *quick, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, quick bool, jsonOut string) error {
	cfg, mode := bench.DefaultConfig(), "full"
	if quick {
		cfg, mode = bench.QuickConfig(), "quick"
	}
	m := bench.ThisMachine()
	fmt.Fprintf(os.Stderr, "taskrt-bench (%s run) on %s\n", mode, m)
	began := time.Now()
	figs, err := bench.Run(ctx, cfg, func(p bench.Progress) {
		if !p.Done {
			fmt.Fprintf(os.Stderr, "[%2d/%d] %-34s impl=%-7s … ", p.Index, p.Total, p.Figure, p.Impl)
			return
		}
		fmt.Fprintf(os.Stderr, "%s\n", p.Took.Round(time.Millisecond))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr)
		return err
	}
	fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(began).Round(time.Second))

	if jsonOut != "-" {
		if err := bench.WriteTable(os.Stdout, m, figs); err != nil {
			return err
		}
	}
	if jsonOut == "" {
		return nil
	}
	var w io.Writer = os.Stdout
	if jsonOut != "-" {
		f, err := os.Create(jsonOut)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	return bench.WriteJSON(w, m, figs)
}
