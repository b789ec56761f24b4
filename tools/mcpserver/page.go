package mcpserver

import (
	"context"
	"embed"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The live page's paths, relative to where PageHandler is mounted (at "/" by
// taskrt-mcp -ui).
const (
	// PagePath serves the page itself; PagePath+"page.js" and PagePath+"page.css"
	// its script and style.
	PagePath = "/"
	// EventsPath is the event stream (Server-Sent Events) the page lists sessions
	// and tasks from.
	EventsPath = "/events"
	// TailPath is the output stream (Server-Sent Events) of one task, read with
	// observer reads.
	TailPath = "/tail"
)

// pageFiles are the page's static files: plain HTML, CSS and JavaScript, no build
// step.
//
//go:embed page
var pageFiles embed.FS

// pageStatic maps the static paths to their file and content type.
var pageStatic = map[string][2]string{
	"/":         {"page/index.html", "text/html; charset=utf-8"},
	"/page.js":  {"page/page.js", "text/javascript; charset=utf-8"},
	"/page.css": {"page/page.css", "text/css; charset=utf-8"},
}

// The live page's timings.
const (
	// pagePing is how often an idle stream sends a comment, so that a client (or a
	// proxy) that went away is noticed.
	pagePing = 15 * time.Second
	// pageWriteTimeout bounds one write to a page's stream: a browser that stops
	// reading for this long is dropped (it reconnects and resynchronises).
	pageWriteTimeout = 30 * time.Second
	// tailChunk is the most output bytes one tail message carries.
	tailChunk = 64 << 10
	// pageBatch is the most events one write of the event stream carries.
	pageBatch = 256
)

// pageHandler serves the live page: an operator's read-only view of every session,
// its tasks and a live tail of one task's output. Everything it reads, it reads
// without consuming: the event stream (Runtime.Subscribe), snapshots (Tasks.List,
// Tasks.Get) and observer reads (Tasks.Peek), which never move the cursor the
// model's task_output reads with. It offers no way to act on a task: every
// route answers GET only.
type pageHandler struct {
	s *Server
}

// PageHandler returns the handler of the live page; mount it at "/" (or under a
// prefix with http.StripPrefix) next to HTTPHandler, with the same guard in front
// when the server listens beyond loopback (RequireBrowserToken, which also lets a
// browser prompt for the token). Every call returns the same handler.
//
// The page lists every session's owner with its tasks, their status and age (and
// how many task_watch watches a task has, as of the snapshot), and tails the output
// of the task selected, live. It is the embedder's view, not a
// model's: it sees every session, and it is read-only — no route acts on a task,
// and nothing it reads consumes a model's output. Routes:
//
//   - GET PagePath: the page (HTML, with page.js and page.css beside it);
//   - GET EventsPath: Server-Sent Events. First a "snapshot" event (the owners
//     and their tasks, as JSON), then an "event" event per runtime event, in the
//     runtime's order (agent-registered, agent-disposed, task-started,
//     task-output, task-stopping, task-settled, task-evicted). A connection that
//     falls behind (WithPageEventBuffer) gets an "event" of kind "overflow" saying
//     how many events it missed, followed by a fresh "snapshot";
//   - GET TailPath?task=ID&offset=N: Server-Sent Events of the task's output
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
	s.pageOnce.Do(func() { s.page = &pageHandler{s: s} })
	return s.page
}

func (p *pageHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	switch {
	case p.s.isClosing():
		http.Error(w, "taskrt-mcp is shutting down", http.StatusServiceUnavailable)
		return
	case rebound(r):
		http.Error(w, "Forbidden: invalid Host header "+r.Host, http.StatusForbidden)
		return
	}
	route, known := p.route(r.URL.Path)
	if !known {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		h.Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed: the live page is read-only", http.StatusMethodNotAllowed)
		return
	}
	route(w, r)
}

// route returns the handler of path.
func (p *pageHandler) route(path string) (http.HandlerFunc, bool) {
	switch path {
	case EventsPath:
		return p.events, true
	case TailPath:
		return p.tail, true
	}
	f, ok := pageStatic[path]
	if !ok {
		return nil, false
	}
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := pageFiles.ReadFile(f[0])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", f[1])
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}, true
}

// streamContext is r's context, ended also when the Server closes.
func (p *pageHandler) streamContext(r *http.Request) (context.Context, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(p.s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// ---- the event stream ----

// pageAgent is an owner as the page shows it.
type pageAgent struct {
	ID     messages.AgentID `json:"id"`
	Parent messages.AgentID `json:"parent,omitempty"`
	Since  time.Time        `json:"since,omitzero"`
	// Evicted counts the owner's settled tasks whose record retention dropped.
	Evicted int `json:"evicted,omitempty"`
}

// pageTask is a task as the page shows it.
type pageTask struct {
	ID       messages.TaskID  `json:"id"`
	Kind     string           `json:"kind"`
	Label    string           `json:"label"`
	Owner    messages.AgentID `json:"owner"`
	Status   messages.Status  `json:"status"`
	Detail   string           `json:"detail,omitempty"`
	Started  time.Time        `json:"started"`
	Finished time.Time        `json:"finished,omitzero"`
	Evicted  bool             `json:"evicted,omitempty"`
	// Bytes is the task's output size from its state, in a snapshot (absent for a
	// kind without an output stream, and in events, which carry their own).
	Bytes *int64 `json:"bytes,omitempty"`
	// Watches is how many live task_watch watches the task has, in a snapshot
	// (Tasks.Watches; absent when none, and in events: a watch is not an event, and
	// a settled task has none).
	Watches int `json:"watches,omitempty"`
}

func toPageTask(s messages.Snapshot) *pageTask {
	return &pageTask{ID: s.ID, Kind: s.Kind, Label: s.Label, Owner: s.Owner, Status: s.Status,
		Detail: s.Detail, Started: s.Started, Finished: s.Finished, Evicted: s.Evicted}
}

// pageSnapshot is the state the page starts from, and resynchronises to after an
// overflow: the owners (in the order their sessions began) and their tasks not
// evicted (in start order).
type pageSnapshot struct {
	Now    time.Time   `json:"now"`
	Agents []pageAgent `json:"agents"`
	Tasks  []*pageTask `json:"tasks"`
}

// pageEvent is a runtime event as the page gets it.
type pageEvent struct {
	Kind   messages.EventKind `json:"kind"`
	Time   time.Time          `json:"time"`
	Agent  messages.AgentID   `json:"agent,omitempty"`
	Parent messages.AgentID   `json:"parent,omitempty"`
	Task   *pageTask          `json:"task,omitempty"`
	Bytes  *int64             `json:"bytes,omitempty"` // task-output only
	Missed int                `json:"missed,omitempty"`
}

func toPageEvent(ev messages.Event) pageEvent {
	pe := pageEvent{Kind: ev.Kind, Time: ev.Time, Agent: ev.Agent, Parent: ev.Parent, Missed: ev.Missed}
	if ev.Kind == messages.EventTaskOutput {
		pe.Bytes = &ev.Bytes
	}
	if ev.Task.ID != "" {
		pe.Task = toPageTask(ev.Task)
	}
	return pe
}

// snapshot lists the owners and their tasks. Called after subscribing, it is never
// older than the first event the subscription delivers; the page applies events on
// top of it idempotently.
func (p *pageHandler) snapshot(ctx context.Context) (pageSnapshot, error) {
	p.s.mu.Lock()
	sessions := make([]*owner, 0, len(p.s.owners))
	for _, sess := range p.s.owners {
		sessions = append(sessions, sess)
	}
	p.s.mu.Unlock()
	slices.SortFunc(sessions, func(a, b *owner) int { return a.began.Compare(b.began) })

	snap := pageSnapshot{Now: time.Now(), Agents: []pageAgent{}, Tasks: []*pageTask{}}
	tasks := p.s.rt.Tasks()
	for _, sess := range sessions {
		list, err := tasks.List(ctx, sess.agent)
		if err != nil {
			return pageSnapshot{}, err
		}
		watches, err := tasks.Watches(ctx, sess.agent)
		if err != nil {
			return pageSnapshot{}, err
		}
		a := pageAgent{ID: sess.agent, Since: sess.began}
		for _, t := range list {
			switch {
			case t.Owner != sess.agent: // unowned: listed below, once
			case t.Evicted:
				a.Evicted++
			default:
				pt := p.withBytes(ctx, toPageTask(t))
				pt.Watches = watches[t.ID]
				snap.Tasks = append(snap.Tasks, pt)
			}
		}
		snap.Agents = append(snap.Agents, a)
	}
	unowned, err := tasks.List(ctx, "")
	if err != nil {
		return pageSnapshot{}, err
	}
	for _, t := range unowned {
		if !t.Evicted {
			snap.Tasks = append(snap.Tasks, p.withBytes(ctx, toPageTask(t)))
		}
	}
	return snap, nil
}

// withBytes sets a snapshot task's output size from its state (an observer read of
// no bytes), so that a page opened after the tasks ran shows it: output events seen
// while the page is open only add to it.
func (p *pageHandler) withBytes(ctx context.Context, t *pageTask) *pageTask {
	if r, err := p.s.rt.Tasks().Peek(ctx, t.ID, t.Owner, 0, 1); err == nil {
		n := r.Written
		t.Bytes = &n
	}
	return t
}

// events serves EventsPath. It subscribes first and takes the snapshot second, so
// that nothing happens between the two unseen; it writes the events in batches (as
// many as are waiting, up to pageBatch) and resynchronises with a new snapshot
// after an overflow.
func (p *pageHandler) events(w http.ResponseWriter, r *http.Request) {
	ctx, done := p.streamContext(r)
	defer done()
	sub, err := p.s.rt.Subscribe(ctx, actors.WithEventBuffer(p.s.cfg.pageEventBuffer))
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	snap, err := p.snapshot(ctx)
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	out := newSSE(w)
	out.event("snapshot", "", snap)
	if out.flush() != nil {
		return
	}
	ping := time.NewTicker(pagePing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			out.comment("ping")
		case ev, ok := <-sub.Events():
			if !ok {
				return // the runtime closed
			}
			resync := false
			for n := 0; ; n++ {
				out.event("event", "", toPageEvent(ev))
				resync = resync || ev.Kind == messages.EventOverflow
				if n == pageBatch-1 {
					break
				}
				select {
				case ev, ok = <-sub.Events():
				default:
					ok = false
				}
				if !ok {
					break
				}
			}
			if resync {
				snap, err := p.snapshot(ctx)
				if err != nil {
					return
				}
				out.event("snapshot", "", snap)
			}
		}
		if out.flush() != nil {
			return
		}
	}
}

// ---- the tail ----

// tailOutput is one "output" message of a tail: raw bytes from Offset to Next, after
// Missed bytes that were no longer held.
type tailOutput struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Missed int64  `json:"missed,omitempty"`
	Data   []byte `json:"data"`
}

// tailEnd is the last message of a tail.
type tailEnd struct {
	// Reason is why the tail ended: "settled" (every byte held was sent),
	// "evicted" (retention dropped the task's record and its output), "gone" (the
	// task's record was dropped with its owner) or "no-output" (the task's kind
	// gives no output to observe).
	Reason string          `json:"reason"`
	Status messages.Status `json:"status,omitempty"`
	Detail string          `json:"detail,omitempty"`
	Next   int64           `json:"next"`
}

// The reasons a tail ends.
const (
	tailSettled  = "settled"
	tailEvicted  = "evicted"
	tailGone     = "gone"
	tailNoOutput = "no-output"
)

// tail serves TailPath: the task's output from an offset on, with observer reads
// (Tasks.Peek) as the owner, woken by the owner's output events. It subscribes
// before its first read, so no growth between a read and the wait goes unseen; an
// overflow of its subscription costs nothing, since reads are by offset.
func (p *pageHandler) tail(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := messages.TaskID(q.Get("task"))
	if id == "" {
		http.Error(w, "Bad Request: want ?task=ID", http.StatusBadRequest)
		return
	}
	off := int64(0)
	for _, v := range []string{r.Header.Get("Last-Event-ID"), q.Get("offset")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "Bad Request: the offset must be a byte offset (an integer >= 0)", http.StatusBadRequest)
			return
		}
		off = n
		break
	}
	ctx, done := p.streamContext(r)
	defer done()
	owner, snap, err := p.findTask(ctx, id)
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, messages.ErrTaskNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, "taskrt-mcp: "+err.Error(), code)
		return
	}
	sub, err := p.s.rt.Subscribe(ctx, actors.ForOwner(owner), actors.WithEventBuffer(64))
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	out := newSSE(w)
	out.comment("tail of " + string(id)) // the headers go out at once: the client's open completes
	if out.flush() != nil {
		return
	}
	end := func(reason string, s messages.Snapshot) {
		out.event("end", "", tailEnd{Reason: reason, Status: s.Status, Detail: s.Detail, Next: off})
		_ = out.flush()
	}
	ping := time.NewTicker(pagePing)
	defer ping.Stop()
	for {
		// 1. Catch up: read until nothing new is held. A tombstone is never read:
		//    its answer would mark the task reported, as if the model had seen it.
		for {
			if snap.Evicted {
				end(tailEvicted, snap)
				return
			}
			res, err := p.s.rt.Tasks().Peek(ctx, id, owner, off, tailChunk)
			switch {
			case errors.Is(err, messages.ErrNoOutputStream):
				end(tailNoOutput, snap)
				return
			case errors.Is(err, messages.ErrTaskNotFound):
				end(tailGone, snap)
				return
			case err != nil:
				return // the request or the server ended
			}
			snap = res.Snapshot
			if len(res.Data) == 0 && res.Missed == 0 {
				break
			}
			out.event("output", strconv.FormatInt(res.Next, 10), tailOutput{Offset: off, Next: res.Next, Missed: res.Missed, Data: res.Data})
			off = res.Next
			if out.flush() != nil {
				return
			}
		}
		// 2. A settled task's output is complete: the producer settles at
		//    quiescence, after its last write.
		if snap.Status.Terminal() {
			end(tailSettled, snap)
			return
		}
		// 3. Wait for the task to change (or its owner to go).
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-ping.C:
				out.comment("ping")
				if out.flush() != nil {
					return
				}
			case ev, ok := <-sub.Events():
				switch {
				case !ok:
					return // the runtime closed
				case ev.Kind == messages.EventOverflow, ev.Kind == messages.EventAgentDisposed,
					ev.Task.ID == id:
					if ev.Task.ID == id && ev.Task.Evicted {
						snap = ev.Task
					}
					break wait
				}
			}
		}
	}
}

// findTask finds the owner of task id among the owners the page lists (and the
// unowned tasks), with its snapshot; ErrTaskNotFound when nobody has it. The page
// is the embedder's view: it reads any owner's task as that owner, without
// consuming anything.
func (p *pageHandler) findTask(ctx context.Context, id messages.TaskID) (messages.AgentID, messages.Snapshot, error) {
	p.s.mu.Lock()
	owners := make([]messages.AgentID, 0, len(p.s.owners)+1)
	for owner := range p.s.owners {
		owners = append(owners, owner)
	}
	p.s.mu.Unlock()
	if kind, _, ok := strings.Cut(string(id), "-"); !ok || !messages.KindPattern().MatchString(kind) {
		return "", messages.Snapshot{}, messages.ErrTaskNotFound
	}
	for _, owner := range append(owners, "") {
		snap, err := p.s.rt.Tasks().Get(ctx, id, owner)
		switch {
		case err == nil && snap.Owner == owner:
			return owner, snap, nil
		case err != nil && !errors.Is(err, messages.ErrTaskNotFound):
			return "", messages.Snapshot{}, err
		}
	}
	return "", messages.Snapshot{}, messages.ErrTaskNotFound
}
