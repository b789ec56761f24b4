//go:build linux

package bash

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/producers/output"
)

// pattern is a deterministic ASCII stream: lines of 40 bytes.
// The output buffer's documented defaults (output.WithMaxRead, output.WithMemory),
// which these tests pin.
const (
	outputMaxRead = 32 << 10
	outputTail    = 64 << 10
)

func pattern(off int64) byte {
	if off%40 == 39 {
		return '\n'
	}
	return byte('a' + off%26)
}

// writePattern writes n bytes of pattern, from offset from, in chunks.
func writePattern(o *output.Buffer, from, n int64, chunk int) {
	buf := make([]byte, chunk)
	for off := from; off < from+n; {
		k := min(int64(chunk), from+n-off)
		for i := range k {
			buf[i] = pattern(off + i)
		}
		_, _ = o.Write(buf[:k])
		off += k
	}
}

// The producer's output options (WithMaxRead, WithOutputMemory, WithSpillDir,
// WithSpillCap, WithoutSpill) configure each task's output buffer
// (producers/output.Buffer): the buffer a task gets behaves as they say.
func TestOutputOptionsConfigureTheTaskBuffer(t *testing.T) {
	tests := []struct {
		name        string
		opts        []Option
		size        int64
		wantLeftOut int64 // in the single read after everything was written
		wantDropped int64
		wantMarker  string
		noMarker    string
	}{
		{
			name: "the defaults return output within one read whole",
			size: outputMaxRead,
		},
		{
			name:        "WithMaxRead bounds one read; the rest is left out, saved in the spill file",
			opts:        []Option{WithOutput(output.WithMaxRead(1000))},
			size:        100_000,
			wantLeftOut: 100_000 - 1000 + 2*39, // cut at line ends: up to a line lost per side
			wantMarker:  "at the same offsets",
		},
		{
			name:        "WithOutputMemory and WithSpillCap bound what is kept; the rest is dropped and counted",
			opts:        []Option{WithOutput(output.WithMaxRead(1000)), WithOutput(output.WithMemory(4096, 8192)), WithOutput(output.WithSpillCap(50_000))},
			size:        1_000_000,
			wantDropped: 1_000_000 - 8192 - 50_000,
			wantMarker:  "not kept (spill file cap of 50000 bytes reached)",
		},
		{
			name:        "WithoutSpill keeps only the head and the tail",
			opts:        []Option{WithOutput(output.WithMaxRead(1000)), WithOutput(output.WithMemory(4096, 8192)), WithOutput(output.WithoutSpill())},
			size:        1_000_000,
			wantDropped: 1_000_000 - 8192 - 4096,
			wantMarker:  "not kept (spilling disabled)",
			noMarker:    "saved in",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := output.New(configOf(append([]Option{WithOutput(output.WithSpillDir(dir))}, tc.opts...)...).outputOptions(false)...)
			t.Cleanup(o.Release)
			writePattern(o, 0, tc.size, 3000)
			require.NoError(t, o.Close())
			got := o.Read()
			end, leftOut := account(t, 0, got, pattern)
			assert.Equal(t, tc.size, end, "the read covers the whole delta")
			if tc.wantLeftOut == 0 && tc.wantDropped == 0 {
				assert.Zero(t, leftOut)
			}
			if tc.wantLeftOut != 0 {
				assert.InDelta(t, tc.wantLeftOut, leftOut, 2*39)
			}
			st := o.Stats()
			assert.Equal(t, tc.wantDropped, st.Dropped, "dropped bytes")
			if tc.wantMarker != "" {
				assert.Contains(t, got, tc.wantMarker)
			}
			if tc.noMarker != "" {
				assert.NotContains(t, got, tc.noMarker)
			}
			if st.SpillFile != "" {
				assert.Equal(t, dir, filepath.Dir(st.SpillFile), "WithSpillDir")
				assert.True(t, strings.HasPrefix(filepath.Base(st.SpillFile), spillPrefix), "a bash spill file is named %s*: %s", spillPrefix, st.SpillFile)
			}
		})
	}
}

// A real task's output goes to a buffer built from the producer's options, and its
// Release (the runtime dropping the record) removes the spill file.
func TestTaskOutputSpillsWhereConfiguredAndReleaseRemovesIt(t *testing.T) {
	dir := t.TempDir()
	p := New(WithOutput(output.WithSpillDir(dir)), WithOutput(output.WithMaxRead(1000)))
	h := startTask(t, p, Command{Command: "seq 1 100000"})
	require.Equal(t, "exit code: 0", h.awaitDone(t, settleLimit).Detail)
	m := spillRE.FindStringSubmatch(h.ReadOutput())
	require.Len(t, m, 2, "the marker names the spill file")
	assert.Equal(t, dir, filepath.Dir(m[1]))
	assert.True(t, strings.HasPrefix(filepath.Base(m[1]), spillPrefix), m[1])
	_, err := os.Stat(m[1])
	require.NoError(t, err, "the spill file lives while the record does")
	h.Release()
	_, err = os.Stat(m[1])
	assert.True(t, os.IsNotExist(err), "Release removes it")
	requireQuiet(t, p)
}

// A command that keeps its output pipe full gets a pipe of floodPipe bytes (where
// the system allows that much) and larger reads; one that writes a little never
// does. Either way every byte is accounted.
func TestAFloodGrowsThePipeATrickleDoesNot(t *testing.T) {
	maxPipe := floodPipe
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			maxPipe = min(maxPipe, n)
		}
	}
	for _, tc := range []struct {
		name    string
		command string
		bytes   int64
		flood   bool
	}{
		{"a flood", "dd if=/dev/zero bs=1M count=20 status=none", 20 << 20, true},
		{"a trickle", "for i in 1 2 3; do echo line $i; done", 21, false},
		{"one write of exactly the first read's size", "head -c 32768 /dev/zero", 32768, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sizes := make(chan int, 1)
			testHookFlooding = func(pipe *os.File) {
				rc, err := pipe.SyscallConn()
				require.NoError(t, err)
				size := -1
				require.NoError(t, rc.Control(func(fd uintptr) { size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }))
				sizes <- size
			}
			t.Cleanup(func() { testHookFlooding = nil })
			p := newTestProducer(t)
			h := startTask(t, p, Command{Command: tc.command})
			o := h.awaitDone(t, settleLimit)
			require.Equal(t, "exit code: 0", o.Detail)
			assert.Equal(t, tc.bytes, h.Output.Written(), "bytes accounted")
			select {
			case got := <-sizes:
				require.True(t, tc.flood, "the reader took %q for a flood", tc.command)
				assert.GreaterOrEqual(t, got, maxPipe, "the flooded pipe's capacity")
			default:
				assert.False(t, tc.flood, "the reader never took the flood for one")
			}
			h.Release()
			requireQuiet(t, p)
		})
	}
}
