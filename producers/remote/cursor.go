package remote

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/taskrt/taskrt/internal/utf8tail"
)

// This file is the owner node's read cursor of scope-owned tasks: how far this
// node's consuming reads have returned the output, as a worker-side offset, told
// to the worker in grants so that an adopter's stream starts there.
//
// Offsets. The runtime sees the node's output buffer, whose offsets start at 0
// for every task, also an adopted one: an adopter's buffer starts empty at the
// worker-side offset of the read cursor (the base). The node's buffer also holds
// the markers it writes for bytes the worker's buffer dropped, which the worker's
// offsets do not count. So a local offset maps to a worker offset through marks:
// the first is {0, base}, and each marker adds {the local offset after it, the
// worker offset of the bytes that follow it}.

// offMark says that local offset local of the node's buffer is worker offset worker.
type offMark struct{ local, worker int64 }

// workerOffLocked maps a local offset of the task's buffer to the worker's
// (within a marker: past the bytes it stands for). t.wmu must be held.
func (t *rtask) workerOffLocked(local int64) int64 {
	for i := len(t.marks) - 1; i >= 0; i-- {
		if m := t.marks[i]; m.local <= local {
			return min(m.worker+(local-m.local), t.next)
		}
	}
	return t.next
}

// markLocked records that the next byte written to the buffer is the worker's
// offset worker (after a marker). t.wmu must be held.
func (t *rtask) markLocked(worker int64) {
	if t.scope != "" {
		t.marks = append(t.marks, offMark{local: t.out.Written(), worker: worker})
	}
}

// cursorLocked is the read cursor as a worker-side offset. t.wmu must be held.
func (t *rtask) cursorLocked() int64 {
	if t.scope == "" {
		return 0
	}
	return t.workerOffLocked(t.rc)
}

// readEndLocked is the buffer's consuming cursor after a Read that started at
// from: everything written, less what a Read holds back while the output is open
// (a trailing incomplete UTF-8 sequence; in block mode the unfinished last line,
// which Room tells exactly). t.wmu must be held (it holds the writer).
func (t *rtask) readEndLocked(from int64) int64 {
	w := t.out.Written()
	if t.outClosed {
		return max(from, w)
	}
	if end, ok := t.blockReadLocked(); ok {
		return max(from, end)
	}
	return max(from, w-t.incompleteTailLocked(from, w))
}

// blockReadLocked is the consuming cursor of a block-mode buffer: what is written
// less what is unread, which Room tells (blockCap − unread) until block mode ends.
func (t *rtask) blockReadLocked() (int64, bool) {
	if t.blockCap == 0 {
		return 0, false
	}
	room := t.out.Room()
	if room == math.MaxInt64 {
		return 0, false
	}
	return t.out.Written() - (t.blockCap - room), true
}

// incompleteTailLocked is output.Buffer's: how many bytes at the end of [from, end)
// start a UTF-8 sequence whose rest has not arrived.
func (t *rtask) incompleteTailLocked(from, end int64) int64 {
	start := max(from, end-utf8.UTFMax+1)
	if start >= end {
		return 0
	}
	b, _, missed := t.out.Peek(start, int(end-start))
	if missed > 0 || int64(len(b)) != end-start {
		return 0
	}
	return int64(utf8tail.Incomplete(b))
}

// maxMatchScan bounds how much output matchEndLocked looks at.
const maxMatchScan = 4 << 20

// matchEndLocked is the buffer's consuming cursor after a ReadMatch from from
// that matched match: the end of the matching line, found again in the raw bytes
// as ReadMatch finds it. When it cannot be found for sure (bytes no longer held,
// a different first match) the cursor stays at from: the worker is then told
// less than was read, never more (an adopter returns those bytes again).
func (t *rtask) matchEndLocked(from int64, re *regexp.Regexp, match string) int64 {
	if end, ok := t.blockReadLocked(); ok {
		return max(from, end)
	}
	w := t.out.Written()
	b, next, missed := t.out.Peek(from, int(min(w-from, maxMatchScan)))
	if missed > 0 || len(b) == 0 {
		return from
	}
	loc := re.FindIndex(b)
	if loc == nil || strings.TrimRight(string(b[loc[0]:loc[1]]), "\n") != match {
		return from
	}
	end := next
	switch nl := bytes.IndexByte(b[loc[1]:], '\n'); {
	case loc[1] > loc[0] && b[loc[1]-1] == '\n':
		end = from + int64(loc[1])
	case nl >= 0:
		end = from + int64(loc[1]+nl+1)
	}
	return end
}

// readDone moves the read cursor after a consuming read and, when its
// worker-side offset moved, tells the worker at once (a grant: a publish that
// never waits for the network). t.wmu must be held; it is released.
func (t *rtask) readDone(end int64) {
	t.rc = end
	var g grant
	worker := t.wworker
	send := worker != "" && !t.detached.Load() && t.cursorLocked() > t.cursorSent
	if send {
		g = t.grantLocked(0)
	}
	t.wmu.Unlock()
	if send {
		t.p.sendGrant(worker, g)
	}
}

// scopedRead is rout.Read for a scope-owned task.
func (o rout) scopedRead() string {
	t := o.t
	t.wmu.Lock()
	from := t.rc
	s := o.Buffer.Read()
	t.readDone(t.readEndLocked(from))
	t.roomMade()
	return s
}

// scopedReadMatch is rout.ReadMatch for a scope-owned task.
func (o rout) scopedReadMatch(re *regexp.Regexp) (out, match string, ok bool) {
	t := o.t
	t.wmu.Lock()
	from := t.rc
	out, match, ok = o.Buffer.ReadMatch(re)
	if !ok {
		t.wmu.Unlock()
		return out, match, ok
	}
	t.readDone(t.matchEndLocked(from, re, match))
	t.roomMade()
	return out, match, ok
}
