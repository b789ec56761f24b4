package actors

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/taskrt/taskrt/messages"
)

// This file is what a watch's notice says (WatchNotice).

// WatchNotice is one notice of a watch, as Tasks.Watch delivers it (String is the
// text the owner's injector receives).
type WatchNotice struct {
	Task    messages.TaskID
	Pattern string
	Lines   []string // the matching lines (at most 5)
	More    int      // matching lines not shown
	Stopped string   // set for the closing notice: why the watch stopped
	// Missed counts the output bytes that went by unscanned since the previous
	// notice: the output dropped them (past its bounds) before the watch reached
	// them, so a line in them may have matched unseen.
	Missed int64
}

// String renders the notice: one line per matching line,
//
//	task bash-3 output matched ERROR: ERROR connection refused
//
// with "(N more matching lines; read them with task_output)" after them when
// there were more, or for the closing notice
//
//	task bash-3 watch on ERROR stopped: it sent its 20 notices (max_notices)
//
// and, when output went by unscanned since the previous notice, a last line
// "(N bytes of output went by unscanned: the output dropped them first)".
func (n WatchNotice) String() string {
	pattern := clip(n.Pattern, watchPatternRunes)
	gap := ""
	if n.Missed > 0 {
		gap = fmt.Sprintf("\n(%d bytes of output went by unscanned: the output dropped them first)", n.Missed)
	}
	if n.Stopped != "" {
		return fmt.Sprintf("task %s watch on %s stopped: %s", n.Task, pattern, n.Stopped) + gap
	}
	var b strings.Builder
	for i, l := range n.Lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "task %s output matched %s: %s", n.Task, pattern, clip(l, watchLineRunes))
	}
	if n.More > 0 {
		fmt.Fprintf(&b, "\n(%d more matching lines; read them with task_output)", n.More)
	}
	return b.String() + gap
}

// clip makes s one line of at most n runes (invalid UTF-8 replaced), ending with
// "…" when cut.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' ' // a control character (a line break in a pattern, a tab) breaks no line
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
