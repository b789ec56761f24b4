package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
)

const usage = `agentsim plays simulated agent sessions on the taskrt background-task runtime.

Usage:
  agentsim run [-json] [-plain] [-timeout D] [FILE]
  agentsim script [-models FILE] [-default-model NAME] [-owner-limit N] FILE|-
  agentsim help

run
  Plays the built-in demo, or the scenario in FILE (JSON). The transcript of every
  agent and sub-agent is printed as it happens, then a summary: tasks by final
  status, notices delivered and suppressed, model calls, and a quiescence check (no
  live task, agent, actor or OS process left). On a terminal a status line shows
  the running tasks; otherwise plain lines are written.

  -json        one JSON object per event, then {"type":"summary",...}
  -plain       plain lines even on a terminal (no status line)
  -timeout D   abort the play after D (e.g. 10s); default: the scenario's timeout_ms

script
  Reads JSON lines (from FILE, or stdin for -) and writes one JSON result per line:
    {"op":"register","agent":"a1"}                   optional "parent":"a0"
    {"op":"call","agent":"a1","tool":"bash","args":{"command":"echo hi","run_in_background":true}}
    {"op":"call","agent":"","tool":"task_list","args":{}}   "" = the no-agent caller
    {"op":"notices","agent":"a1"}                    optional "wait":N, "timeout_ms":T
    {"op":"dispose","agent":"a1"}
    {"op":"stats"}
    {"op":"sleep","ms":100}
  Results: {"op":"call","text":...,"data":...,"is_error":false},
  {"op":"notices","notices":[...]}, {"op":"stats","live_tasks":0,"live_agents":0,
  "live_actors":1,"processes":0}, {"op":"register"|"dispose","agent":...},
  {"op":"sleep","ms":...}, and {"op":...,"error":"..."} for a line that could not be
  executed (the script goes on). End of input disposes every agent and closes the
  runtime.

  -models FILE         scripted models for sub-agents: {"name": {"steps": [...]}, ...}
  -default-model NAME  the model a subagent call without "model" runs (default echo)
  -owner-limit N       cap on running tasks per owner (default 10; 0 keeps it)

Tools: task_output, task_list, task_kill, bash, subagent. The subagent tool's
optional "model" argument names a scripted model: one defined by the scenario (or
-models), or a built-in one: echo, bash, error, max-tokens, refusal, hang.

Exit status: 0 on success; 1 when a scenario's expectations are not met or
something outlived its owner; 2 for bad flags or files.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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

// newFlags returns a flag set whose -h prints the whole usage to stdout.
func newFlags(name string, stdout, stderr io.Writer) *flag.FlagSet {
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
		fmt.Fprintf(stderr, "run 'agentsim -h' for the usage\n")
		return 2, false
	}
	return 0, true
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stdout, stderr)
	jsonOut := fs.Bool("json", false, "machine output")
	plain := fs.Bool("plain", false, "no status line")
	timeout := fs.Duration("timeout", 0, "abort the play after this long")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "agentsim run: want at most one scenario FILE, got %d arguments\n", fs.NArg())
		return 2
	}
	if *timeout < 0 {
		fmt.Fprintln(stderr, "agentsim run: -timeout must not be negative")
		return 2
	}
	sc := agentsim.Demo()
	if fs.NArg() == 1 {
		var err error
		if sc, err = agentsim.LoadScenario(fs.Arg(0)); err != nil {
			fmt.Fprintf(stderr, "agentsim run: %v\n", err)
			return 2
		}
	}
	if *timeout > 0 {
		sc.TimeoutMS = int(timeout.Milliseconds())
	}
	mode := agentsim.RenderPlain
	switch {
	case *jsonOut:
		mode = agentsim.RenderJSON
	case !*plain && isTerminal(stdout):
		mode = agentsim.RenderLive
	}
	r := agentsim.NewRenderer(stdout, mode)
	r.Header(sc)
	rep, err := agentsim.Play(ctx, sc, agentsim.WithObserver(r.Observe))
	r.Close()
	if err != nil {
		fmt.Fprintf(stderr, "agentsim run: %v\n", err)
		return 1
	}
	r.Summary(rep)
	if !rep.OK() {
		return 1
	}
	return 0
}

func scriptCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("script", stdout, stderr)
	modelsFile := fs.String("models", "", "scripted models file")
	defaultModel := fs.String("default-model", "", "default sub-agent model")
	ownerLimit := fs.Int("owner-limit", 0, "running tasks per owner")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "agentsim script: want exactly one FILE, or - for stdin")
		return 2
	}
	if *ownerLimit < 0 {
		fmt.Fprintln(stderr, "agentsim script: -owner-limit must not be negative")
		return 2
	}
	var opts []agentsim.Option
	if *modelsFile != "" {
		models, err := loadModels(*modelsFile)
		if err != nil {
			fmt.Fprintf(stderr, "agentsim script: %v\n", err)
			return 2
		}
		for name, m := range models {
			opts = append(opts, agentsim.WithScript(name, m))
		}
	}
	if *defaultModel != "" {
		opts = append(opts, agentsim.WithDefaultModel(*defaultModel))
	}
	if *ownerLimit > 0 {
		opts = append(opts, agentsim.WithRuntimeOptions(actors.WithOwnerLimit(*ownerLimit)))
	}
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

func loadModels(path string) (map[string]agentsim.ModelScript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var models map[string]agentsim.ModelScript
	if err := dec.Decode(&models); err != nil {
		return nil, fmt.Errorf("%s: invalid models file: %w", path, err)
	}
	for name, m := range models {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("%s: model %s: %w", path, name, err)
		}
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
