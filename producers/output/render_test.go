package output

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// renderByRune is renderSafe's rule stated one rune at a time: invalid bytes become
// U+FFFD, NUL bytes U+2400, everything else stays.
func renderByRune(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			sb.WriteString("\uFFFD")
		case r == 0:
			sb.WriteString("\u2400")
		default:
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

func TestRenderSafeWritesRunsWholeAndRendersEveryByteAsTheRuleSays(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"plain text", []byte("hello\nworld\n")},
		{"one NUL", []byte{0}},
		{"a run of NULs longer than one written chunk", make([]byte, 1000)},
		{"NULs between text", []byte("a\x00\x00b\x00c")},
		{"invalid bytes", []byte{'x', 0xff, 0xfe, 'y'}},
		{"multi-byte runes beside NULs", []byte("é\x00日本\x00\x00€")},
		{"a truncated rune at the end", []byte("ab\xe6\x97")},
		{"binary noise", bytes.Repeat([]byte{0, 1, 0x80, 0xc3, 0xa9, 0xff, 'z'}, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			renderSafe(&sb, tc.in)
			want, got := renderByRune(tc.in), sb.String()
			assert.Equal(t, want, got)
			assert.True(t, utf8.ValidString(got))
		})
	}
}
