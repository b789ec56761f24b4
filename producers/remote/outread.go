package remote

import (
	"math/bits"
	"os"
	"sync"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// outReader reads a task's output into frames. A flood's bytes are in the spill
// file of the worker's output buffer, at the same offsets as in the stream
// (output.Buffer's contract: the file holds the stream's first Stats().SpillLen
// bytes): those are read from the file straight behind the frame's header in a
// pooled buffer, which costs one copy and no allocation. The rest (output that
// never outgrew memory, the tail past the spill cap, block mode) comes from Peek
// and is copied behind the header.
type outReader struct {
	out   messages.Output
	stats func() output.Stats // nil: the output has no spill file to read
	file  *os.File            // the spill file, opened at its first use
	path  string
}

func newOutReader(out messages.Output) *outReader {
	r := &outReader{out: out}
	if s, ok := out.(interface{ Stats() output.Stats }); ok {
		r.stats = s.Stats
	}
	return r
}

// read returns a frame of up to n bytes of the output from offset from on, behind
// a copy of head: the frame, the offset of its first byte (off > from when the
// buffer dropped bytes there), and its pooled buffer, to be given back with
// putBuf once the frame is sent.
func (r *outReader) read(head []byte, from, n int64) (fr []byte, off int64, pooled *[]byte) {
	h := int64(len(head))
	if r.stats != nil {
		if st := r.stats(); st.SpillFile != "" && from < st.SpillLen {
			n = min(n, st.SpillLen-from)
			if f := r.open(st.SpillFile); f != nil {
				bp := getBuf(n)
				b := (*bp)[:h+n]
				copy(b, head)
				if _, err := f.ReadAt(b[h:], from); err == nil {
					return b, from, bp
				}
				putBuf(bp)
			}
		}
	}
	data, next, _ := r.out.Peek(from, int(n))
	bp := getBuf(int64(len(data)))
	b := append(append((*bp)[:0], head...), data...)
	return b, next - int64(len(data)), bp
}

// open returns the spill file at path, opened once; nil if it cannot be (it was
// removed: Peek still has what is in memory).
func (r *outReader) open(path string) *os.File {
	if r.file != nil && r.path == path {
		return r.file
	}
	r.close()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	r.file, r.path = f, path
	return f
}

func (r *outReader) close() {
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
	}
}

// Frame buffers, pooled by size class (powers of two from minFrame to maxChunk,
// each with room for a header): a frame's buffer is at most about twice its
// bytes, so the buffers in use stay within about twice the worker's budget.
var framePools [frameClasses]sync.Pool

// frameClasses is log2(maxChunk/minFrame) + 1.
const frameClasses = 7

func bufClass(n int64) int {
	if n <= minFrame {
		return 0
	}
	return bits.Len64(uint64(n-1)) - bits.Len64(minFrame-1)
}

// getBuf is a buffer with room for a frame header and n ≤ maxChunk bytes.
func getBuf(n int64) *[]byte {
	c := bufClass(min(n, maxChunk))
	if bp, ok := framePools[c].Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, maxFrameHeader+minFrame<<c)
	return &b
}

func putBuf(bp *[]byte) {
	if bp != nil {
		framePools[bufClass(int64(cap(*bp)-maxFrameHeader))].Put(bp)
	}
}
