package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/agentsim/internal/demo"
	"github.com/taskrt/taskrt/producers/bash"
)

const usage = `agentsim plays simulated agent sessions on the taskrt background-task runtime.

Usage:
  agentsim run [-json] [-plain] [-metrics] [-timeout D] [FILE]
  agentsim script [-models FILE] [-default-model NAME] [-owner-limit N | -no-owner-limit] [-queue N] [-global-limit N] [-grace D] FILE|-
  agentsim help

  run      play the built-in demo, or the scenario in FILE   (agentsim run -h)
  script   JSON lines of tool calls in, one JSON result out   (agentsim script -h)

Tools: task_output, task_list, task_kill, task_wait, task_input, bash, subagent. The subagent tool's
optional "model" argument names a scripted model: one defined by the scenario (or
-models), or a built-in one: echo, bash, error, max-tokens, refusal, hang.
` + exitStatus

const runUsage = `Usage: agentsim run [-json] [-plain] [-metrics] [-timeout D] [-sandbox MODE] [-queue N] [-global-limit N] [FILE]

Plays the built-in demo, or the scenario in FILE (JSON). The transcript of every
agent and sub-agent is printed as it happens, then a summary: tasks by final
status, notices delivered and suppressed, model calls, and a quiescence check (no
live task, agent, actor or OS process left). On a terminal a status line shows
the running tasks; otherwise plain lines are written.

  -json        one JSON object per event, then {"type":"summary",...}
  -plain       plain lines even on a terminal (no status line)
  -metrics     after the summary, the runtime's OpenTelemetry metrics (taskrt.*)
               as the SDK's manual reader collects them once the play is over
  -timeout D   abort the play after D (e.g. 10s); default: the scenario's timeout_ms
  -queue N     queue up to N starts per owner beyond the caps (status queued); default:
               the scenario's queue
  -global-limit N  at most N running tasks across all agents, handed out round robin;
               default: the scenario's global_limit
` + exitStatus

const scriptUsage = `Usage: agentsim script [-models FILE] [-default-model NAME] [-owner-limit N | -no-owner-limit] [-queue N] [-global-limit N] [-grace D] [-sandbox MODE] FILE|-

Reads JSON lines (from FILE, or stdin for -) and writes one JSON result per line:
  {"op":"register","agent":"a1"}                   optional "parent":"a0"
  {"op":"call","agent":"a1","tool":"bash","args":{"command":"echo hi","run_in_background":true}}
  {"op":"call","agent":"","tool":"task_list","args":{}}   "" = the no-agent caller
  {"op":"notices","agent":"a1"}                    optional "wait":N, "timeout_ms":T
  {"op":"dispose","agent":"a1"}
  {"op":"stats"}
  {"op":"sleep","ms":100}
Every result starts with the op, the input line number and the agent and tool the
line named: {"op":"call","line":2,"agent":"a1","tool":"bash","text":...,"data":...,
"is_error":false}, {"op":"notices","line":3,"agent":"a1","notices":[...]},
{"op":"stats","line":5,"live_tasks":0,"live_agents":0,"live_actors":1,"processes":0},
{"op":"register"|"dispose","line":N,"agent":...}, {"op":"sleep","line":N,"ms":...},
and {"op":...,"line":N,"error":"..."} for a line that could not be executed (the
script goes on). Keys are case-sensitive; durations are at most 86400000 ms (24 h);
a line is at most 4 MiB. End of input disposes every agent and closes the runtime;
the exit status is 1 if anything was still live then.

  -models FILE         scripted models for sub-agents: {"name": {"steps": [...]}, ...}
  -default-model NAME  the model a subagent call without "model" runs (default echo)
  -owner-limit N       cap on running tasks per owner (default 10; 0 keeps it)
  -no-owner-limit      no cap on running tasks per owner
  -queue N             queue up to N starts per owner beyond the caps, with status
                       queued (default: none)
  -global-limit N      at most N running tasks across all agents, handed out round
                       robin between them (default: none)
  -grace D             how long a cancelled command has between SIGTERM and SIGKILL
                       (default 3s; 0 keeps it)
` + exitStatus

const exitStatus = `
Exit status: 0 on success; 1 when a scenario's expectations are not met or
something outlived its owner; 2 for bad flags or files; 128+N when stopped by
signal N (130 for Ctrl-C). The first SIGINT or SIGTERM disposes every agent and
ends every task before exiting; a second one exits at once.
`

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "agentsim: %s: disposing every agent (again to exit at once)\n", sig)
		cancel(interrupted{sig})
		sig = <-sigs
		fmt.Fprintf(os.Stderr, "agentsim: %s again: exiting at once\n", sig)
		os.Exit(signalCode(sig))
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if i, ok := context.Cause(ctx).(interrupted); ok {
		code = signalCode(i.sig)
	}
	os.Exit(code)
}

// interrupted is the cause of the command's context when a signal ended it.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// signalCode is the exit status of a command stopped by sig: 128 + its number.
func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// run is the whole command, with its environment passed in, so tests can drive it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "script":
		return scriptCmd(ctx, args[1:], stdin, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "agentsim: unknown command %q (want run, script or help)\n", args[0])
		return 2
	}
}

// newFlags returns a flag set whose -h prints the command's own usage to stdout.
func newFlags(name, usage string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agentsim "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, usage) }
	return fs
}

// parse parses flags; it returns the exit code to use when the command must stop.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		fmt.Fprintf(stderr, "run '%s -h' for the usage\n", fs.Name())
		return 2, false
	}
	return 0, true
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", runUsage, stdout, stderr)
	jsonOut := fs.Bool("json", false, "machine output")
	plain := fs.Bool("plain", false, "no status line")
	timeout := fs.Duration("timeout", 0, "abort the play after this long")
	withMetrics := fs.Bool("metrics", false, "print the runtime's metrics after the summary")
	sandbox := sandboxFlag(fs)
	queueOpts := queueFlags(fs)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	qopts, err := queueOpts()
	if err != nil {
		fmt.Fprintf(stderr, "agentsim run: %v\n", err)
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "agentsim run: want at most one scenario FILE, got %d arguments\n", fs.NArg())
		return 2
	}
	if *timeout < 0 {
		fmt.Fprintln(stderr, "agentsim run: -timeout must not be negative")
		return 2
	}
	var sc *agentsim.Scenario
	if fs.NArg() == 1 {
		if sc, err = loadScenario(fs.Arg(0)); err != nil {
			fmt.Fprintf(stderr, "agentsim run: %v\n", err)
			return 2
		}
	} else if sc, err = agentsim.ParseScenario(bytes.NewReader(demo.JSON)); err != nil {
		panic("agentsim: the built-in demo scenario is invalid: " + err.Error()) // TestDemoIsTheDemoFile parses it
	}
	if *timeout > 0 {
		sc.TimeoutMS = int(timeout.Milliseconds())
	}
	mode := renderPlain
	switch {
	case *jsonOut:
		mode = renderJSON
	case !*plain && isTerminal(stdout):
		mode = renderLive
	}
	r := newRenderer(stdout, mode)
	r.header(sc)
	playOpts := append([]agentsim.Option{agentsim.WithObserver(r.observe), agentsim.WithBashOptions(bash.WithSandbox(*sandbox))}, qopts...)
	var metrics *metricsReader
	if *withMetrics {
		metrics = newMetricsReader()
		defer metrics.provider.Shutdown(context.WithoutCancel(ctx))
		playOpts = append(playOpts, agentsim.WithRuntimeOptions(actors.WithMeterProvider(metrics.provider)))
	}
	rep, err := agentsim.Play(ctx, sc, playOpts...)
	r.close()
	if err != nil {
		fmt.Fprintf(stderr, "agentsim run: %v\n", err)
		return 1
	}
	r.summary(rep)
	if metrics != nil {
		if err := metrics.write(context.WithoutCancel(ctx), stdout, *jsonOut); err != nil {
			fmt.Fprintf(stderr, "agentsim run: metrics: %v\n", err)
			return 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "agentsim run: %v\n", context.Cause(ctx))
		return 1
	}
	if len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

func scriptCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("script", scriptUsage, stdout, stderr)
	modelsFile := fs.String("models", "", "scripted models file")
	defaultModel := fs.String("default-model", "", "default sub-agent model")
	ownerLimit := fs.Int("owner-limit", 0, "running tasks per owner (0 keeps the default)")
	noOwnerLimit := fs.Bool("no-owner-limit", false, "no cap on running tasks per owner")
	grace := fs.Duration("grace", 0, "SIGTERM to SIGKILL for cancelled commands (0 keeps the default)")
	sandbox := sandboxFlag(fs)
	queueOpts := queueFlags(fs)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	qopts, err := queueOpts()
	if err != nil {
		fmt.Fprintf(stderr, "agentsim script: %v\n", err)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "agentsim script: want exactly one FILE, or - for stdin")
		return 2
	}
	switch {
	case *ownerLimit < 0:
		fmt.Fprintln(stderr, "agentsim script: -owner-limit must not be negative")
		return 2
	case *ownerLimit > 0 && *noOwnerLimit:
		fmt.Fprintln(stderr, "agentsim script: -owner-limit and -no-owner-limit exclude each other")
		return 2
	case *grace < 0:
		fmt.Fprintln(stderr, "agentsim script: -grace must not be negative")
		return 2
	}
	var opts []agentsim.Option
	if *modelsFile != "" {
		models, err := loadModels(*modelsFile)
		if err != nil {
			fmt.Fprintf(stderr, "agentsim script: %v\n", err)
			return 2
		}
		opts = append(opts, models)
	}
	opts = append(opts, agentsim.WithDefaultModel(*defaultModel))
	switch {
	case *noOwnerLimit:
		opts = append(opts, agentsim.WithRuntimeOptions(actors.WithoutOwnerLimit()))
	case *ownerLimit > 0: // 0 keeps the runtime's default, as WithOwnerLimit(0) does
		opts = append(opts, agentsim.WithRuntimeOptions(actors.WithOwnerLimit(*ownerLimit)))
	}
	if *grace > 0 {
		opts = append(opts, agentsim.WithBashOptions(bash.WithGrace(*grace)))
	}
	opts = append(opts, agentsim.WithBashOptions(bash.WithSandbox(*sandbox)))
	opts = append(opts, qopts...)
	in := stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "agentsim script: %v\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}
	if err := agentsim.RunScript(ctx, in, stdout, opts...); err != nil {
		fmt.Fprintf(stderr, "agentsim script: %v\n", err)
		return 1
	}
	return 0
}

// loadScenario reads and validates a scenario file.
func loadScenario(path string) (*agentsim.Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc, err := agentsim.ParseScenario(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// loadModels reads a -models file: the option that registers its scripted models.
func loadModels(path string) (agentsim.Option, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	models, err := agentsim.ParseModels(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return models, nil
}

// isTerminal reports whether w is a character device (a terminal) that is not
// declared dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
