package outputtest

import (
	"crypto/sha256"
	"strconv"
)

// SeqDigest is the sha256 and size of what `seq 1 n` writes, or `seq -w 1 n` with
// wide set (every number zero-padded to the width of n): the reference a test
// compares a command's output with, byte for byte, without holding it.
func SeqDigest(n int, wide bool) (sum [32]byte, size int64) {
	width := 0
	if wide {
		width = len(strconv.Itoa(n))
	}
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for i := 1; i <= n; i++ {
		s := strconv.Itoa(i)
		for range width - len(s) {
			buf = append(buf, '0')
		}
		buf = append(buf, s...)
		buf = append(buf, '\n')
		if len(buf) > cap(buf)-32 {
			h.Write(buf)
			size += int64(len(buf))
			buf = buf[:0]
		}
	}
	h.Write(buf)
	size += int64(len(buf))
	copy(sum[:], h.Sum(nil))
	return sum, size
}
