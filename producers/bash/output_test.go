//go:build linux

package bash

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testOutput(t *testing.T, opts ...Option) *output {
	t.Helper()
	cfg := defaultConfig()
	cfg.spillDir = t.TempDir()
	for _, opt := range opts {
		opt.apply(&cfg)
	}
	o := newOutput(cfg)
	t.Cleanup(func() { o.release("") })
	return o
}

// pattern is a deterministic ASCII stream: lines of 40 bytes.
func pattern(off int64) byte {
	if off%40 == 39 {
		return '\n'
	}
	return byte('a' + off%26)
}

func writePattern(o *output, from, n int64, chunk int) {
	buf := make([]byte, chunk)
	for off := from; off < from+n; {
		k := min(int64(chunk), from+n-off)
		for i := range k {
			buf[i] = pattern(off + i)
		}
		o.write(buf[:k])
		off += k
	}
}

func TestOutputReads(t *testing.T) {
	tests := []struct {
		name                 string
		opts                 []Option
		size                 int64
		wantLeftOut          int64 // in the single read after everything was written
		wantDropped          int64
		wantMarker, noMarker string
	}{
		{
			name: "output within one read is returned whole",
			size: 1000,
		},
		{
			name:        "a delta larger than one read is shown as head and tail around a marker",
			opts:        []Option{WithMaxRead(1000)},
			size:        100_000,
			wantLeftOut: 100_000 - 1000 + 2*39, // cut at line ends: up to a line lost per side
			wantMarker:  "at the same offsets",
		},
		{
			name:        "bytes past the spill cap that left memory are dropped and counted",
			opts:        []Option{WithMaxRead(1000), WithOutputMemory(4096, 8192), WithSpillCap(50_000)},
			size:        1_000_000,
			wantDropped: 1_000_000 - 8192 - 50_000,
			wantMarker:  "not kept (spill file cap of 50000 bytes reached)",
		},
		{
			name:        "without a spill file everything between head and tail is dropped",
			opts:        []Option{WithMaxRead(1000), WithOutputMemory(4096, 8192), WithoutSpill()},
			size:        1_000_000,
			wantDropped: 1_000_000 - 8192 - 4096,
			wantMarker:  "not kept (spilling disabled)",
			noMarker:    "saved in",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOutput(t, tc.opts...)
			writePattern(o, 0, tc.size, 3000)
			o.finish()
			got := o.Read()
			end, leftOut := account(t, 0, got, pattern)
			assert.Equal(t, tc.size, end, "the read covers the whole delta")
			if tc.wantLeftOut == 0 && tc.wantDropped == 0 {
				assert.Zero(t, leftOut)
			}
			if tc.wantLeftOut != 0 {
				assert.InDelta(t, tc.wantLeftOut, leftOut, 2*39)
			}
			assert.Equal(t, tc.wantDropped, o.stats().Dropped, "dropped bytes")
			if tc.wantMarker != "" {
				assert.Contains(t, got, tc.wantMarker)
			}
			if tc.noMarker != "" {
				assert.NotContains(t, got, tc.noMarker)
			}
			assert.Empty(t, o.Read(), "a second read returns nothing new")
		})
	}
}

// Random writes and reads: every read must account for its delta exactly (shown
// bytes at the right offsets plus the counts its markers state), so the reads
// together cover the whole stream once, and no read exceeds the read limit.
func TestOutputReadsAccountForEveryByte(t *testing.T) {
	configs := map[string][]Option{
		"roomy":          {WithMaxRead(4096), WithOutputMemory(8192, 16384), WithSpillCap(1 << 20)},
		"tight":          {WithMaxRead(256), WithOutputMemory(1, 4096), WithSpillCap(20_000)},
		"no spill":       {WithMaxRead(512), WithOutputMemory(1000, 4096), WithoutSpill()},
		"cap below head": {WithMaxRead(512), WithOutputMemory(10_000, 4096), WithSpillCap(3000)},
	}
	for name, opts := range configs {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			o := testOutput(t, opts...)
			var written, cursor, shownTotal, leftTotal int64
			for range 400 {
				n := int64(rng.IntN(20_000))
				if rng.IntN(10) == 0 {
					n = int64(rng.IntN(200_000))
				}
				writePattern(o, written, n, 1+rng.IntN(40_000))
				written += n
				if rng.IntN(3) == 0 {
					got := o.Read()
					end, left := account(t, cursor, got, pattern)
					shown := end - cursor - left
					require.LessOrEqual(t, shown, int64(o.maxRead), "a read shows at most maxRead bytes")
					shownTotal, leftTotal, cursor = shownTotal+shown, leftTotal+left, end
				}
			}
			o.finish()
			end, left := account(t, cursor, o.Read(), pattern)
			shownTotal += end - cursor - left
			leftTotal += left
			require.Equal(t, written, end, "reads reach the end of the stream")
			require.Equal(t, written, shownTotal+leftTotal, "shown plus left out is everything written")
		})
	}
}

func TestOutputRendering(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []string // one per read, a read after each write
	}{
		{
			name:   "NUL and invalid UTF-8 are rendered as symbols",
			writes: []string{"a\x00b\xff\xfec\u20ac"},
			want:   []string{"a\u2400b\uFFFD\uFFFDc\u20ac"},
		},
		{
			name:   "a rune split across writes is held back until complete",
			writes: []string{"x\xe2\x82", "\xac y"},
			want:   []string{"x", "\u20ac y"},
		},
		{
			name:   "an incomplete rune at the end of the output is delivered as replacement",
			writes: []string{"z\xe2\x82"},
			want:   []string{"z"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOutput(t)
			var got []string
			for _, w := range tc.writes {
				o.write([]byte(w))
				got = append(got, o.Read())
			}
			require.Equal(t, tc.want, got)
			o.finish()
			rest := o.Read()
			assert.True(t, utf8.ValidString(rest))
			if strings.HasSuffix(tc.writes[len(tc.writes)-1], "\x82") {
				assert.Equal(t, "\uFFFD\uFFFD", rest, "the held-back bytes come out once the writer is done")
			}
		})
	}
}

func TestOutputSpillFile(t *testing.T) {
	t.Run("the spill file holds the output at the same offsets until released", func(t *testing.T) {
		o := testOutput(t, WithMaxRead(1000), WithOutputMemory(4096, 8192))
		writePattern(o, 0, 200_000, 7000)
		o.finish()
		st := o.stats()
		require.NotEmpty(t, st.SpillFile)
		data, err := os.ReadFile(st.SpillFile)
		require.NoError(t, err)
		require.Len(t, data, 200_000)
		for i, b := range data {
			if b != pattern(int64(i)) {
				t.Fatalf("spill byte %d = %q, want %q", i, b, pattern(int64(i)))
			}
		}
		require.Contains(t, o.Read(), "saved in "+st.SpillFile)
		o.release("spill file removed")
		_, err = os.Stat(st.SpillFile)
		require.True(t, os.IsNotExist(err), "release removes the spill file")
	})
	t.Run("small output creates no spill file", func(t *testing.T) {
		o := testOutput(t)
		o.write([]byte("hello\n"))
		require.Empty(t, o.stats().SpillFile)
	})
}
