package output

import (
	"bytes"
	"math"
)

// This file is block mode (WithBlocking): the writer waits for the reader instead
// of losing output.

// waitRoom waits until the buffer can take at least one byte without dropping or
// block mode ended, and returns how many it can take. Once it starts waiting, Full
// reports true (until a read makes room) and the OnGrow callback is told, so the
// runtime can show the task as blocked and end waits that cannot be met without a
// read. Callers hold o.mu.
func (o *Buffer) waitRoom() int64 {
	if o.roomLocked() == 0 {
		o.waiting = true
		if grow := o.onGrow; grow != nil {
			o.mu.Unlock()
			grow()
			o.mu.Lock()
		}
		for o.roomLocked() == 0 {
			o.room.Wait()
		}
		o.waiting = false
	}
	return o.roomLocked()
}

// roomLocked is Room. Callers hold o.mu.
func (o *Buffer) roomLocked() int64 {
	if o.blockCap == 0 {
		return math.MaxInt64
	}
	return max(0, o.blockCap-(o.written-o.read))
}

// consumed wakes a writer waiting for room after the reading cursor moved.
// Callers hold o.mu.
func (o *Buffer) consumed() {
	if o.blockCap > 0 {
		o.room.Broadcast()
	}
}

// unblock ends block mode. Callers hold o.mu.
func (o *Buffer) unblock() {
	if o.blockCap > 0 {
		o.blockCap = 0
		o.room.Broadcast()
	}
}

// Full reports whether the writer of a block-mode buffer waits for a read: it is
// false again as soon as a read made room, before the writer has gone on.
func (o *Buffer) Full() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting && o.roomLocked() == 0
}

// Room is how many bytes a Write takes now without waiting: in block mode what is
// left of a read's worth of unread output, otherwise unbounded (math.MaxInt64). A
// forwarder that streams the output elsewhere grants its peer no more than this.
func (o *Buffer) Room() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.roomLocked()
}

// Advance moves the reading cursor to offset to (never back, never past what was
// written) without rendering anything: for a forwarder that delivered the bytes
// elsewhere and whose writer, in block mode, may go on. Reads start from there.
func (o *Buffer) Advance(to int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if to > o.read {
		o.read = min(to, o.written)
		o.consumed()
	}
}

// Unblock ends block mode for good: a waiting Write goes on, and from now on what
// does not fit is dropped and counted as in the default mode (there is no spill
// file). A producer calls it when its task is cancelled, so that the task's reader
// drains its pipe and the task can end within its grace. Idempotent; harmless on a
// buffer that never blocked.
func (o *Buffer) Unblock() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unblock()
}

// heldLine is how many bytes at the end of [from, end) a read in block mode leaves
// for the next one: the unfinished last line, when the writer waits for room (the
// read was cut by the block, not by the command). A reader then sees whole lines,
// never a line split by the pause; a line longer than the whole window is not held.
// Callers hold o.mu.
func (o *Buffer) heldLine(from, end int64) int64 {
	if o.blockCap == 0 || o.roomLocked() > 0 || end <= from {
		return 0
	}
	var chunk [4 << 10]byte // lines are short: the first chunk from the end finds one
	for e := end; e > from; {
		s := span{max(from, e-int64(len(chunk))), e}
		b, err := o.fetchInto(chunk[:0], s)
		if err != nil {
			return 0
		}
		if nl := bytes.LastIndexByte(b, '\n'); nl >= 0 {
			return end - (s.from + int64(nl) + 1)
		}
		e = s.from
	}
	return 0
}
