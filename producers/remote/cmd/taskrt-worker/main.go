// Command taskrt-worker runs the commands that taskrt owner nodes (taskrt-mcp -nats,
// or an embedder using producers/remote) place on it over NATS.
//
//	taskrt-worker -nats URL [-name NAME] [-max-tasks N] [-dir DIR] [-lease D]
//
// It prints one line when it is ready. On SIGINT or SIGTERM it kills its commands,
// tells their owners, ends its lease and exits; a second signal exits at once.
//
// A guard process (this program, re-executed) watches the worker: if the worker
// dies without cleaning up — SIGKILL, a crash, the OOM killer — the guard kills
// every process its commands left (their cgroups; cgroup containment only) and
// exits. Owners see the worker's lease lapse and report its tasks as
// "worker lost: NAME".
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
)

// guardEnv marks the guard process: its value is the worker's pid.
const guardEnv = "TASKRT_WORKER_GUARD"

const usage = `taskrt-worker runs taskrt commands that owner nodes place on it over NATS.

Usage:
  taskrt-worker -nats URL [-name NAME] [-max-tasks N] [-dir DIR] [-lease D] [-orphan-grace D]

Flags:
`

func main() {
	if guarded() {
		return
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, signals))
}

type options struct {
	url      string
	name     string
	maxTasks int
	dir      string
	lease    time.Duration
	orphan   time.Duration
	verbose  bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("taskrt-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.url, "nats", "", "NATS server `URL` (required), e.g. nats://127.0.0.1:4222")
	fs.StringVar(&o.name, "name", "", "this worker's `name` (default: the host name); commands see it in TASKRT_WORKER")
	fs.IntVar(&o.maxTasks, "max-tasks", remote.DefaultMaxTasks, "commands run at once; further starts go to other workers")
	fs.StringVar(&o.dir, "dir", "", "working `directory` of the commands (default: the current directory)")
	fs.DurationVar(&o.lease, "lease", remote.DefaultLease, "lease duration: owners declare this worker lost this long after it stops renewing")
	fs.DurationVar(&o.orphan, "orphan-grace", 0, "how long a sessionless scope's commands outlive their frontend's lease, waiting for another frontend to adopt them, before they are killed (0: the frontend's lease, at least 2s)")
	fs.BoolVar(&o.verbose, "v", false, "log leases, starts and kills to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "taskrt-worker: %v\n", err)
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case o.url == "":
		return bad("-nats URL is required")
	case o.maxTasks < 1:
		return bad("-max-tasks must be at least 1")
	case o.lease <= 0:
		return bad("-lease must be positive")
	case o.orphan < 0:
		return bad("-orphan-grace must not be negative")
	}
	return o, nil
}

// run is the command with its environment passed in.
func run(args []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	guard, err := startGuard()
	if err != nil {
		log.Warn("taskrt-worker: no guard process: commands may outlive a crash of this worker", "err", err)
	}
	defer func() {
		if guard != nil {
			_ = guard.Close() // the guard sees EOF, finds nothing left, and exits
		}
	}()

	nc, err := remote.Connect(o.url, nats.Name("taskrt-worker"))
	if err != nil {
		fmt.Fprintf(stderr, "taskrt-worker: %v\n", err)
		return 1
	}
	defer nc.Close()
	opts := []remote.Option{remote.WithLogger(log), remote.WithMaxTasks(o.maxTasks), remote.WithLease(o.lease), remote.WithDir(o.dir)}
	if o.name != "" {
		opts = append(opts, remote.WithName(o.name))
	}
	if o.orphan > 0 {
		opts = append(opts, remote.WithOrphanGrace(o.orphan))
	}
	w, err := remote.NewWorker(nc, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "taskrt-worker: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "taskrt-worker: worker %s ready on %s (max %d tasks, lease %s, %s containment)\n",
		w.Name(), nc.ConnectedUrlRedacted(), o.maxTasks, o.lease, w.Containment())

	sig := <-signals
	fmt.Fprintf(stderr, "taskrt-worker: %v: killing every command (again to exit at once)\n", sig)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- w.Close(ctx)
	}()
	select {
	case err := <-closed:
		if err != nil {
			fmt.Fprintf(stderr, "taskrt-worker: closing: %v\n", err)
			return 1
		}
		return 0
	case sig := <-signals:
		fmt.Fprintf(stderr, "taskrt-worker: %v again: exiting at once\n", sig)
		return 1
	}
}

// startGuard starts the guard: this program again, reading a pipe whose other end
// only this process holds.
func startGuard() (io.Closer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), guardEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C at a terminal is the worker's to handle
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, err
	}
	_ = r.Close()
	go func() { _ = cmd.Wait() }() // reap it if this process outlives it
	return w, nil
}

// guarded runs the guard when this process is one, and reports whether it was.
// The guard waits for its pipe's end (the worker exited, however), then until the
// worker is dead (it has been reparented), then lets a bash producer remove the
// cgroups that dead processes left — the worker's among them — killing what still
// runs in them.
func guarded() bool {
	v := os.Getenv(guardEnv)
	if v == "" {
		return false
	}
	worker, _ := strconv.Atoi(v)
	signal.Ignore(os.Interrupt, syscall.SIGTERM) // the worker handles those; the guard outlives it
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	for i := 0; i < 1000 && os.Getppid() == worker; i++ {
		time.Sleep(10 * time.Millisecond) // reparenting follows the worker's exit within moments
	}
	_ = bash.New(bash.WithoutSubreaper())
	return true
}
