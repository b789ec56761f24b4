package remote

import (
	"encoding/binary"
)

// Output travels as frames (worker → owner node, on P.o.<node>.out) and grants
// (owner node → worker, on P.w.<worker>.ack), the only messages that are not
// JSON. Both are binary, big-endian.
//
// A frame is a header and then the output bytes as they are:
//
//	[0] version (1)  [1] flags  [2:10] wepoch  [10:18] oepoch  [18:26] from  [26:34] off
//	[34] len(task)  task  [.] len(worker)  worker  data…
//
// wepoch is the worker's lease epoch when the task started, oepoch the owner
// node's epoch the task runs under: a frame of another life of either is refused.
// The frame carries the output from offset off on; from ≤ off is where the
// worker's previous frame ended, so off − from bytes were dropped by the worker's
// own buffer (its memory and spill cap) and are counted, not sent. A frame never
// reaches past the last grant's limit. The worker reads the bytes straight into
// the buffer behind the header, so a frame costs no encoding and no copy of the
// output beyond the ones the NATS client makes.
//
// A grant is a 34-byte header and the task key:
//
//	[0] version (2)  [1] flags  [2:10] oepoch  [10:18] acked  [18:26] limit  [26:34] cursor  [34:] task
//
// acked: the owner node holds every byte before it; limit: the worker may send up
// to that offset, never past it. Both only grow. cursor (scope-owned tasks only,
// else 0): the worker-side offset up to which the owner's consuming reads have
// returned the output; an adopter's stream starts there.
type frame struct {
	task, worker   string
	wepoch, oepoch uint64
	from, off      int64
	flags          byte
	data           []byte
}

// Frame flags.
const (
	// frameAckNow asks the owner node for a grant at once instead of at its next
	// quarter window or timer: the worker is about to run out of credit, or the
	// command has exited and its outcome waits for the acknowledgement.
	frameAckNow = 1 << iota
	// frameHeld says that the command waits for its output to be read (block
	// mode): the worker's buffer is full and the grant is used up, so nothing
	// moves until the owner node reads and grants more.
	frameHeld
)

// Grant flags.
const (
	// grantResend tells the worker that a frame arrived past what the owner node
	// holds (one before it was lost on the way): send again from acked.
	grantResend = 1 << iota
)

const (
	frameVersion = 1
	frameFixed   = 34
	// maxFrameHeader is the longest frame header: a task key and a worker name
	// are at most 64 bytes each (checkName).
	maxFrameHeader = frameFixed + 2 + 2*64
	grantVersion   = 2
	grantHeader    = 34
)

// frameHead is a task's frame header with from, off and flags zero: each frame
// starts with a copy of it, completed by setHead.
func frameHead(task, worker string, wepoch, oepoch uint64) []byte {
	b := make([]byte, frameFixed, frameFixed+2+len(task)+len(worker))
	b[0] = frameVersion
	binary.BigEndian.PutUint64(b[2:], wepoch)
	binary.BigEndian.PutUint64(b[10:], oepoch)
	b = append(b, byte(len(task)))
	b = append(b, task...)
	b = append(b, byte(len(worker)))
	return append(b, worker...)
}

// setHead completes a frame header copied from frameHead.
func setHead(b []byte, from, off int64, flags byte) {
	b[1] = flags
	binary.BigEndian.PutUint64(b[18:], uint64(from))
	binary.BigEndian.PutUint64(b[26:], uint64(off))
}

// parseFrame reads a frame. Its data shares b's memory.
func parseFrame(b []byte) (frame, bool) {
	if len(b) < frameFixed+2 || b[0] != frameVersion {
		return frame{}, false
	}
	f := frame{
		flags:  b[1],
		wepoch: binary.BigEndian.Uint64(b[2:]),
		oepoch: binary.BigEndian.Uint64(b[10:]),
		from:   int64(binary.BigEndian.Uint64(b[18:])),
		off:    int64(binary.BigEndian.Uint64(b[26:])),
	}
	rest := b[frameFixed:]
	var ok bool
	if f.task, rest, ok = cutString(rest); !ok {
		return frame{}, false
	}
	if f.worker, rest, ok = cutString(rest); !ok {
		return frame{}, false
	}
	f.data = rest
	if f.task == "" || f.from < 0 || f.off < f.from || checkName("worker", f.worker) != nil {
		return frame{}, false
	}
	return f, true
}

// cutString reads a string prefixed with its length in one byte.
func cutString(b []byte) (string, []byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

// grant is the owner node's acknowledgement and credit for one task's output.
type grant struct {
	task   string
	oepoch uint64 // the owner node's epoch the task runs under
	acked  int64  // the owner node holds every byte before
	limit  int64  // no frame may reach past it
	cursor int64  // the consuming reads' worker-side offset (scope-owned tasks)
	flags  byte
}

func (g grant) encode() []byte {
	b := make([]byte, grantHeader, grantHeader+len(g.task))
	b[0], b[1] = grantVersion, g.flags
	binary.BigEndian.PutUint64(b[2:], g.oepoch)
	binary.BigEndian.PutUint64(b[10:], uint64(g.acked))
	binary.BigEndian.PutUint64(b[18:], uint64(g.limit))
	binary.BigEndian.PutUint64(b[26:], uint64(g.cursor))
	return append(b, g.task...)
}

func parseGrant(b []byte) (grant, bool) {
	if len(b) <= grantHeader || b[0] != grantVersion {
		return grant{}, false
	}
	g := grant{
		flags:  b[1],
		oepoch: binary.BigEndian.Uint64(b[2:]),
		acked:  int64(binary.BigEndian.Uint64(b[10:])),
		limit:  int64(binary.BigEndian.Uint64(b[18:])),
		cursor: int64(binary.BigEndian.Uint64(b[26:])),
		task:   string(b[grantHeader:]),
	}
	if g.acked < 0 || g.limit < g.acked || g.cursor < 0 {
		return grant{}, false
	}
	return g, true
}
