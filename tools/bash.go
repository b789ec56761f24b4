package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

// BashName is the bash tool's name.
const BashName = "bash"

// Defaults of the bash tool's foreground timeout.
const (
	defaultBashTimeout    = 120 * time.Second
	defaultBashMaxTimeout = 600 * time.Second
)

// bashArgs are the arguments of the bash tool. RunInBackground is part of the schema
// only when the tool's run_in_background is enabled (the default), and Stdin only when
// stdin is enabled too (the default; see WithoutStdin).
type bashArgs struct {
	Command           string `json:"command" jsonschema:"The command to run with /bin/bash -c."`
	TimeoutMS         int64  `json:"timeout_ms,omitempty" jsonschema:"The longest the command may run, in milliseconds; in the background too."`
	RunInBackground   bool   `json:"run_in_background,omitempty" jsonschema:"Start the command as a background task and return its task id at once instead of waiting. Use it for long-running work (builds, test suites, servers); you are notified when it finishes."`
	Key               string `json:"key,omitempty" jsonschema:"With run_in_background: an idempotency key for harnesses that retry calls. A start whose key names a task of yours that is running or still kept returns that task instead of starting the command again."`
	BackgroundAfterMS int64  `json:"background_after_ms,omitempty" jsonschema:"Foreground only: if the command is still running after this many milliseconds, move it to the background instead of waiting or killing it: the call returns its output so far and a background task id, as run_in_background would, and the command runs on as that task."`
	Output            string `json:"output,omitempty" jsonschema:"output"`
	Stdin             string `json:"stdin,omitempty" jsonschema:"Background only: the command's standard input. none (default): empty. pipe: a pipe you write to with task_input, open until you send eof. tty: a terminal of its own, written with task_input, for programs that need one (prompts, REPLs); its output then includes the terminal's echo of your input, with \\r\\n line ends."`
}

// bashNoStdinArgs is bashArgs without stdin: the schema and decoder of a bash tool
// whose background commands take no input (WithoutStdin).
type bashNoStdinArgs struct {
	Command           string `json:"command" jsonschema:"The command to run with /bin/bash -c."`
	TimeoutMS         int64  `json:"timeout_ms,omitempty" jsonschema:"The longest the command may run, in milliseconds; in the background too."`
	RunInBackground   bool   `json:"run_in_background,omitempty" jsonschema:"Start the command as a background task and return its task id at once instead of waiting. Use it for long-running work (builds, test suites, servers); you are notified when it finishes."`
	Key               string `json:"key,omitempty" jsonschema:"With run_in_background: an idempotency key for harnesses that retry calls. A start whose key names a task of yours that is running or still kept returns that task instead of starting the command again."`
	BackgroundAfterMS int64  `json:"background_after_ms,omitempty" jsonschema:"Foreground only: if the command is still running after this many milliseconds, move it to the background instead of waiting or killing it: the call returns its output so far and a background task id, as run_in_background would, and the command runs on as that task."`
	Output            string `json:"output,omitempty" jsonschema:"output"`
}

// bashForegroundArgs is bashArgs without run_in_background: the schema and decoder of
// a bash tool whose background mode is disabled, so that schema and capability never
// disagree.
type bashForegroundArgs struct {
	Command   string `json:"command" jsonschema:"The command to run with /bin/bash -c."`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"The longest the command may run, in milliseconds."`
}

// bashTimeoutDescription describes timeout_ms with the configured default and cap.
const bashTimeoutDescription = "The longest the command may run, in milliseconds (default %d, at most %d). When it passes, the command and every process it started are killed."

// bashTimeoutBackgroundDescription is bashTimeoutDescription for a tool that offers
// run_in_background: a background command has no timeout unless the call gives one.
const bashTimeoutBackgroundDescription = "The longest the command may run, in milliseconds. In the foreground: default %d, at most %d. " +
	"With run_in_background: no limit unless given, and not capped. When it passes, the command and every process it started are killed."

const bashDescription = "Run a shell command with /bin/bash -c and return its output (stdout and stderr merged) and exit code. " +
	"The command runs in its own process group with no terminal and empty stdin; at its timeout the whole group is killed. "

const bashBackgroundDescription = "With run_in_background: true the command starts as a background task and the call returns its task id at once: " +
	"read its output with task_output, stop it with task_kill, and expect a notice in this session when it finishes. " +
	"For a command that may or may not take long (a build, a test run), set background_after_ms instead: it answers in the foreground if it finishes by then, and otherwise moves to the background and returns its task id with the output so far."

const bashStdinDescription = " A background command can take input: with stdin: \"pipe\" it reads what you send with task_input, " +
	"and with stdin: \"tty\" it runs on a terminal of its own instead (for a REPL or a prompt that needs one)."

// BashRunner is the part of *bash.Producer the bash tool uses. An embedder can wrap
// a producer to change how foreground commands run without changing a string the
// model sees: package mcpserver reports the progress of foreground commands this way.
type BashRunner interface {
	// Spec declares a background command as a task of owner (see bash.Producer.Spec).
	Spec(owner messages.AgentID, c bash.Command) messages.Spec
	// Run runs a foreground command to its end (see bash.Producer.Run).
	Run(ctx context.Context, c bash.Command, timeout time.Duration) (bash.Result, error)
}

// BashTool is the bash tool: foreground commands through the producer's Run, and,
// unless disabled, background commands as tasks of the caller through Tasks.Start.
type BashTool struct {
	rt   *actors.Runtime
	run  BashRunner
	cfg  bashConfig
	args *argSpec
}

type bashConfig struct {
	background bool
	stdin      bool
	keys       bool // the key parameter is offered
	timeout    time.Duration
	maxTimeout time.Duration
	dir        string
	env        []string
	sandbox    string // what the description says of the runner's sandbox ("" without one)
	limits     bash.Limits
	// blockOutput: background commands block on their output unless a call asks
	// for output "bounded" (WithBlockOutput).
	blockOutput bool
}

// The bash tool's output modes: what a background command does with output that
// nobody has read yet.
const (
	outputBounded = "bounded" // keep the start and the end, drop the middle (counted)
	outputBlock   = "block"   // drop nothing: the command waits for reads (bash.Command.BlockOutput)
)

var bashOutputModes = []string{outputBounded, outputBlock}

// outputDescription describes the output parameter, naming the configured default.
func (c bashConfig) outputDescription() string {
	bounded, block := " (default)", ""
	if c.blockOutput {
		bounded, block = "", " (default)"
	}
	return "Background only: what happens to output you have not read yet. bounded" + bounded +
		": the start and the end of a large output are kept and the middle is dropped. block" + block +
		": nothing is dropped; whenever 32 KiB of output is unread the command pauses (shown as running, output full) until you read it with task_output. Use block when you need every line and will read as it goes."
}

// WithBlockOutput makes output "block" the default of background commands: each
// waits for the owner's reads instead of dropping any output (bash.Command.
// BlockOutput); a call that asks for output "bounded" still gets the bounded mode.
// Foreground commands are not affected: their output is read once, at their end.
func WithBlockOutput() BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.blockOutput = true })
}

// BashOption configures the bash tool. Options are made by the With… functions
// below; a zero or negative duration keeps the default, and NewBash checks what
// they name (a working directory, environment entries) before it returns.
type BashOption interface{ apply(*bashConfig) }

type bashOptionFunc func(*bashConfig)

func (f bashOptionFunc) apply(c *bashConfig) { f(c) }

// WithRunInBackground is the tool's EnableRunInBackground setting (default true).
// When false, run_in_background is absent from the schema and a call that still
// sends it is rejected as an unknown field.
func WithRunInBackground(enabled bool) BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.background = enabled })
}

// WithoutStdin leaves the stdin parameter out of the tool: background commands read
// an empty stdin (/dev/null) and take no input, and a call that still sends stdin is
// rejected as an unknown field. By default the tool offers stdin ("none", "pipe" or
// "tty") with run_in_background; without run_in_background (WithRunInBackground
// (false)) it never does, since stdin is for background commands only.
func WithoutStdin() BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.stdin = false })
}

// WithStartKeys offers the key parameter: an idempotency key for background starts
// (messages.Spec.Key). A harness that retries a call whose result it lost (a network
// timeout) sends the same key again and gets the task the first call started — the
// same handle, with text saying so — instead of a second copy of the work. It is off
// by default: a model does not retry calls on its own, and a parameter it has no use
// for costs it attention. With WithRunInBackground(false) there is no key either.
func WithStartKeys() BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.keys = true })
}

// WithBashTimeout sets the foreground timeout used when a call gives no timeout_ms.
// Values <= 0 keep the default, 120 s; a value above the maximum is
// lowered to it.
func WithBashTimeout(d time.Duration) BashOption {
	return bashOptionFunc(func(c *bashConfig) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// WithBashMaxTimeout caps a foreground call's timeout_ms; a larger one is clamped and
// the response says so. Values <= 0 keep the default, 600 s.
// Background commands are not capped: they block no one.
func WithBashMaxTimeout(d time.Duration) BashOption {
	return bashOptionFunc(func(c *bashConfig) {
		if d > 0 {
			c.maxTimeout = d
		}
	})
}

// WithWorkDir sets the directory commands run in ("" keeps the process's own).
// NewBash fails when it is not an existing directory.
func WithWorkDir(dir string) BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.dir = dir })
}

// WithEnv adds KEY=VALUE entries to every command's environment; later options add
// to earlier ones. NewBash fails on an entry without "=" or with an empty KEY.
func WithEnv(env ...string) BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.env = append(c.env, env...) })
}

// WithLimits sets the limits of every command (bash.Command.Limits: processes,
// memory, CPU; zero fields are no limit). A runner without cgroup containment
// fails each start with bash.ErrLimitsUnavailable; a remote runner carries them to
// its worker. A command that hits one ends with the limit named in its status
// line, as the producer reports it.
func WithLimits(l bash.Limits) BashOption {
	return bashOptionFunc(func(c *bashConfig) { c.limits = l })
}

// NewBash returns the bash tool running commands with p. Background commands become
// tasks of rt owned by the calling agent; they need the task tools attached (see
// NewTaskTools), or the call fails with the runtime's no-control-surface error.
//
// The options are checked here rather than at every call: a working directory that
// does not exist or is not a directory, or a malformed environment entry, is an
// error wrapping messages.ErrInvalidArgument.
func NewBash(rt *actors.Runtime, p *bash.Producer, opts ...BashOption) (*BashTool, error) {
	return newBash(rt, p, opts...)
}

// NewBashWithRunner is NewBash with any BashRunner in place of the producer; its
// options are checked the same way.
func NewBashWithRunner(rt *actors.Runtime, r BashRunner, opts ...BashOption) (*BashTool, error) {
	return newBash(rt, r, opts...)
}

func newBash(rt *actors.Runtime, r BashRunner, opts ...BashOption) (*BashTool, error) {
	cfg := bashConfig{background: true, stdin: true, timeout: defaultBashTimeout, maxTimeout: defaultBashMaxTimeout}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.stdin = cfg.stdin && cfg.background
	if cfg.timeout > cfg.maxTimeout {
		cfg.timeout = cfg.maxTimeout
	}
	if sr, ok := r.(sandboxReporter); ok {
		cfg.sandbox = sandboxDescription(sr.Sandbox(), cfg.dir)
	}
	b := &BashTool{rt: rt, run: r, cfg: cfg}
	background := fmt.Sprintf(bashTimeoutBackgroundDescription, cfg.timeout.Milliseconds(), cfg.maxTimeout.Milliseconds())
	switch {
	case cfg.stdin:
		b.args = newArgSpec[bashArgs](minLength("command", 1), minimum("timeout_ms", 1),
			describe("timeout_ms", background), enum("stdin", bashStdinModes...),
			enum("output", bashOutputModes...), describe("output", cfg.outputDescription()))
	case cfg.background:
		b.args = newArgSpec[bashNoStdinArgs](minLength("command", 1), minimum("timeout_ms", 1),
			describe("timeout_ms", background), enum("output", bashOutputModes...), describe("output", cfg.outputDescription()))
	default:
		b.args = newArgSpec[bashForegroundArgs](minLength("command", 1), minimum("timeout_ms", 1),
			describe("timeout_ms", fmt.Sprintf(bashTimeoutDescription, cfg.timeout.Milliseconds(), cfg.maxTimeout.Milliseconds())))
	}
	if cfg.background && !cfg.keys {
		b.args = b.args.without("key")
	}
	return b, nil
}

// check validates what the options name, once, at construction.
func (c *bashConfig) check() error {
	if c.dir != "" {
		fi, err := os.Stat(c.dir)
		switch {
		case err != nil:
			return fmt.Errorf("%w: tools.WithWorkDir: %w", messages.ErrInvalidArgument, err)
		case !fi.IsDir():
			return fmt.Errorf("%w: tools.WithWorkDir: %s is not a directory", messages.ErrInvalidArgument, c.dir)
		}
	}
	for _, kv := range c.env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("%w: tools.WithEnv: malformed entry %q (want KEY=VALUE)", messages.ErrInvalidArgument, truncate(kv, 64))
		}
	}
	return nil
}

// Name returns "bash".
func (b *BashTool) Name() string { return BashName }

// Description returns the model-facing description; it mentions run_in_background
// and stdin only when the tool offers them, and the sandbox only when the runner
// reports one (a *bash.Producer with WithSandbox: what commands may write, and
// whether the network is off).
func (b *BashTool) Description() string {
	switch {
	case b.cfg.stdin:
		return bashDescription + bashBackgroundDescription + bashStdinDescription + b.cfg.sandbox
	case b.cfg.background:
		return bashDescription + bashBackgroundDescription + b.cfg.sandbox
	}
	return strings.TrimSpace(bashDescription) + b.cfg.sandbox
}

// Schema returns the input schema; run_in_background and stdin are present only when
// enabled.
func (b *BashTool) Schema() map[string]any { return b.args.schema() }

// Call runs the command: in the foreground, returning its output and a status line
// when it ends or its timeout kills it; or, with run_in_background, as a background
// task of caller, returning a Handle in Data.
func (b *BashTool) Call(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	return contained(BashName, func() Result { return b.call(ctx, caller, raw) })
}

func (b *BashTool) call(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a bashArgs
	var given map[string]bool
	var err error
	switch {
	case b.cfg.stdin:
		given, err = b.args.decode(raw, &a)
	case b.cfg.background:
		var bg bashNoStdinArgs
		given, err = b.args.decode(raw, &bg)
		a = bashArgs{Command: bg.Command, TimeoutMS: bg.TimeoutMS, RunInBackground: bg.RunInBackground, Key: bg.Key,
			BackgroundAfterMS: bg.BackgroundAfterMS, Output: bg.Output}
	default:
		var fg bashForegroundArgs
		given, err = b.args.decode(raw, &fg)
		a = bashArgs{Command: fg.Command, TimeoutMS: fg.TimeoutMS}
	}
	if err != nil {
		return errResult(err)
	}
	stdin, err := a.check(given)
	if err != nil {
		return errResult(err)
	}
	cmd := bash.Command{Command: a.Command, Dir: b.cfg.dir, Env: b.cfg.env, Stdin: stdin, Limits: b.cfg.limits,
		BlockOutput: a.RunInBackground && (a.Output == outputBlock || a.Output == "" && b.cfg.blockOutput)}
	if a.RunInBackground {
		if a.TimeoutMS > maxTimeoutMS {
			return errResult(argErr("timeout_ms must be at most %d", maxTimeoutMS))
		}
		return b.background(ctx, caller, cmd, time.Duration(a.TimeoutMS)*time.Millisecond, a.Key)
	}
	if given["background_after_ms"] {
		return b.foregroundOrMove(ctx, caller, cmd, a.TimeoutMS, time.Duration(a.BackgroundAfterMS)*time.Millisecond)
	}
	return b.foreground(ctx, cmd, a.TimeoutMS)
}

// check refuses arguments that contradict each other or are out of range, before
// anything starts, and returns the command's stdin mode.
func (a *bashArgs) check(given map[string]bool) (bash.Stdin, error) {
	if strings.TrimSpace(a.Command) == "" {
		return 0, argErr("command must not be empty")
	}
	if given["timeout_ms"] && a.TimeoutMS <= 0 {
		return 0, errTimeout
	}
	stdin, err := bash.ParseStdin(a.Stdin)
	if err != nil {
		return 0, argErr(`stdin must be "none", "pipe" or "tty"`)
	}
	if stdin != bash.StdinNone && !a.RunInBackground {
		return 0, argErr("stdin %q needs run_in_background: true (a foreground command takes no input)", a.Stdin)
	}
	if given["output"] && a.Output != outputBounded && a.Output != outputBlock {
		return 0, argErr(`output must be "bounded" or "block"`)
	}
	if given["output"] && !a.RunInBackground {
		return 0, argErr("output %q needs run_in_background: true (a foreground command's output is read once, at its end)", a.Output)
	}
	if given["key"] && !a.RunInBackground {
		return 0, argErr("key needs run_in_background: true (it makes a background start idempotent)")
	}
	if len(a.Key) > messages.MaxKey {
		return 0, argErr("key must be at most %d bytes", messages.MaxKey)
	}
	if given["background_after_ms"] {
		switch {
		case a.RunInBackground:
			return 0, argErr("background_after_ms is for foreground calls (with run_in_background the command is in the background from the start)")
		case a.BackgroundAfterMS <= 0 || a.BackgroundAfterMS > maxTimeoutMS:
			return 0, argErr("background_after_ms must be a positive number of milliseconds")
		}
	}
	return stdin, nil
}

// maxTimeoutMS is the largest timeout_ms a background command accepts: about a
// year, well inside what a time.Duration holds. Foreground calls are clamped to
// their much smaller cap instead.
const maxTimeoutMS = int64(366 * 24 * time.Hour / time.Millisecond)

// background starts cmd as a background task of caller; a positive timeout kills
// it once that long has passed (see withTimeout).
func (b *BashTool) background(ctx context.Context, caller messages.AgentID, cmd bash.Command, timeout time.Duration, key string) Result {
	spec := b.run.Spec(caller, cmd)
	spec.Key = key
	if timeout > 0 {
		spec.Run = withTimeout(spec.Run, timeout)
	}
	id, err := b.rt.Tasks().Start(ctx, spec)
	if errors.Is(err, messages.ErrDuplicate) {
		return b.duplicate(ctx, caller, id, key)
	}
	if err != nil {
		return startErrResult(err) // the runtime's error, with advice for the model where it needs some
	}
	return startedResult(ctx, b.rt, caller, id, spec.Kind, spec.Label)
}

// duplicate answers a start whose key names a task already started: the same handle
// a start returns, and text that says no new task was started.
func (b *BashTool) duplicate(ctx context.Context, caller messages.AgentID, id messages.TaskID, key string) Result {
	status := "running"
	if s, err := b.rt.Tasks().Get(ctx, id, caller); err == nil {
		status = string(s.Status)
	}
	return Result{Text: duplicateText(id, key, status), Data: Handle{Kind: "background", TaskID: id}}
}

// foregroundTimeout is a foreground call's timeout, and the line saying it was
// clamped ("" when it was not).
func (b *BashTool) foregroundTimeout(timeoutMS int64) (time.Duration, string) {
	timeout, clamped := b.cfg.timeout, ""
	if timeoutMS > 0 {
		timeout = time.Duration(timeoutMS) * time.Millisecond
		if maxMS := b.cfg.maxTimeout.Milliseconds(); timeoutMS > maxMS {
			timeout, clamped = b.cfg.maxTimeout, clampedText(maxMS)
		}
	}
	return timeout, clamped
}

func (b *BashTool) foreground(ctx context.Context, cmd bash.Command, timeoutMS int64) Result {
	timeout, clamped := b.foregroundTimeout(timeoutMS)
	r, err := b.run.Run(ctx, cmd, timeout)
	if err != nil && r.Outcome.Status == "" {
		return errResult(err) // nothing ran
	}
	var note string
	switch {
	case interruptWords(err) != "":
		note = fmt.Sprintf("(%s; the command and its process group were killed)", interruptWords(err))
	case err != nil:
		note = fmt.Sprintf("(cancelled: %s; the command and its process group were killed)", oneLine(inOwnWords(err.Error())))
	case r.TimedOut:
		note = fmt.Sprintf("(timed out after %d ms; the command and its process group were killed)", timeout.Milliseconds())
	}
	return Result{Text: joinLines(r.Output, clamped, note, statusLine(r.Outcome.Status, r.Outcome.Detail)), IsError: err != nil}
}

// bashStdinModes are the values of the stdin parameter.
var bashStdinModes = []string{"none", "pipe", "tty"}

// withTimeout wraps a task's Run so that the task is cancelled once timeout has
// passed, like a foreground command at its timeout. The task settles as the producer
// reports the kill ("killed, signal: SIGTERM"), with "timed out after N ms" before
// the producer's detail, so that the notice and the status line say why.
//
// The goroutine it adds stands between the producer's Done and the runtime's: it
// ends when the producer's Done delivers, which the producer contract guarantees
// (Cancel must lead to Done), so the task owns it like its other goroutines.
func withTimeout(run func() (messages.Hooks, error), timeout time.Duration) func() (messages.Hooks, error) {
	return func() (messages.Hooks, error) {
		h, err := run()
		if err != nil {
			return h, err
		}
		return timeoutHooks(h, timeout, timeout), nil
	}
}

// timeoutHooks wraps running work's hooks so that the work is cancelled once wait has
// passed, saying "timed out after <timeout>" (see withTimeout): a command moved to
// the background has run part of its timeout already.
func timeoutHooks(h messages.Hooks, wait, timeout time.Duration) messages.Hooks {
	done := make(chan messages.Outcome, 1)
	inner, cancel := h.Done, h.Cancel
	var cancelled atomic.Bool // someone else (a kill, a teardown) cancelled first
	h.Done = done
	h.Cancel = func(reason string) error {
		err := cancel(reason)
		if err == nil {
			cancelled.Store(true)
		}
		return err
	}
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case o := <-inner:
			done <- o
			return
		case <-t.C:
		}
		note := fmt.Sprintf("timed out after %d ms", timeout.Milliseconds())
		if cancelled.Load() || cancel(note) != nil {
			note = ""
		}
		o := <-inner
		if note != "" && o.Status == messages.Killed {
			o.Detail = strings.TrimSuffix(note+", "+o.Detail, ", ")
		}
		done <- o
	}()
	return h
}

var _ Tool = (*BashTool)(nil)
