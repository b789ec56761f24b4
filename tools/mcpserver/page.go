package mcpserver

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

// The live page's paths, relative to where PageHandler is mounted (at "/" by
// taskrt-mcp -ui); package livepage's.
const (
	// PagePath serves the page itself; PagePath+"page.js" and PagePath+"page.css"
	// its script and style.
	PagePath = livepage.Path
	// eventsPath is the event stream (Server-Sent Events) the page lists sessions
	// and tasks from.
	eventsPath = livepage.EventsPath
	// tailPath is the output stream (Server-Sent Events) of one task, read with
	// observer reads.
	tailPath = livepage.TailPath
)

// PageHandler returns the handler of the live page (package livepage) over the
// Server's runtime, listing its owners; mount it at "/" (or under a prefix with
// http.StripPrefix) next to HTTPHandler, with the same guard in front when the
// server listens beyond loopback (RequireBrowserToken, which also lets a browser
// prompt for the token). Every call returns the same handler.
//
// The page lists every session's owner with its tasks, their status and age (and
// how many task_watch watches a task has, as of the snapshot), and tails the output
// of the task selected, live. It is the embedder's view, not a
// model's: it sees every session, and it is read-only — no route acts on a task,
// and nothing it reads consumes a model's output. Routes:
//
//   - GET PagePath: the page (HTML, with page.js and page.css beside it);
//   - GET eventsPath: Server-Sent Events. First a "snapshot" event (the owners
//     and their tasks, as JSON), then an "event" event per runtime event, in the
//     runtime's order (agent-registered, agent-disposed, task-started,
//     task-output, task-stopping, task-settled, task-evicted). A connection that
//     falls behind (WithPageEventBuffer) gets an "event" of kind "overflow" saying
//     how many events it missed, followed by a fresh "snapshot";
//   - GET tailPath?task=ID&offset=N: Server-Sent Events of the task's output
//     from byte offset N (default 0; a reconnecting EventSource's Last-Event-ID
//     wins): "output" events ({"offset","next","missed","data"}, data base64, the
//     event id the next offset), then one "end" event ({"reason","status",
//     "detail","next"}) once the task settled and its output was sent, or when
//     its output cannot be observed; the stream closes after it. A task that is
//     unknown answers 404.
//
// Requests whose Host is not a loopback name while they arrived on a loopback
// address are refused (DNS rebinding), as on HTTPHandler; so are requests once
// the Server is closing. Streams end when the Server closes.
func (s *Server) PageHandler() http.Handler {
	s.pageOnce.Do(func() {
		s.page = livepage.New(s.rt, pageSource{s}, livepage.WithEventBuffer(s.cfg.pageEventBuffer))
	})
	return s.page
}

// pageSource is what the live page asks of the Server (livepage.Source).
type pageSource struct{ s *Server }

// Owners lists every owner: connections, HTTP sessions and scopes. s.owners holds
// an owner from before its agent is registered until before it is disposed, as
// the page needs.
func (p pageSource) Owners() []livepage.Owner {
	p.s.mu.Lock()
	owners := make([]livepage.Owner, 0, len(p.s.owners))
	for _, o := range p.s.owners {
		owners = append(owners, livepage.Owner{ID: o.agent, Began: o.began})
	}
	p.s.mu.Unlock()
	slices.SortFunc(owners, func(a, b livepage.Owner) int {
		return cmp.Or(a.Began.Compare(b.Began), cmp.Compare(a.ID, b.ID))
	})
	return owners
}

func (p pageSource) Closing() bool { return p.s.isClosing() }

func (p pageSource) Context() context.Context { return p.s.ctx }
