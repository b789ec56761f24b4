//go:build linux

package bash

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestLastLine(t *testing.T) {
	tests := []struct {
		name, window, want string
	}{
		{"none before any output", "", ""},
		{"the last complete line", "a\nb\n", "b"},
		{"the line being written", "a\nhalf", "half"},
		{"blank lines are skipped", "a\n\n  \n", "a"},
		{"a blank line being written is skipped", "a\n   ", "a"},
		{"a progress bar's redraw", "10%\r50%\r", "50%"},
		{"surrounding space is trimmed", "  x  \n", "x"},
		{"only blank lines", "\n \r\n", ""},
		{"a window that starts mid-rune skips the rune's rest", "\xa9t\n", "t"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastLine([]byte(tc.window)); got != tc.want {
				t.Errorf("lastLine(%q) = %q, want %q", tc.window, got, tc.want)
			}
		})
	}
}

// RunWithProgress reports the latest line once per interval while the command runs,
// and returns what Run would.
func TestRunProgress(t *testing.T) {
	p := newTestProducer(t)
	t.Run("each report carries the latest line, numbered in order", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "gate")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		script := "exec 3<>" + fifo + "; echo line-1; read -r _ <&3; printf '10%%\\r50%%\\r'; read -r _ <&3; echo done"
		var (
			mu    sync.Mutex
			ns    []int
			lines = make(chan string, 1)
		)
		type result struct {
			res Result
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := p.RunWithProgress(context.Background(), Command{Command: script}, time.Minute, Progress{Every: 5 * time.Millisecond, Report: func(n int, line string) {
				mu.Lock()
				ns = append(ns, n)
				mu.Unlock()
				select { // latest first: only this goroutine sends
				case <-lines:
				default:
				}
				lines <- line
			}})
			done <- result{res, err}
		}()
		gate, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer gate.Close()
		awaitLine := func(want string) {
			t.Helper()
			deadline := time.After(time.Minute)
			for {
				select {
				case l := <-lines:
					if l == want {
						return
					}
				case <-deadline:
					t.Fatalf("no report of %q within a minute", want)
				}
			}
		}
		awaitLine("line-1")
		_, err = gate.WriteString("\n")
		require.NoError(t, err)
		awaitLine("50%")
		_, err = gate.WriteString("\n")
		require.NoError(t, err)
		r := <-done
		require.NoError(t, r.err)
		assert.Equal(t, "line-1\n10%\r50%\rdone\n", r.res.Output)
		assert.Equal(t, 0, r.res.ExitCode)
		mu.Lock()
		defer mu.Unlock()
		for i, n := range ns {
			if n != i+1 {
				t.Fatalf("report numbers %v: want 1, 2, 3, …", ns)
			}
		}
	})
	t.Run("the result is Run's, past the read bound too", func(t *testing.T) {
		cmd := Command{Command: "seq 1 300000"}
		want, err := p.Run(context.Background(), cmd, time.Minute)
		require.NoError(t, err)
		require.Contains(t, want.Output, "bytes left out", "the output must pass the read bound for this case")
		got, err := p.RunWithProgress(context.Background(), cmd, time.Minute, Progress{Every: time.Millisecond, Report: func(int, string) {}})
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("the timeout still stops the command", func(t *testing.T) {
		got, err := p.RunWithProgress(context.Background(), Command{Command: "echo started; sleep 60"}, 200*time.Millisecond, Progress{Every: time.Millisecond, Report: func(int, string) {}})
		require.NoError(t, err)
		assert.True(t, got.TimedOut)
		assert.Equal(t, "started\n", got.Output)
	})
}
