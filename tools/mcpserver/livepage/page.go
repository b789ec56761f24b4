package livepage

import (
	"context"
	"embed"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The page's paths, relative to where the Handler is mounted (at "/" by
// taskrt-mcp -ui).
const (
	// Path serves the page itself; Path+"page.js" and Path+"page.css" its script
	// and style.
	Path = "/"
	// EventsPath is the event stream (Server-Sent Events) the page lists owners
	// and tasks from.
	EventsPath = "/events"
	// TailPath is the output stream (Server-Sent Events) of one task, read with
	// observer reads.
	TailPath = "/tail"
)

// Source is what the page asks of its embedder: what only the embedder knows.
type Source interface {
	// Owners returns the owners the page lists, in the order they began. The page
	// calls it after it subscribed to the runtime's events, so the embedder lists
	// an owner from before it registers its agent until before it disposes of
	// it: then a snapshot never misses a registered owner, nor lists one whose
	// disposal the page will not hear of.
	Owners() []Owner
	// Closing reports whether the embedder began to shut down: from then on the
	// page refuses every request.
	Closing() bool
	// Context ends when the embedder shuts down (once Closing is true); every
	// stream of the page ends with it.
	Context() context.Context
}

// Owner is an owner as its embedder knows it.
type Owner struct {
	ID    messages.AgentID
	Began time.Time
}

// Handler serves the page. Create it with New; it is safe for concurrent use.
//
// Requests whose Host is not a loopback name while they arrived on a loopback
// address are refused (DNS rebinding), and so are requests once the Source is
// closing.
type Handler struct {
	rt     *actors.Runtime
	src    Source
	buffer int // events one connection of the event stream may fall behind by
}

// New returns the handler of the page over rt, listing the owners src gives.
func New(rt *actors.Runtime, src Source, opts ...Option) *Handler {
	c := defaultConfig()
	for _, o := range opts {
		o.apply(&c)
	}
	return &Handler{rt: rt, src: src, buffer: c.eventBuffer}
}

// files are the page's static files: plain HTML, CSS and JavaScript, no build
// step.
//
//go:embed static
var files embed.FS

// static maps the static paths to their file and content type.
var static = map[string][2]string{
	Path:        {"static/index.html", "text/html; charset=utf-8"},
	"/page.js":  {"static/page.js", "text/javascript; charset=utf-8"},
	"/page.css": {"static/page.css", "text/css; charset=utf-8"},
}

// The page's timings and sizes.
const (
	// pingEvery is how often an idle stream sends a comment, so that a client (or
	// a proxy) that went away is noticed.
	pingEvery = 15 * time.Second
	// writeTimeout bounds one write to a stream: a browser that stops reading for
	// this long is dropped (it reconnects and resynchronises).
	writeTimeout = 30 * time.Second
	// tailChunk is the most output bytes one "output" message carries.
	tailChunk = 64 << 10
	// tailEventBuffer is how many of its owner's events a tail holds while it
	// writes: an overflow costs it nothing, since it reads by offset.
	tailEventBuffer = 64
	// batchMax is the most events one write of the event stream carries.
	batchMax = 256
)

// ServeHTTP answers in order: the security headers go on every response; a
// closing Source and a rebound Host are refused; then the route, and GET only.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	switch {
	case h.src.Closing():
		http.Error(w, "taskrt-mcp is shutting down", http.StatusServiceUnavailable)
		return
	case rebound(r):
		http.Error(w, "Forbidden: invalid Host header "+r.Host, http.StatusForbidden)
		return
	}
	route, known := h.route(r.URL.Path)
	if !known {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		hd.Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed: the live page is read-only", http.StatusMethodNotAllowed)
		return
	}
	route(w, r)
}

// route returns the handler of path.
func (h *Handler) route(path string) (http.HandlerFunc, bool) {
	switch path {
	case EventsPath:
		return h.events, true
	case TailPath:
		return h.tail, true
	}
	f, ok := static[path]
	if !ok {
		return nil, false
	}
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := files.ReadFile(f[0])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", f[1])
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}, true
}

// streamContext is r's context, ended also when the Source shuts down.
func (h *Handler) streamContext(r *http.Request) (context.Context, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(h.src.Context(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// rebound reports whether r arrived on a loopback address with a Host that is not
// a loopback name: a page of another site whose name was made to resolve to
// 127.0.0.1 (DNS rebinding), which a browser would let read the page. The same
// check as mcpserver's for its MCP endpoint; it is repeated here rather than
// imported, since mcpserver imports this package.
func rebound(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && la != nil && isLoopback(la.String()) && !isLoopback(r.Host)
}

// isLoopback reports whether addr ("host", "host:port", "[::1]:port") names a
// loopback host: "localhost" or a loopback IP address (mcpserver.IsLoopback).
func isLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
