// Package outputtest holds test helpers for streams rendered by package output:
// checking that what a read returned is the source stream, with exact markers for
// the bytes left out.
package outputtest

import (
	"regexp"
	"strconv"
	"testing"
)

// markerRE matches the marker a rendered read puts where bytes were left out.
var markerRE = regexp.MustCompile(`\[\.\.\. (\d+) bytes left out \(output offsets (\d+)-(\d+)\)[^\n]*\.\.\.\]\n`)

// Account checks one read result s, which starts at stream offset from, against the
// stream it came from (source gives the byte at an offset): the text between markers
// must be the source bytes at the right offsets, and each marker's count must match
// its offsets. It returns the stream offset where the read ended and how many bytes
// its markers said were left out. The text must be ASCII.
func Account(t testing.TB, from int64, s string, source func(off int64) byte) (end, leftOut int64) {
	t.Helper()
	cursor := from
	check := func(text string) {
		for i := 0; i < len(text); i++ {
			if want := source(cursor + int64(i)); text[i] != want {
				t.Fatalf("byte at offset %d: got %q, want %q", cursor+int64(i), text[i], want)
			}
		}
	}
	for {
		loc := markerRE.FindStringSubmatchIndex(s)
		if loc == nil {
			break
		}
		text := s[:loc[0]]
		n, _ := strconv.ParseInt(s[loc[2]:loc[3]], 10, 64)
		a, _ := strconv.ParseInt(s[loc[4]:loc[5]], 10, 64)
		b, _ := strconv.ParseInt(s[loc[6]:loc[7]], 10, 64)
		if int64(len(text)) == a-cursor+1 && text[len(text)-1] == '\n' {
			text = text[:len(text)-1] // the line break put before the marker
		}
		if got, want := int64(len(text)), a-cursor; got != want {
			t.Fatalf("text before marker %q: %d bytes, want %d", s[loc[0]:loc[1]], got, want)
		}
		if n != b-a {
			t.Fatalf("marker %q: count %d, offsets say %d", s[loc[0]:loc[1]], n, b-a)
		}
		check(text)
		cursor, leftOut = b, leftOut+n
		s = s[loc[1]:]
	}
	check(s)
	return cursor + int64(len(s)), leftOut
}
