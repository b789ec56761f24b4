package output

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockingOutput is a block-mode buffer whose fullness is reported on full: one
// value each time its writer starts waiting.
func blockingOutput(t *testing.T, opts ...Option) (*Buffer, <-chan struct{}) {
	t.Helper()
	o := testOutput(t, append([]Option{WithBlocking()}, opts...)...)
	full := make(chan struct{}, 1)
	o.OnGrow(func() {
		if o.Full() {
			select {
			case full <- struct{}{}:
			default:
			}
		}
	})
	return o, full
}

// writeInBackground writes n pattern bytes in chunks and closes o; the returned
// channel closes when the writer is done.
func writeInBackground(o *Buffer, n int64, chunk int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		writePattern(o, 0, n, chunk)
		o.Close()
	}()
	return done
}

func TestBlockMode(t *testing.T) {
	t.Run("a slow reader gets every byte in order, no marker, no drop", func(t *testing.T) {
		const size = 4 << 20
		o, full := blockingOutput(t, WithMaxRead(8<<10))
		done := writeInBackground(o, size, 100_000)
		var got strings.Builder
		for reads := 0; ; reads++ {
			if reads%16 == 0 {
				select { // now and then, let the writer fill the buffer first
				case <-full:
				case <-done:
				}
			}
			s := o.Read()
			require.NotContains(t, s, "left out")
			require.LessOrEqual(t, len(s), 8<<10, "a read returns at most a read's worth")
			got.WriteString(s)
			if s == "" && isDone(done) && o.Written() == int64(got.Len()) {
				break
			}
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = pattern(int64(i))
		}
		assert.Equal(t, string(want), got.String())
		assert.Empty(t, o.Stats().SpillFile, "block mode keeps no spill file")
	})
	t.Run("the writer waits with a read's worth unread and Full says so", func(t *testing.T) {
		o, full := blockingOutput(t, WithMaxRead(1000))
		done := writeInBackground(o, 5000, 700)
		<-full
		assert.True(t, o.Full())
		assert.EqualValues(t, 1000, o.Written(), "the writer stopped at a read's worth")
		assert.Zero(t, o.Room())
		assert.Len(t, o.Read(), 1000)
		<-full // it filled the buffer again
		assert.EqualValues(t, 2000, o.Written())
		o.Unblock()
		<-done
		assert.False(t, o.Full())
	})
	t.Run("Unblock lets the writer go on and drops as the default mode does", func(t *testing.T) {
		o, full := blockingOutput(t, WithMaxRead(1000), WithMemory(1000, 4096))
		done := writeInBackground(o, 100_000, 4096)
		<-full
		o.Unblock()
		<-done
		assert.EqualValues(t, 100_000, o.Written())
		assert.Equal(t, int64(math.MaxInt64), o.Room())
		assert.Positive(t, o.Stats().Dropped, "past Unblock, what does not fit is dropped")
	})
	t.Run("Release ends the wait", func(t *testing.T) {
		o, full := blockingOutput(t, WithMaxRead(1000))
		done := writeInBackground(o, 100_000, 4096)
		<-full
		o.Release()
		<-done
	})
	t.Run("Advance moves the cursor and makes room", func(t *testing.T) {
		o, full := blockingOutput(t, WithMaxRead(1000))
		done := writeInBackground(o, 3000, 3000)
		<-full
		o.Advance(600)
		<-full
		assert.EqualValues(t, 1600, o.Written())
		o.Advance(100) // never back
		assert.Zero(t, o.Room())
		o.Advance(math.MaxInt64) // never past what was written: to 1600
		<-full
		assert.EqualValues(t, 2600, o.Written())
		o.Advance(2600)
		<-done
		assert.EqualValues(t, 3000, o.Written())
		assert.Len(t, o.Read(), 400, "reads start from the advanced cursor")
	})
	t.Run("a match consumes through its line and makes room", func(t *testing.T) {
		o, full := blockingOutput(t, WithMaxRead(1000))
		done := writeInBackground(o, 2000, 2000)
		<-full
		out, _, ok := o.ReadMatch(regexp.MustCompile(`bcd`))
		require.True(t, ok)
		assert.Equal(t, 40, len(out), "through the end of the first line")
		<-full
		assert.EqualValues(t, 1040, o.Written())
		o.Unblock()
		<-done
	})
	t.Run("a read cut by the block ends at a line's end", func(t *testing.T) {
		tests := []struct {
			name, written, want string
		}{
			// The writer stops at 256 bytes, in the 26th line.
			{"the unfinished line waits for the next read", strings.Repeat("l23456789\n", 30), strings.Repeat("l23456789\n", 25)},
			{"a line longer than the window is not held", strings.Repeat("x", 300), strings.Repeat("x", 256)},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				o, full := blockingOutput(t, WithMaxRead(256), WithMemory(256, 256))
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = o.WriteString(tc.written)
				}()
				<-full
				got := o.Read()
				assert.Equal(t, tc.want, got)
				o.Unblock()
				<-done
				o.Close()
				assert.Equal(t, tc.written[len(got):], o.Read(), "the rest follows whole")
			})
		}
	})
	t.Run("the default mode never waits and has unbounded room", func(t *testing.T) {
		o := testOutput(t, WithMaxRead(1000))
		writePattern(o, 0, 100_000, 4096)
		assert.False(t, o.Full())
		assert.Equal(t, int64(math.MaxInt64), o.Room())
		o.Unblock() // harmless
	})
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
