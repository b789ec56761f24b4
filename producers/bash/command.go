package bash

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCommand is the longest command Start and Run accept, in bytes (1 MiB). A
// command longer than maxArgCommand is handed to the shell on a file descriptor
// instead of as its -c argument, past the kernel's limit on one argument (128 KiB).
const MaxCommand = 1 << 20

// maxArgCommand is the longest command passed as the shell's -c argument; a longer
// one is read by the shell from descriptor 3 (see fdScript and Producer.start). Well below the
// kernel's 128 KiB per argument, so that a large environment cannot push a command
// near that limit over the total limit of arguments and environment either.
const maxArgCommand = 64 << 10

// fdScript is the -c script that runs a command handed over on descriptor 3: the
// command substitution reads it before the redirection closes descriptor 3 for
// the eval, so the command's processes never inherit it. eval parses and runs the
// text the way -c does; $0 and the positional parameters are the same.
const fdScript = `eval "$(</dev/fd/3)" 3<&-`

// ErrInvalidCommand is what Start and Run return for a Command they refuse before
// starting anything: a blank command, one over MaxCommand or with a NUL byte (which
// no shell can receive), an unknown stdin mode (or, for Run, any but StdinNone), a
// malformed sandbox (an unknown mode, Writable paths in read-only mode, a workspace
// or writable path that is missing or is the root directory), BlockOutput in a
// foreground Run. ParseStdin and
// ParseSandboxMode return it for a name they do not know. The error's text says
// which rule the command broke.
var ErrInvalidCommand = errors.New("bash: invalid command")

// invalidCommand is one way a Command is invalid: its own text, and
// errors.Is(err, ErrInvalidCommand).
type invalidCommand string

func (e invalidCommand) Error() string        { return string(e) }
func (e invalidCommand) Is(target error) bool { return target == ErrInvalidCommand }

// The ways a Command is invalid.
const (
	errEmptyCommand   = invalidCommand("bash: empty command")
	errCommandTooLong = invalidCommand("bash: command too long")
	errCommandNUL     = invalidCommand("bash: command contains a NUL byte")
	errStdin          = invalidCommand("bash: invalid stdin mode")
	errSandbox        = invalidCommand("bash: invalid sandbox")
	// errBlockForeground: a foreground run has nobody reading its output before
	// it ends, so a command that waits for a reader would wait forever.
	errBlockForeground = invalidCommand("bash: BlockOutput is for background commands: a foreground run reads its output only at the end")
)

// checkCommand rejects what cannot be run, with a one-line error that never
// repeats the command.
func checkCommand(command string) error {
	switch {
	case len(command) > MaxCommand:
		return fmt.Errorf("%w: %d bytes, over the cap of %d bytes (1 MiB)", errCommandTooLong, len(command), MaxCommand)
	case strings.TrimSpace(command) == "":
		return errEmptyCommand
	}
	if i := strings.IndexByte(command, 0); i >= 0 {
		return fmt.Errorf("%w (at byte %d)", errCommandNUL, i)
	}
	return nil
}

// label is a task's label: the command's first line, marked with " …" when more
// lines follow.
func label(command string) string {
	command = strings.TrimSpace(command)
	if first, _, more := strings.Cut(command, "\n"); more {
		return strings.TrimSpace(first) + " …"
	}
	return command
}

// shortLabel is the label cut to fit in a one-line error message.
func shortLabel(command string) string {
	const maxRunes = 60
	l := label(command)
	if utf8.RuneCountInString(l) <= maxRunes {
		return l
	}
	r := []rune(l)
	return string(r[:maxRunes-1]) + "…"
}

// bigCommand reports whether command goes on a descriptor.
func bigCommand(command string) bool { return len(command) > maxArgCommand }

// Stdin is what a background command reads on its standard input. Its zero value is
// StdinNone.
type Stdin uint8

const (
	// StdinNone gives the command /dev/null: it reads end-of-file at once. The task
	// takes no input (the runtime answers Input with messages.ErrNoInput).
	StdinNone Stdin = iota
	// StdinPipe gives the command the read end of a pipe; the task's Hooks.Input
	// writes to the other end, in order, and closes it on eof. The pipe stays open
	// until eof is sent or the command's shell exits (then it is closed, and input
	// fails with messages.ErrTaskEnded). A write to a full pipe blocks the caller
	// (the runtime's input goroutine for that task, nothing else) until the command
	// reads or the task ends. Output goes to a pipe as with StdinNone.
	StdinPipe
	// StdinTTY runs the command on a pseudo-terminal of its own (its controlling
	// terminal, in a new session): standard input, output and error are the
	// terminal, so programs that behave differently on a terminal (prompts, REPLs,
	// line editing, colour) do, and the task's output is what the terminal shows —
	// including the terminal's echo of the input and "\r\n" line ends. The window
	// has a fixed size (WithTerminalSize, default 80×24) and TERM is "dumb" unless
	// Command.Env sets it. Input is typed at the terminal: the kernel's line
	// discipline applies (in canonical mode an unfinished line holds at most 4095
	// bytes; ^C sends SIGINT to the foreground job). eof types the terminal's
	// end-of-file character (VEOF, normally ^D) — twice when the input so far ends
	// mid-line, since the first one only ends that line — and leaves the terminal
	// open: a program reading in canonical mode sees end-of-file, one in raw mode
	// sees the byte. Input after the shell exited fails with messages.ErrTaskEnded.
	StdinTTY
)

// String returns "none", "pipe" or "tty".
func (s Stdin) String() string {
	switch s {
	case StdinNone:
		return "none"
	case StdinPipe:
		return "pipe"
	case StdinTTY:
		return "tty"
	}
	return fmt.Sprintf("Stdin(%d)", uint8(s))
}

// ParseStdin returns the mode named "none", "pipe" or "tty"; "" is StdinNone.
func ParseStdin(name string) (Stdin, error) {
	switch name {
	case "", "none":
		return StdinNone, nil
	case "pipe":
		return StdinPipe, nil
	case "tty":
		return StdinTTY, nil
	}
	return StdinNone, fmt.Errorf("%w %q (want none, pipe or tty)", errStdin, truncateName(name))
}

// truncateName bounds a name quoted in an error.
func truncateName(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "…"
}
