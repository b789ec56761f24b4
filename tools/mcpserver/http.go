package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where HTTPHandler is meant to be mounted.
const Path = "/mcp"

// callHeader carries, on every POST the handler passes to the SDK, the key under
// which the handler keeps that request's context, so that a call can end when its
// request is closed. A value sent by the client is replaced.
const callHeader = "X-Taskrt-Call"

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// httpHandler serves the streamable HTTP transport: the SDK's handler (stateful
// sessions, the idle timeout, the body cap, its DNS-rebinding protection), plus what
// taskrt needs around it:
//
//   - new requests are refused once the Server is closing;
//   - a DELETE first cancels the session's calls (the SDK's close waits for the
//     calls in flight) and answers only once the session's owner is disposed, so
//     that when a client's DELETE returns, every process of the session is gone;
//   - a POST's context is kept under a key the calls it carries can find, so that
//     a client disconnecting mid-call ends the call (and kills its foreground
//     command).
type httpHandler struct {
	s   *Server
	sdk *mcp.StreamableHTTPHandler
	// stateless serves the sessionless revision's requests (go-sdk serves
	// 2026-07-28 over HTTP only in its stateless mode); see sessionless.go.
	stateless *mcp.StreamableHTTPHandler

	mu    sync.Mutex // protects posts
	posts map[string]context.Context
}

// HTTPHandler returns the handler of the streamable HTTP transport; mount it at
// Path on a mux of your own (other routes can share the mux), and put RequireToken
// in front of the mux when the server listens beyond loopback. Every call returns
// the same handler.
//
// Each session's owner is disposed when the client deletes the session (DELETE),
// when it has been idle for the session timeout (WithSessionTimeout), or when the
// Server closes. Requests whose Host is not a loopback name while the connection
// arrived on a loopback address are refused (DNS-rebinding protection); bodies over
// the size cap (WithMaxRequestBytes) are refused with 413.
func (s *Server) HTTPHandler() http.Handler {
	s.httpOnce.Do(func() {
		s.http = &httpHandler{s: s, posts: map[string]context.Context{}}
		timeout := s.cfg.sessionTimeout
		s.http.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
			SessionTimeout:      timeout,
			MaxRequestBodyBytes: s.cfg.maxRequestBytes,
			Logger:              s.log,
		})
		s.http.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
			Stateless:           true,
			MaxRequestBodyBytes: s.cfg.maxRequestBytes,
			Logger:              s.log,
		})
	})
	return s.http
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.s.isClosing() {
		http.Error(w, "taskrt-mcp is shutting down", http.StatusServiceUnavailable)
		return
	}
	// The SDK checks this too; checking first keeps a forbidden DELETE from
	// cancelling anything below.
	if rebound(r) {
		http.Error(w, "Forbidden: invalid Host header "+r.Host, http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodPost:
		key := rand.Text()
		r = r.Clone(r.Context())
		r.Header.Set(callHeader, key)
		body, sessionlessBody := h.carryBody(r)
		h.mu.Lock()
		h.posts[key] = r.Context()
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			delete(h.posts, key)
			h.mu.Unlock()
		}()
		if sessionlessBody && r.Header.Get(sessionHeader) == "" {
			if h.s.cfg.placement != nil && h.route(w, r, body) {
				return // its scope's home answered (cluster.go)
			}
			h.stateless.ServeHTTP(w, r) // a sessionless request: no session to find
			if r.Context().Value(forwardedKey{}) == nil && h.s.cfg.placement != nil {
				// The answer goes out — this handler returns — before the
				// notices it carried are marked delivered (a forwarded one's
				// once the forwarder says it reached its caller).
				var principal string
				if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
					principal = ti.UserID
				}
				ctx := context.WithoutCancel(r.Context())
				h.s.spawn(func() { h.s.answered(ctx, principal, body) })
			}
			return
		}
	case http.MethodDelete:
		r.Header.Del(callHeader)
		if sess := h.s.lookupID(r.Header.Get(sessionHeader)); sess != nil {
			sess.cancel(errSessionEnded)
			h.sdk.ServeHTTP(w, r)
			select {
			case <-sess.ended:
			case <-r.Context().Done():
			}
			return
		}
	default:
		r.Header.Del(callHeader)
	}
	h.sdk.ServeHTTP(w, r)
}

// carryBody carries task params past the SDK's decoder (see carry.go). A body
// over the size cap, or one that cannot be read, goes on as it came, for the SDK
// to refuse. It returns the body as it came and whether it names the sessionless
// revision.
func (h *httpHandler) carryBody(r *http.Request) ([]byte, bool) {
	limit := h.s.cfg.maxRequestBytes
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil || int64(len(buf)) > limit {
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		return nil, false
	}
	out := carry(buf, streamHTTP)
	r.Body = readCloser{bytes.NewReader(out), r.Body}
	r.ContentLength = int64(len(out))
	return buf, namesSessionless(buf)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// rebound reports whether r arrived on a loopback address with a Host that is not
// a loopback name: a page of another site whose name was made to resolve to
// 127.0.0.1 (DNS rebinding). The SDK's handler refuses those too.
func rebound(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && la != nil && IsLoopback(la.String()) && !IsLoopback(r.Host)
}

// httpPost returns the context of the POST request kept under key; false when that
// request has ended.
func (s *Server) httpPost(key string) (context.Context, bool) {
	if s.http == nil {
		return nil, false
	}
	s.http.mu.Lock()
	defer s.http.mu.Unlock()
	ctx, ok := s.http.posts[key]
	return ctx, ok
}

// RequireToken wraps h so that every request must carry the header
// "Authorization: Bearer <token>"; any other request is answered 401 and reaches
// nothing. The comparison takes the same time whatever the token sent. An empty
// token is a programming error: RequireToken panics.
func RequireToken(token string, h http.Handler) http.Handler {
	return requireToken(token, false, h)
}

// RequireBrowserToken is RequireToken for the live page (PageHandler), which a
// person opens in a browser, and a browser cannot add a bearer token to a page
// load or an EventSource: besides "Authorization: Bearer <token>" it accepts HTTP
// Basic authentication with the token as the password (any user name), and its
// 401 asks for Basic, so that the browser prompts for it once and sends it with
// every request of the page. An empty token is a programming error: it panics.
func RequireBrowserToken(token string, h http.Handler) http.Handler {
	return requireToken(token, true, h)
}

func requireToken(token string, basic bool, h http.Handler) http.Handler {
	if token == "" {
		panic("mcpserver: RequireToken with an empty token")
	}
	want := sha256.Sum256([]byte(token))
	challenge := `Bearer realm="taskrt-mcp"`
	refusal := "Unauthorized: this server requires its bearer token (Authorization: Bearer <token>)"
	if basic {
		challenge = `Basic realm="taskrt-mcp", charset="UTF-8"`
		refusal = "Unauthorized: this page requires the server's token (as the password, or Authorization: Bearer <token>)"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		switch {
		case ok && strings.EqualFold(scheme, "Bearer"):
		case ok && basic && strings.EqualFold(scheme, "Basic"):
			_, pass, _ := r.BasicAuth()
			got = pass
		default:
			ok = false
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, refusal, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether addr ("host", "host:port", "[::1]:port") names a
// loopback host: "localhost" or a loopback IP address. An empty host is not
// loopback (it listens on every interface).
func IsLoopback(addr string) bool {
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
