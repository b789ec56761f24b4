package output

import (
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadMatch(t *testing.T) {
	listening := regexp.MustCompile(`listening on :\d+`)
	t.Run("consumes through the end of the matching line; the rest stays", func(t *testing.T) {
		o := testOutput(t)
		o.WriteString("starting\nlistening on :8080 (pid 7)\nGET /\n")
		out, match, ok := o.ReadMatch(listening)
		require.True(t, ok)
		assert.Equal(t, "starting\nlistening on :8080 (pid 7)\n", out)
		assert.Equal(t, "listening on :8080", match)
		assert.Equal(t, "GET /\n", o.Read(), "what follows the line is the next read's")
	})
	t.Run("no match consumes nothing", func(t *testing.T) {
		o := testOutput(t)
		o.WriteString("starting\n")
		_, _, ok := o.ReadMatch(listening)
		assert.False(t, ok)
		assert.Equal(t, "starting\n", o.Read())
	})
	t.Run("a match across reads: only unread output is searched", func(t *testing.T) {
		o := testOutput(t)
		o.WriteString("listening on :1\n")
		assert.Equal(t, "listening on :1\n", o.Read())
		_, _, ok := o.ReadMatch(listening)
		assert.False(t, ok, "already read")
		o.WriteString("listening on :2\n")
		out, match, ok := o.ReadMatch(listening)
		require.True(t, ok)
		assert.Equal(t, "listening on :2\n", out)
		assert.Equal(t, "listening on :2", match)
	})
	t.Run("a line split between two writes matches once whole", func(t *testing.T) {
		o := testOutput(t)
		o.WriteString("listen")
		_, _, ok := o.ReadMatch(listening)
		assert.False(t, ok)
		o.WriteString("ing on :9")
		out, match, ok := o.ReadMatch(listening)
		require.True(t, ok, "the line is not finished: consume what is there")
		assert.Equal(t, "listening on :9", out)
		assert.Equal(t, "listening on :9", match)
		o.WriteString("9 more\n")
		assert.Equal(t, "9 more\n", o.Read())
	})
	t.Run("only the bounded window in memory is searched, not the spill file", func(t *testing.T) {
		o := testOutput(t, WithMaxRead(256), WithMemory(256, 4096))
		o.WriteString(strings.Repeat("x", 300) + "\nneedle in the middle\n" + strings.Repeat("y\n", 5000))
		_, _, ok := o.ReadMatch(regexp.MustCompile("needle"))
		assert.False(t, ok)
		o.WriteString("needle at the end\n")
		out, match, ok := o.ReadMatch(regexp.MustCompile("needle"))
		require.True(t, ok)
		assert.Equal(t, "needle", match)
		assert.True(t, strings.HasSuffix(out, "needle at the end\n"), "rendered like a read: %q", out[len(out)-40:])
		assert.Contains(t, out, "bytes left out", "the long delta is shown as head and tail")
	})
}

func TestPeek(t *testing.T) {
	o := testOutput(t, WithMemory(1000, 4096), WithoutSpill())
	writePattern(o, 0, 20_000, 997)
	tests := []struct {
		name               string
		off                int64
		max                int
		wantNext, wantMiss int64
		wantLen            int
	}{
		{"inside the head", 10, 100, 110, 0, 100},
		{"up to the head's end", 900, 500, 1000, 0, 100},
		{"in the dropped middle: skips to the tail", 5000, 10, 20_000 - 4096 + 10, 20_000 - 4096 - 5000, 10},
		{"inside the tail", 19_000, 100, 19_100, 0, 100},
		{"at the end", 20_000, 100, 20_000, 0, 0},
		{"past the end", 25_000, 100, 25_000, 0, 0},
		{"a negative offset is the start", -5, 3, 3, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, next, missed := o.Peek(tc.off, tc.max)
			assert.Equal(t, tc.wantNext, next)
			assert.Equal(t, tc.wantMiss, missed)
			require.Len(t, data, tc.wantLen)
			for i, b := range data {
				require.Equal(t, pattern(next-int64(len(data))+int64(i)), b)
			}
		})
	}
	t.Run("never moves the consuming cursor", func(t *testing.T) {
		o := testOutput(t)
		o.WriteString("abc\n")
		o.Peek(0, 100)
		o.Peek(2, 100)
		assert.Equal(t, "abc\n", o.Read())
	})
}

func TestOnGrowIsCalledAfterEachWriteAndAtClose(t *testing.T) {
	o := testOutput(t)
	var n atomic.Int32
	o.OnGrow(func() {
		n.Add(1)
		assert.GreaterOrEqual(t, o.Written(), int64(0), "called outside the lock: the buffer is usable")
	})
	o.WriteString("a")
	o.WriteString("b")
	o.Write(nil)
	o.Close()
	assert.Equal(t, int32(3), n.Load())
	assert.Equal(t, int64(2), o.Written())
}
