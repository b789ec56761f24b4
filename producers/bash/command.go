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
// one is read by the shell from descriptor 3 (see shellArgs). Well below the
// kernel's 128 KiB per argument, so that a large environment cannot push a command
// near that limit over the total limit of arguments and environment either.
const maxArgCommand = 64 << 10

// fdScript is the -c script that runs a command handed over on descriptor 3: the
// command substitution reads it before the redirection closes descriptor 3 for
// the eval, so the command's processes never inherit it. eval parses and runs the
// text the way -c does; $0 and the positional parameters are the same.
const fdScript = `eval "$(</dev/fd/3)" 3<&-`

var (
	// ErrEmptyCommand is returned by Start and Run for a blank command.
	ErrEmptyCommand = errors.New("bash: empty command")
	// ErrCommandTooLong is returned by Start and Run for a command over MaxCommand.
	ErrCommandTooLong = errors.New("bash: command too long")
	// ErrCommandNUL is returned by Start and Run for a command with a NUL byte, which
	// no shell can receive.
	ErrCommandNUL = errors.New("bash: command contains a NUL byte")
)

// checkCommand rejects what cannot be run, with a one-line error that never
// repeats the command.
func checkCommand(command string) error {
	switch {
	case len(command) > MaxCommand:
		return fmt.Errorf("%w: %d bytes, over the cap of %d bytes (1 MiB)", ErrCommandTooLong, len(command), MaxCommand)
	case strings.TrimSpace(command) == "":
		return ErrEmptyCommand
	}
	if i := strings.IndexByte(command, 0); i >= 0 {
		return fmt.Errorf("%w (at byte %d)", ErrCommandNUL, i)
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
