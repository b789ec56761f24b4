// Package utf8tail finds where a byte stream cut off mid-character: the output
// buffers hold back such a tail from a read until its rest arrives.
package utf8tail

import "unicode/utf8"

// Incomplete reports how many bytes at the end of b start a UTF-8 sequence whose
// rest is not in b (0 when b ends on a whole character or on invalid bytes).
func Incomplete(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if b[i] >= 0xC0 && !utf8.FullRune(b[i:]) {
			return len(b) - i
		}
		return 0
	}
	return 0
}
