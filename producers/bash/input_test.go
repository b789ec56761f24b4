//go:build linux

package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/messages"
)

// interactiveModes are the stdin modes that take input.
var interactiveModes = []Stdin{StdinPipe, StdinTTY}

func TestStdinModeNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Stdin
		wantErr string
	}{
		{"the empty name is none", "", StdinNone, ""},
		{"none", "none", StdinNone, ""},
		{"pipe", "pipe", StdinPipe, ""},
		{"tty", "tty", StdinTTY, ""},
		{"an unknown name is an error naming the choices", "TTY", StdinNone, `bash: invalid stdin mode "TTY" (want none, pipe or tty)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStdin(tc.in)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, errStdin)
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, strings.TrimPrefix(got.String(), map[bool]string{true: "none"}[tc.in == ""]))
		})
	}
}

func TestStdinModesThatCannotRunStartNothing(t *testing.T) {
	p := newTestProducer(t)
	t.Run("an unknown mode fails the start", func(t *testing.T) {
		_, err := p.Start(Command{Command: "echo never", Stdin: StdinTTY + 1})
		require.ErrorIs(t, err, errStdin)
		assert.EqualError(t, err, "bash: invalid stdin mode: Stdin(3)")
	})
	for _, mode := range interactiveModes {
		t.Run("a foreground run refuses stdin "+mode.String(), func(t *testing.T) {
			res, err := p.Run(context.Background(), Command{Command: "echo never", Stdin: mode}, time.Minute)
			require.ErrorIs(t, err, errStdin)
			assert.EqualError(t, err, "bash: invalid stdin mode: a foreground command takes no input (stdin "+mode.String()+" is for background commands)")
			assert.Equal(t, Result{}, res)
		})
	}
	t.Run("a task without stdin has no input hook", func(t *testing.T) {
		h := startTask(t, p, Command{Command: "cat; echo eof"})
		assert.Nil(t, h.Input, "the runtime answers ErrNoInput")
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Equal(t, "eof\n", h.ReadOutput(), "stdin is /dev/null")
	})
	assert.Zero(t, p.Live())
	assert.Empty(t, zombieChildren(t))
}

func TestPipeStdin(t *testing.T) {
	t.Run("a read loop answers lines in order and eof ends it with exit 0", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `while read -r l; do echo "got $l"; done; echo "stdin closed"`, Stdin: StdinPipe})
		require.NoError(t, h.Input([]byte("one\n"), false))
		got := readUntil(t, h, "got one\n", settleLimit)
		require.NoError(t, h.Input([]byte("two\nthr"), false))
		require.NoError(t, h.Input([]byte("ee\n"), false))
		got += readUntil(t, h, "got three\n", settleLimit)
		require.NoError(t, h.Input([]byte("four\n"), true), "data and eof in one call")
		assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}, h.awaitDone(t, settleLimit))
		assert.Equal(t, "got one\ngot two\ngot three\ngot four\nstdin closed\n", got+h.ReadOutput())
		requireQuiet(t, p)
	})
	t.Run("input after eof is refused", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `cat; echo "eof seen"; sleep 1000`, Stdin: StdinPipe})
		require.NoError(t, h.Input(nil, true))
		readUntil(t, h, "eof seen", settleLimit)
		err := h.Input([]byte("late\n"), false)
		require.ErrorIs(t, err, messages.ErrInputClosed)
		assert.ErrorIs(t, h.Input(nil, true), messages.ErrInputClosed, "a second eof too")
	})
	t.Run("invalid UTF-8 and NUL bytes pass through as bytes", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `od -An -tx1 -v`, Stdin: StdinPipe})
		require.NoError(t, h.Input([]byte("\xff\xfe\x00A\xe2\x82"), true))
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Equal(t, " ff fe 00 41 e2 82\n", h.ReadOutput())
	})
	t.Run("the command has no terminal, and its own process group", func(t *testing.T) {
		forEachMode(t, func(t *testing.T, mode Option) {
			p := newTestProducer(t, mode)
			h := startTask(t, p, Command{Command: `{ exec 3</dev/tty && echo tty; } 2>/dev/null || echo no tty; [ "$(ps -o pgid= $$)" -eq $$ ] && echo own group; [ -p /dev/stdin ] && echo stdin is a pipe`, Stdin: StdinPipe})
			assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
			assert.Equal(t, "no tty\nown group\nstdin is a pipe\n", h.ReadOutput())
			requireQuiet(t, p)
		})
	})
}

// ttyLine is what a line the command prints looks like on a terminal.
func ttyLine(s string) string { return s + "\r\n" }

func TestTTYStdin(t *testing.T) {
	t.Run("tty prints a /dev/pts path", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: "tty", Stdin: StdinTTY})
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Regexp(t, `^/dev/pts/\d+\r\n$`, h.ReadOutput())
		requireQuiet(t, p)
	})
	t.Run("the terminal is the controlling terminal of a session of the command's own, on every stream", func(t *testing.T) {
		forEachMode(t, func(t *testing.T, mode Option) {
			p := newTestProducer(t, mode)
			h := startTask(t, p, Command{Command: `[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo terminals; exec 3</dev/tty && echo controlling; [ "$(ps -o sid= $$)" -eq $$ ] && echo own session`, Stdin: StdinTTY})
			assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
			assert.Equal(t, ttyLine("terminals")+ttyLine("controlling")+ttyLine("own session"), h.ReadOutput())
			requireQuiet(t, p)
		})
	})
	t.Run("the window size is fixed and TERM is dumb, unless configured", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts []Option
			env  []string
			want string
		}{
			{"defaults", nil, nil, ttyLine("24 80") + ttyLine("dumb")},
			{"WithTerminalSize and Command.Env", []Option{WithTerminalSize(132, 50)}, []string{"TERM=xterm"}, ttyLine("50 132") + ttyLine("xterm")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newTestProducer(t, tc.opts...)
				h := startTask(t, p, Command{Command: `stty size; echo "$TERM"`, Env: tc.env, Stdin: StdinTTY})
				assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
				assert.Equal(t, tc.want, h.ReadOutput())
			})
		}
	})
	t.Run("a read -p prompt is answered", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `read -r -p "Name? " n; echo "hello $n"`, Stdin: StdinTTY})
		got := readUntil(t, h, "Name? ", settleLimit)
		require.NoError(t, h.Input([]byte("bob\n"), false))
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Equal(t, "Name? "+ttyLine("bob")+ttyLine("hello bob"), got+h.ReadOutput(), "the prompt, the terminal's echo, the answer")
		requireQuiet(t, p)
	})
	t.Run("eof types end-of-file: once after a full line, twice mid-line", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			inputs []string // the last one is sent with eof
			want   string
		}{
			{"after a full line", []string{"line\n"}, ttyLine("line") + ttyLine("line")},
			{"mid-line", []string{"abc"}, "abc" + "abc"},
			{"mid-line after an earlier line", []string{"one\n", "two"}, ttyLine("one") + ttyLine("one") + "two" + "two"},
			{"alone", []string{""}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newTestProducer(t)
				h := startTask(t, p, Command{Command: `cat; echo "cat done"`, Stdin: StdinTTY})
				var got string
				for i, in := range tc.inputs {
					last := i == len(tc.inputs)-1
					require.NoError(t, h.Input([]byte(in), last))
					if !last {
						// cat's copy of the line: the echo and the copy are both there.
						got += readUntil(t, h, strings.Repeat(ttyLine(strings.TrimSuffix(in, "\n")), 2), settleLimit)
					}
				}
				assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail, "cat saw end-of-file")
				assert.Equal(t, tc.want+ttyLine("cat done"), got+h.ReadOutput())
				assert.ErrorIs(t, h.Input([]byte("x"), false), messages.ErrTaskEnded)
			})
		}
	})
	t.Run("eof uses the terminal's own end-of-file character", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `stty eof ^E; echo ready; cat; echo "cat done"`, Stdin: StdinTTY})
		readUntil(t, h, "ready", settleLimit)
		require.NoError(t, h.Input([]byte("x\n"), true))
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
	})
	t.Run("invalid UTF-8 passes through as bytes", func(t *testing.T) {
		p := newTestProducer(t)
		h := startTask(t, p, Command{Command: `od -An -tx1 -v`, Stdin: StdinTTY})
		require.NoError(t, h.Input([]byte("\xff\xfeA\xe2\x82\n"), true))
		assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
		assert.Equal(t, "\uFFFD\uFFFDA\uFFFD\uFFFD"+ttyLine("")+ttyLine(" ff fe 41 e2 82 0a"), h.ReadOutput(), "the echo rendered safely, the bytes read as sent")
	})
}

// After the shell exited, input fails with ErrTaskEnded even before the task settles:
// the monitor is held right after the exit (testHookLeaderExited).
func TestInputAfterTheShellExitedFails(t *testing.T) {
	for _, mode := range interactiveModes {
		t.Run(mode.String(), func(t *testing.T) {
			exited, release := make(chan struct{}), make(chan struct{})
			testHookLeaderExited = func() { close(exited); <-release }
			t.Cleanup(func() { testHookLeaderExited = nil })
			p := newTestProducer(t)
			h := startTask(t, p, Command{Command: "exit 0", Stdin: mode})
			rel := sync.OnceFunc(func() { close(release) })
			t.Cleanup(rel)
			select {
			case <-exited:
			case <-time.After(settleLimit):
				t.Fatal("the shell did not exit")
			}
			err := h.Input([]byte("late\n"), false)
			require.ErrorIs(t, err, messages.ErrTaskEnded)
			assert.EqualError(t, err, "bash: the command has exited: task has ended")
			rel()
			assert.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
			assert.ErrorIs(t, h.Input(nil, true), messages.ErrTaskEnded, "after Done too")
			requireQuiet(t, p)
		})
	}
}

// A write blocked on a full pipe returns once the task ends, even when a process of
// the task (one that ignores SIGTERM) still holds the pipe's read end: the pipe is
// closed when the shell exits.
func TestAWriteBlockedOnAFullPipeReturnsWhenTheTaskIsKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode, WithGrace(time.Minute))
		// The holder says so once it ignores SIGTERM (exec keeps an ignored signal
		// ignored), or the kill could reach it first.
		h := startTask(t, p, Command{Command: `(trap '' TERM; echo holding; exec sleep 1000) <&0 & sleep 1000`, Stdin: StdinPipe})
		readUntil(t, h, "holding", settleLimit)
		errc := make(chan error, 1)
		go func() {
			chunk := []byte(strings.Repeat("x", 4096))
			for {
				if err := h.Input(chunk, false); err != nil {
					errc <- err
					return
				}
			}
		}()
		awaitFullPipe(t, h.task.in.w)
		require.NoError(t, h.Cancel("test"))
		select {
		case err := <-errc:
			// The end closes the pipe (ErrTaskEnded). In a sandbox the end of the
			// shell's pid namespace kills the holder too, and the write may see every
			// reader gone (EPIPE) before the shell's end is recorded; the runtime
			// holds such an answer until the task has ended (actors, inputGrace).
			if !errors.Is(err, unix.EPIPE) || os.Getenv(sandboxEnv) == "" {
				require.ErrorIs(t, err, messages.ErrTaskEnded)
			}
		case <-time.After(settleLimit):
			t.Fatal("the blocked write did not return after the kill")
		}
		o := h.awaitDone(t, settleLimit)
		assert.Equal(t, messages.Killed, o.Status)
		requireQuiet(t, p)
	})
}

// awaitFullPipe waits until the pipe whose write end is w is full, so that the next
// write blocks. It polls the kernel's count of queued bytes.
func awaitFullPipe(t *testing.T, w *os.File) {
	t.Helper()
	var size int
	require.NoError(t, control(w, func(fd int) (err error) { size, err = unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0); return err }))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(settleLimit)
	for {
		var queued int
		require.NoError(t, control(w, func(fd int) (err error) { queued, err = unix.IoctlGetInt(fd, unix.TIOCINQ); return err }))
		if queued >= size {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the pipe never filled: %d of %d bytes", queued, size)
		}
	}
}

// Kill, both containment modes and "no survivors" hold in every stdin mode: a
// command that ignores its input, leaves processes behind (some holding its stdin
// or terminal) and is killed, completes or loses its owner leaves nothing.
func TestNoSurvivorsInEveryStdinMode(t *testing.T) {
	escapes := map[string]bool{"background job": true, "setsid": true, "sigterm-ignoring child": true, "env -i setsid -f": true}
	holders := []struct{ name, spawn string }{
		{"a process holding stdin", "(trap '' TERM HUP; exec SLEEP) <&0 &"},
		{"a setsid process holding stdin", "setsid SLEEP <&0 >&1 2>&1 &"},
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		sweep := New(mode).Containment() == SweepContainment
		for _, stdin := range interactiveModes {
			var cases []struct{ name, spawn string }
			for _, e := range noSurvivorEscapes {
				if escapes[e.name] && !(e.hidden && sweep) {
					cases = append(cases, struct{ name, spawn string }{e.name, e.spawn})
				}
			}
			cases = append(cases, holders...)
			for _, e := range cases {
				for _, end := range noSurvivorEndings {
					t.Run("stdin="+stdin.String()+"/"+e.name+" leaves nothing "+end.name, func(t *testing.T) {
						p := newTestProducer(t, mode, WithGrace(500*time.Millisecond))
						sleep := uniqueSleep()
						h := startTask(t, p, Command{Command: strings.ReplaceAll(e.spawn, "SLEEP", sleep) + end.suffix, Stdin: stdin})
						if sweep && end.signals {
							awaitEscaped(t, e.spawn, sleep)
						}
						end.end(t, h)
						o := h.awaitDone(t, settleLimit)
						end.check(t, o)
						h.Release()
						requireQuiet(t, p)
						require.Empty(t, processesRunning(t, sleep), "processes running %q", sleep)
					})
				}
			}
		}
		t.Run("stdin=tty/a program that ignores input and SIGTERM is killed and leaves nothing", func(t *testing.T) {
			p := newTestProducer(t, mode, WithGrace(200*time.Millisecond))
			sleep := uniqueSleep()
			h := startTask(t, p, Command{Command: "trap '' TERM HUP INT; echo ready; " + sleep + "; " + sleep, Stdin: StdinTTY})
			readUntil(t, h, "ready", settleLimit)
			require.NoError(t, h.Input([]byte("ignored\n\x03"), false), "a line and ^C, ignored")
			require.NoError(t, h.Cancel("user asked"))
			assert.Equal(t, messages.Outcome{Status: messages.Killed, Detail: "signal: SIGKILL"}, h.awaitDone(t, settleLimit))
			requireQuiet(t, p)
			require.Empty(t, processesRunning(t, sleep))
		})
	})
}

// A process outside the producer's sight (sweep mode: no marker, own session) that
// holds the task's terminal must not hang Done.
func TestATerminalHeldByAnUntrackedProcessDoesNotHangDone(t *testing.T) {
	p := newTestProducer(t, WithContainment(SweepContainment), WithDrainTimeout(100*time.Millisecond))
	fifo := filepath.Join(t.TempDir(), "escaped")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	h := startTask(t, p, Command{Command: fmt.Sprintf(
		`env -i setsid -f /bin/sh -c 'echo pid $$; echo escaped > %[1]q; exec sleep 1000'; read -r _ < %[1]q`, fifo), Stdin: StdinTTY})
	o := h.awaitDone(t, settleLimit)
	var pid int
	out := h.ReadOutput()
	_, err := fmt.Sscanf(out, "pid %d", &pid)
	require.NoError(t, err, "escapee pid in %q", out)
	killAndReap(t, pid)
	assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: 0; terminal held open by an untracked process; stopped reading"}, o)
}

var gotLine = regexp.MustCompile(`got w(\d+)-c(\d+)`)

// Concurrent callers of Input each get their data written whole: the writes of one
// call are never interleaved with another's, even past the pipe's atomic size.
func TestConcurrentInputsAreWrittenWhole(t *testing.T) {
	const (
		writers = 6
		calls   = 4
		size    = 60 << 10 // past PIPE_BUF (4 KiB): a pipe alone would interleave
	)
	p := newTestProducer(t)
	out := filepath.Join(t.TempDir(), "out")
	h := startTask(t, p, Command{Command: `cat > "$OUT"`, Env: []string{"OUT=" + out}, Stdin: StdinPipe})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for c := range calls {
				line := fmt.Sprintf("got w%d-c%d\n", w, c)
				assert.NoError(t, h.Input([]byte(strings.Repeat(line, size/len(line))), false))
			}
		})
	}
	wg.Wait()
	require.NoError(t, h.Input(nil, true))
	require.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	// Every call is one run of identical lines, and every call appears once.
	runs := map[string]int{}
	var prev string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l != prev {
			require.NotContains(t, runs, l, "the lines of %q are split in two runs", l)
			prev = l
		}
		require.Regexp(t, gotLine, l)
		runs[l]++
	}
	assert.Len(t, runs, writers*calls)
	for l, n := range runs {
		assert.Equal(t, size/(len(l)+1), n, "%q", l)
	}
}
