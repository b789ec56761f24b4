//go:build linux

package livepage_test

import (
	"strconv"
	"testing"

	"github.com/taskrt/taskrt/internal/pagetest"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

// The page's wire format and an SSE client, as a browser reads them
// (internal/pagetest).
type (
	wireTask     = pagetest.Task
	wireSnapshot = pagetest.Snapshot
	wireEvent    = pagetest.Event
	wireOutput   = pagetest.Output
	wireEnd      = pagetest.End
	sseMsg       = pagetest.Msg
	stream       = pagetest.Stream
)

var (
	openStream = pagetest.Open
	readTail   = pagetest.ReadTail
)

// decode reads m as event name with JSON data into a T.
func decode[T any](t *testing.T, m sseMsg, name string) T {
	t.Helper()
	return pagetest.Decode[T](t, m, name)
}

// tailURL is the tail of task id from offset off.
func (p *page) tailURL(id messages.TaskID, off int64) string {
	return p.hs.URL + livepage.TailPath + "?task=" + string(id) + "&offset=" + strconv.FormatInt(off, 10)
}
