package output

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/taskrt/taskrt/internal/utf8tail"
	"github.com/taskrt/taskrt/messages"
)

// Buffer is a task's offset-keyed output buffer. Every byte the command writes has an
// offset in the output stream (0, 1, 2, ...). Where a byte lives:
//
//	[0, len(head))                 head: in memory, the first headCap bytes
//	[0, fileLen)                   the spill file, at the same offsets; written
//	                               through once the output outgrows one read or the
//	                               head, up to spillCap bytes
//	[tailStart, written)           tail: in memory, a ring of the latest tailCap bytes
//	[max(len(head), fileLen), tailStart)
//	                               nowhere: dropped, and counted
//
// Reads are consuming deltas from a cursor; a read never re-delivers and never skips
// a byte without a marker line stating how many bytes it left out and where they are.
// A Buffer is safe for one writer and any number of readers at once. Its zero value is
// not usable; call New.
type Buffer struct {
	headCap  int
	tailCap  int
	maxRead  int
	spillCap int64
	spillAt  int64 // the spill file is created once the output grows past this size
	spillDir string
	prefix   string
	log      *slog.Logger

	mu        sync.Mutex // protects every field below
	head      []byte     // stream bytes [0, len(head))
	ring      []byte     // tail ring, len tailCap once allocated
	ringStart int        // index in ring of the byte at offset tailStart
	ringLen   int        // bytes held in ring
	written   int64      // bytes received so far
	file      *os.File   // spill file, nil until needed and after release
	path      string     // spill file path, "" until created
	fileLen   int64      // the spill file holds stream bytes [0, fileLen)
	planned   int64      // bytes the writer is writing to the spill file without the lock
	notKept   string     // why output past fileLen is not saved; "" while spilling works
	read      int64      // consuming read cursor
	closed    bool       // the writer is done: no byte will follow
	removed   bool       // the spill file was removed; its bytes are no longer available
	onGrow    func()     // called after every write, outside mu

	// Block mode (WithBlocking): the writer waits while blockCap bytes are unread.
	blockCap int64     // 0: not blocking (never set, or Unblock)
	waiting  bool      // the writer is in waitRoom
	room     sync.Cond // signalled when the reader consumed or the wait ended; L is &mu
}

var _ messages.Output = (*Buffer)(nil)

// New returns an empty buffer.
func New(opts ...Option) *Buffer {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	o := &Buffer{
		headCap:  cfg.head,
		tailCap:  cfg.tail,
		maxRead:  cfg.maxRead,
		spillCap: cfg.spillCap,
		spillAt:  int64(min(cfg.head, cfg.maxRead)),
		spillDir: cfg.spillDir,
		prefix:   cfg.spillPrefix,
		log:      cfg.logger,
	}
	o.room.L = &o.mu
	if cfg.block {
		// Every unread byte stays in the tail ring and one Read returns them all,
		// so the owner never meets a marker; a spill file would only copy them.
		o.blockCap = int64(min(o.maxRead, o.tailCap))
		o.spillCap = 0
	}
	if o.spillCap <= 0 {
		o.notKept = "spilling disabled"
	}
	return o
}

// Write appends p to the stream (one writer at a time) and tells the OnGrow callback.
// It never fails: in the default mode what does not fit is counted as dropped; in
// block mode (WithBlocking) it waits for the reader instead, so it returns once
// every byte of p is in the buffer, or once Unblock or Release ended the wait.
func (o *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		o.mu.Lock()
		chunk := p
		if o.blockCap > 0 {
			room := o.waitRoom()
			if room < int64(len(chunk)) {
				chunk = chunk[:room]
			}
		}
		o.append(chunk)
		grow := o.onGrow
		o.mu.Unlock()
		if grow != nil {
			grow()
		}
		p = p[len(chunk):]
	}
	return n, nil
}

// append writes p through to the spill file where planned and into memory.
// Callers hold o.mu, which append releases around the disk write.
func (o *Buffer) append(p []byte) {
	if f, n := o.spillPlan(p); f != nil {
		// The disk write happens without the lock, so that readers never wait for
		// it; p becomes readable once it is in the file and in memory both.
		o.mu.Unlock()
		written, err := f.Write(p[:n])
		o.mu.Lock()
		o.spilled(f, n, written, err)
	}
	o.write(p)
}

// spillPlan decides what of p, which starts at offset o.written, goes through to
// the spill file, creating the file (with the head so far) when the output first
// outgrows spillAt: the file and how many bytes to write to it, which the writer
// does without the lock (see Write). Callers hold o.mu.
func (o *Buffer) spillPlan(p []byte) (*os.File, int) {
	if o.notKept != "" || o.removed {
		return nil, 0
	}
	if o.file == nil {
		if o.written+int64(len(p)) <= o.spillAt {
			return nil, 0
		}
		f, err := os.CreateTemp(o.spillDir, o.prefix+"*.out")
		if err != nil {
			o.spillFailed(err)
			return nil, 0
		}
		o.file, o.path = f, f.Name()
		// written <= spillAt <= headCap here, so the head holds every byte so far.
		o.writeFile(o.head[:min(int64(len(o.head)), o.spillCap)])
		if o.notKept != "" {
			return nil, 0
		}
	}
	n := min(int64(len(p)), o.spillCap-o.fileLen-o.planned)
	if n <= 0 {
		return nil, 0
	}
	o.planned += n
	return o.file, int(n)
}

// spilled records the spill write that spillPlan planned (planned bytes, written
// of them, err). Callers hold o.mu.
func (o *Buffer) spilled(f *os.File, planned, written int, err error) {
	o.planned -= int64(planned)
	if o.removed || o.file != f {
		return // RemoveSpill closed it meanwhile: whatever the write did no longer matters
	}
	o.fileLen += int64(written)
	if err != nil {
		o.spillFailed(err)
		return
	}
	if o.notKept == "" && o.fileLen >= o.spillCap {
		o.notKept = fmt.Sprintf("spill file cap of %d bytes reached", o.spillCap)
	}
}

// WriteString is Write for a string.
func (o *Buffer) WriteString(s string) (int, error) { return o.Write([]byte(s)) }

// OnGrow sets the function called after every write and at Close (outside the
// buffer's lock, on the writer's goroutine): the runtime's wake-up for output events
// and waits. It must not block. Setting it again replaces it.
func (o *Buffer) OnGrow(f func()) {
	o.mu.Lock()
	o.onGrow = f
	o.mu.Unlock()
}

// Written is how many bytes were written so far.
func (o *Buffer) Written() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written
}

// write appends p to the stream's memory. Callers hold o.mu.
func (o *Buffer) write(p []byte) {
	if n := min(o.headCap-len(o.head), len(p)); n > 0 {
		o.head = append(o.head, p[:n]...)
		o.written += int64(n)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	if o.ring == nil {
		o.ring = make([]byte, o.tailCap)
	}
	o.written += int64(len(p))
	if len(p) >= o.tailCap {
		copy(o.ring, p[len(p)-o.tailCap:])
		o.ringStart, o.ringLen = 0, o.tailCap
		return
	}
	end := (o.ringStart + o.ringLen) % o.tailCap
	n := copy(o.ring[end:], p)
	copy(o.ring, p[n:])
	o.ringLen += len(p)
	if over := o.ringLen - o.tailCap; over > 0 {
		o.ringStart = (o.ringStart + over) % o.tailCap
		o.ringLen = o.tailCap
	}
}

func (o *Buffer) writeFile(p []byte) {
	n, err := o.file.Write(p)
	o.fileLen += int64(n)
	if err != nil {
		o.spillFailed(err)
	}
}

func (o *Buffer) spillFailed(err error) {
	o.notKept = "spill file error: " + err.Error()
	o.log.Warn("output spill failed; further output is kept in memory only", "err", err)
}

// Close records that the writer is done, so a trailing incomplete UTF-8 sequence is
// delivered instead of held back. It does not free anything (see Release).
func (o *Buffer) Close() error {
	o.mu.Lock()
	o.closed = true
	grow := o.onGrow
	o.mu.Unlock()
	if grow != nil {
		grow()
	}
	return nil
}

// RemoveSpill removes the spill file while the output may still be read. reason is
// what later markers say about bytes that were only in it ("" says nothing).
// Idempotent.
func (o *Buffer) RemoveSpill(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.removed {
		return
	}
	o.removed = true
	o.notKept = reason
	if o.file == nil {
		return
	}
	if err := o.file.Close(); err != nil {
		o.log.Warn("closing spill file", "path", o.path, "err", err)
	}
	if err := os.Remove(o.path); err != nil {
		o.log.Warn("removing spill file", "path", o.path, "err", err)
	}
	o.file = nil
}

// Release is for Hooks.Release: the runtime dropped the task's record, so nobody
// reads any more. It removes the spill file and frees the memory. Idempotent.
func (o *Buffer) Release() {
	o.RemoveSpill("output discarded")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.read = o.written
	o.head, o.ring, o.ringStart, o.ringLen = nil, nil, 0, 0
	o.unblock()
}

// Stats is a snapshot of a buffer's counters.
type Stats struct {
	Written   int64  // bytes received
	Dropped   int64  // bytes kept nowhere (neither in memory nor in the spill file)
	SpillFile string // path of the spill file, "" if none was created
	SpillLen  int64  // bytes in the spill file
}

// Stats returns the buffer's counters.
func (o *Buffer) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := max(int64(len(o.head)), o.fileLen)
	return Stats{
		Written:   o.written,
		Dropped:   max(0, o.tailStart()-kept),
		SpillFile: o.path,
		SpillLen:  o.fileLen,
	}
}

func (o *Buffer) tailStart() int64 { return o.written - int64(o.ringLen) }

// filePrefix is the end of the stream prefix readable from the spill file.
func (o *Buffer) filePrefix() int64 {
	if o.file == nil || o.removed {
		return 0
	}
	return o.fileLen
}

// span is the half-open stream range [from, to).
type span struct{ from, to int64 }

// Read returns the output since the previous Read (a consuming delta), rendered
// safely: at most maxRead bytes of output, as the delta's head and tail around a
// marker line when the delta is larger or when some of it was not kept. While the
// writer is open, a trailing incomplete UTF-8 sequence is held back for the next read.
//
// The bytes are copied under the buffer's lock and rendered after it is released,
// so that the writer never waits for a rendering.
func (o *Buffer) Read() string {
	o.mu.Lock()
	from, end := o.read, o.written
	if !o.closed {
		end -= o.incompleteTail(from, end)
		end -= o.heldLine(from, end)
	}
	if end <= from {
		o.mu.Unlock()
		return ""
	}
	o.read = end
	o.consumed()
	ps := o.pieces(from, end)
	o.mu.Unlock()
	return assemble(ps)
}

// ReadMatch looks for re in the unread output still held in memory (the head and the
// tail: the bounded window, never the spill file). On a match it consumes, and
// returns rendered as Read does, the output up to the end of the line that matched
// (or to the end of what was written, when that line is not finished yet); what
// follows stays for the next read. Without a match it consumes nothing.
func (o *Buffer) ReadMatch(re *regexp.Regexp) (out, match string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := o.read
	for _, s := range intersect([]span{{from, o.written}}, o.memorySpans()) {
		b, err := o.fetch(s)
		if err != nil {
			continue
		}
		loc := re.FindIndex(b)
		if loc == nil {
			continue
		}
		end := s.to
		switch nl := bytes.IndexByte(b[loc[1]:], '\n'); {
		case loc[1] > loc[0] && b[loc[1]-1] == '\n':
			end = s.from + int64(loc[1])
		case nl >= 0:
			end = s.from + int64(loc[1]+nl+1)
		}
		var sb strings.Builder
		renderSafe(&sb, b[loc[0]:loc[1]])
		o.read = end
		o.consumed()
		return o.render(from, end), strings.TrimRight(sb.String(), "\n"), true
	}
	return "", "", false
}

// Peek returns up to maxBytes raw bytes of the output from offset off on, without moving
// the consuming cursor: next is the offset after the returned bytes, and missed how
// many bytes from off on are no longer held (between the head and the tail, past
// the spill cap) and were skipped. Past the end it returns no bytes and next = off.
func (o *Buffer) Peek(off int64, maxBytes int) (data []byte, next, missed int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	off = maxInt64(off, 0)
	if off >= o.written || maxBytes <= 0 {
		return nil, off, 0
	}
	avail := []span{{0, maxInt64(int64(len(o.head)), o.filePrefix())}, {o.tailStart(), o.written}}
	for _, s := range intersect([]span{{off, o.written}}, avail) {
		s.to = minInt64(s.to, s.from+int64(maxBytes))
		b, err := o.fetch(s)
		if err != nil {
			continue
		}
		return b, s.to, s.from - off
	}
	return nil, o.written, o.written - off
}

func maxInt64(a, b int64) int64 { return max(a, b) }
func minInt64(a, b int64) int64 { return min(a, b) }

// memorySpans is where bytes are held in memory: the head and the tail ring.
// Callers hold o.mu.
func (o *Buffer) memorySpans() []span {
	return intersect([]span{{0, o.written}}, []span{{0, int64(len(o.head))}, {o.tailStart(), o.written}})
}

// render returns the stream range [from, end) as Read shows it. Callers hold o.mu.
func (o *Buffer) render(from, end int64) string { return assemble(o.pieces(from, end)) }

// piece is a part of a rendered read: stream bytes to render safely, or a marker
// line.
type piece struct {
	raw    []byte
	marker string
}

// pieces returns the stream range [from, end) as Read shows it, not yet rendered:
// the bytes shown (copies) and the marker lines between them. Callers hold o.mu.
func (o *Buffer) pieces(from, end int64) []piece {
	want := []span{{from, end}}
	if end-from > int64(o.maxRead) {
		left := int64(o.maxRead / 2)
		want = []span{{from, from + left}, {end - (int64(o.maxRead) - left), end}}
	}
	kept := max(int64(len(o.head)), o.filePrefix())
	shown := intersect(want, []span{{0, kept}, {o.tailStart(), o.written}})

	var ps []piece
	cursor := from
	for _, s := range shown {
		b, err := o.fetchInto(rawBuf(int(s.to-s.from)), s)
		if err != nil {
			o.log.Warn("reading spill file", "path", o.path, "err", err)
			continue // the span is reported as left out below
		}
		if s.from > cursor { // an omission precedes: start at a line or rune boundary
			cut := alignStart(b)
			b, s.from = b[cut:], s.from+int64(cut)
		}
		if s.to < end { // an omission follows: end at a line or rune boundary
			cut := alignEnd(b)
			b, s.to = b[:cut], s.from+int64(cut)
		}
		if len(b) == 0 {
			continue
		}
		if s.from > cursor {
			ps = append(ps, piece{marker: o.markerLine(span{cursor, s.from})})
		}
		ps = append(ps, piece{raw: b})
		cursor = s.to
	}
	if cursor < end {
		ps = append(ps, piece{marker: o.markerLine(span{cursor, end})})
	}
	return ps
}

// assemble renders pieces: bytes safely, each marker on a line of its own. The
// pieces' bytes go back to the pool once rendered.
func assemble(ps []piece) string {
	if len(ps) == 1 && ps[0].marker == "" && utf8.Valid(ps[0].raw) && bytes.IndexByte(ps[0].raw, 0) < 0 {
		// The bytes are fetch's copy, referenced nowhere else: the string takes
		// them over instead of copying them once more.
		return unsafe.String(unsafe.SliceData(ps[0].raw), len(ps[0].raw))
	}
	var sb strings.Builder
	size := 0
	for _, p := range ps {
		// A NUL renders as three bytes; so does an invalid byte, which is rare
		// enough to leave to the builder's growth.
		size += len(p.raw) + 2*bytes.Count(p.raw, []byte{0}) + len(p.marker) + 1
	}
	sb.Grow(size)
	for _, p := range ps {
		if p.marker == "" {
			renderSafe(&sb, p.raw)
			putRawBuf(p.raw)
			continue
		}
		if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.marker)
	}
	return sb.String()
}

// rawBufs holds the byte copies of reads being rendered, for reuse: a flood's
// reads would otherwise leave one maxRead-sized copy each for the collector.
var rawBufs sync.Pool

// rawBuf returns an empty slice with room for n bytes.
func rawBuf(n int) []byte {
	if p, ok := rawBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putRawBuf returns b's memory to the pool; b must be referenced nowhere else.
func putRawBuf(b []byte) {
	if cap(b) < 4<<10 || cap(b) > 1<<20 {
		return
	}
	b = b[:0]
	rawBufs.Put(&b)
}

// markerLine is the one-line account of the omitted span s, with its line end.
// Callers hold o.mu.
func (o *Buffer) markerLine(s span) string {
	var sb strings.Builder
	n := s.to - s.from
	saved := max(0, min(s.to, o.filePrefix())-s.from)
	fmt.Fprintf(&sb, "[... %d bytes left out (output offsets %d-%d)", n, s.from, s.to)
	switch {
	case saved == n:
		fmt.Fprintf(&sb, "; saved in %s at the same offsets", o.path)
	case saved > 0:
		fmt.Fprintf(&sb, "; offsets %d-%d saved in %s, the other %d bytes not kept", s.from, s.from+saved, o.path, n-saved)
		if o.notKept != "" {
			fmt.Fprintf(&sb, " (%s)", o.notKept)
		}
	case o.notKept != "":
		fmt.Fprintf(&sb, "; not kept (%s)", o.notKept)
	}
	sb.WriteString(" ...]\n")
	return sb.String()
}

// fetch copies the stream bytes of s, which must be available, from memory or the
// spill file. Callers hold o.mu.
func (o *Buffer) fetch(s span) ([]byte, error) { return o.fetchInto(make([]byte, 0, s.to-s.from), s) }

// fetchInto is fetch appending to b. Callers hold o.mu.
func (o *Buffer) fetchInto(b []byte, s span) ([]byte, error) {
	tailStart := o.tailStart()
	for off := s.from; off < s.to; {
		switch {
		case off >= tailStart:
			i := (o.ringStart + int(off-tailStart)) % o.tailCap
			n := int(s.to - off)
			first := min(n, o.tailCap-i)
			b = append(b, o.ring[i:i+first]...)
			b = append(b, o.ring[:n-first]...)
			off = s.to
		case off < int64(len(o.head)):
			next := min(s.to, int64(len(o.head)))
			b = append(b, o.head[off:next]...)
			off = next
		case off < o.filePrefix():
			next := min(s.to, o.filePrefix(), tailStart)
			chunk := make([]byte, next-off)
			if _, err := o.file.ReadAt(chunk, off); err != nil {
				return nil, err
			}
			b = append(b, chunk...)
			off = next
		default:
			return nil, fmt.Errorf("output offset %d is not available", off)
		}
	}
	return b, nil
}

// incompleteTail returns how many bytes at the end of [from, end) form the start of
// a UTF-8 sequence whose remaining bytes have not arrived yet. Callers hold o.mu.
func (o *Buffer) incompleteTail(from, end int64) int64 {
	// The last bytes are always in memory: the ring holds at least minTail bytes
	// and continues the head when nothing was dropped in between.
	start := max(from, end-utf8.UTFMax+1)
	if start >= end {
		return 0
	}
	b, err := o.fetch(span{start, end})
	if err != nil {
		return 0
	}
	return int64(utf8tail.Incomplete(b))
}

// intersect returns the parts of want (ordered, disjoint) that lie in avail
// (ordered, disjoint), ordered, with touching parts merged.
func intersect(want, avail []span) []span {
	var out []span
	for _, w := range want {
		for _, a := range avail {
			s := span{max(w.from, a.from), min(w.to, a.to)}
			if s.from >= s.to {
				continue
			}
			if n := len(out); n > 0 && out[n-1].to >= s.from {
				out[n-1].to = max(out[n-1].to, s.to)
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// alignStart returns where to start showing b when bytes before it are left out:
// after the first newline in its first quarter, else at the first rune start.
func alignStart(b []byte) int {
	if i := bytes.IndexByte(b[:len(b)/4], '\n'); i >= 0 {
		return i + 1
	}
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}

// alignEnd returns where to stop showing b when bytes after it are left out: after
// the last newline in its last quarter, else before a trailing incomplete rune.
func alignEnd(b []byte) int {
	if i := bytes.LastIndexByte(b[len(b)-len(b)/4:], '\n'); i >= 0 {
		return len(b) - len(b)/4 + i + 1
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if !utf8.FullRune(b[i:]) {
			return i
		}
		break
	}
	return len(b)
}

// renderSafe writes b as valid UTF-8: each invalid byte becomes U+FFFD and each NUL
// byte becomes U+2400 (SYMBOL FOR NULL), so binary output cannot corrupt a transcript.
// Runs of plain ASCII and of NUL bytes are written whole, so a flood of either costs
// a copy, not a decode per byte.
func renderSafe(sb *strings.Builder, b []byte) {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		sb.Write(b)
		return
	}
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 && b[i] < utf8.RuneSelf {
			i++
		}
		if i > 0 {
			sb.Write(b[:i])
			b = b[i:]
			continue
		}
		if b[0] == 0 {
			n := 1
			for n < len(b) && b[n] == 0 {
				n++
			}
			b = b[n:]
			for ; n > 0; n -= len(nulRun) / len(nulSymbol) {
				sb.WriteString(nulRun[:min(n, len(nulRun)/len(nulSymbol))*len(nulSymbol)])
			}
			continue
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
}

const nulSymbol = "\u2400"

// nulRun is 256 NUL symbols, written whole for a run of NUL bytes.
var nulRun = strings.Repeat(nulSymbol, 256)
