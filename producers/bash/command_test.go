//go:build linux

package bash

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigCommandOf is a command of exactly n bytes that prints "done": a comment line
// fills it up.
func bigCommandOf(n int) string {
	tail := "\necho done"
	return "#" + strings.Repeat("x", n-1-len(tail)) + tail
}

// Commands past the kernel's 128 KiB limit on one argument run, up to MaxCommand;
// longer ones, and commands with a NUL byte, fail with a one-line error that does
// not repeat the command.
func TestCommandSizes(t *testing.T) {
	p := newTestProducer(t)
	for _, tc := range []struct {
		name string
		size int
	}{
		{"a command below the descriptor threshold runs as an argument", maxArgCommand},
		{"a 200 KiB command runs", 200 << 10},
		{"a command of exactly the cap runs", MaxCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Run(context.Background(), Command{Command: bigCommandOf(tc.size)}, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, "done\n", res.Output)
			assert.Equal(t, "exit code: 0", res.Outcome.Detail)
		})
	}
	t.Run("a command handed over on a descriptor does not leak it to its processes", func(t *testing.T) {
		c := "#" + strings.Repeat("x", maxArgCommand) + "\n" +
			`[ -e /proc/self/fd/3 ] && echo "3 open" || echo "3 closed"; echo "$0"; exit 4`
		res, err := p.Run(context.Background(), Command{Command: c}, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, "3 closed\n/bin/bash\n", res.Output, "no descriptor 3; $0 as with -c")
		assert.Equal(t, 4, res.ExitCode, "exit works as in -c")
	})
	t.Run("a big background task keeps the first line as its label", func(t *testing.T) {
		c := "echo first\n" + bigCommandOf(300<<10)
		spec := p.Spec("a1", Command{Command: c})
		assert.Equal(t, "echo first …", spec.Label)
		h, err := spec.Run()
		require.NoError(t, err)
		defer h.Release()
		o := <-h.Done
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.Equal(t, "first\ndone\n", h.ReadOutput())
	})
	for _, tc := range []struct {
		name    string
		command string
		want    error
		text    string
	}{
		{"a command over the cap fails naming the cap", bigCommandOf(MaxCommand + 1), errCommandTooLong,
			"bash: command too long: 1048577 bytes, over the cap of 1048576 bytes (1 MiB)"},
		{"a NUL byte fails saying so", "echo a\x00b", errCommandNUL, "bash: command contains a NUL byte (at byte 6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Start(Command{Command: tc.command})
			require.ErrorIs(t, err, tc.want)
			assert.Equal(t, tc.text, err.Error())
			assert.Zero(t, p.Live())
		})
	}
	t.Run("a failing big command's start error stays one short line", func(t *testing.T) {
		q := newTestProducer(t, WithShell("/nonexistent/bash"))
		_, err := q.Start(Command{Command: strings.Repeat("y", 500<<10)})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "\n")
		assert.Less(t, len(err.Error()), 200, "%q", err.Error())
	})
	requireQuiet(t, p)
}
