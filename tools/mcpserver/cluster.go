package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// Several frontends, one set of scopes (WithPlacement; taskrt-mcp -http -nats).
//
// Each sessionless scope has one home: the frontend that minted it, which
// registered it with the placement at mint and keeps all its state — owner
// agent, fence, ids, caps, queue, notices — in memory, by the same code as a
// single server. A sessionless HTTP request that names a scope (the scope
// argument, a task id "<id>.<scope>", a tasks/* taskId) and reaches another
// frontend is served thus:
//
//   - the scope is open here: served here, as on one server (no store access);
//   - the placement knows no such scope for the request's principal: served here,
//     so refused exactly as on one server (an unknown and a foreign scope read
//     alike on every frontend);
//   - another live frontend homes it: the request — its body, the headers the
//     SDK reads, the principal (user id and scopes of the token info) — is
//     forwarded to that home with the time the caller has left, and the home's
//     answer (status, headers, body: an SSE stream whole) is returned unchanged;
//   - its home's lease ended: the scope is lost (its state died with its home,
//     its remote tasks with the home's owner lease), and the answer says so —
//     never a new, empty scope.
//
// Requests without a scope (a start that mints one, tools/list, server/discover)
// are served by the frontend that received them; sessions (2025-11-25) stay with
// their connection as before.

// principalHeader carries a forwarded request's principal to its home.
const principalHeader = "Taskrt-Principal"

// forwardedKey marks the context of a request forwarded to this frontend: it is
// served here, never forwarded again.
type forwardedKey struct{}

// joinPlacement makes the Server's placement, if any, serve the requests
// forwarded here and fence the scopes of a lost lease.
func (s *Server) joinPlacement() error {
	p := s.cfg.placement
	if p == nil {
		return nil
	}
	p.OnFence(s.fenced)
	if err := p.Serve(s.serveForwarded); err != nil {
		return fmt.Errorf("taskrt-mcp: %w", err)
	}
	return nil
}

// place registers a scope minted here with the placement, under its current
// lease: without a lease, no scope is minted.
func (s *Server) place(ctx context.Context, o *owner) error {
	p := s.cfg.placement
	if p == nil {
		return nil
	}
	epoch, err := p.Register(ctx, o.handle, o.principal)
	if err != nil {
		return err
	}
	o.homeEpoch = epoch
	return nil
}

// errScopeLost ends the scopes of a lease this frontend lost: the others now read
// them as lost, so their records must stay.
var errScopeLost = errors.New("taskrt-mcp: this frontend lost its lease; its scopes are lost")

// unplace deletes an ended scope's record, unless the scope ended because its
// home lost its lease.
func (s *Server) unplace(o *owner, cause error) {
	p := s.cfg.placement
	if p == nil || !o.isScope() || errors.Is(cause, errScopeLost) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(p.Lease()/4, 500*time.Millisecond))
	defer cancel()
	p.Unregister(ctx, o.handle)
}

// fenced ends every scope registered under epoch, the lease this frontend lost:
// from now on every frontend reads them as lost. It does not block.
func (s *Server) fenced(epoch uint64) {
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		return
	}
	var lost []*owner
	for _, o := range s.byHandle {
		if o.homeEpoch == epoch {
			lost = append(lost, o)
		}
	}
	s.wg.Add(len(lost))
	s.mu.Unlock()
	for _, o := range lost {
		go func() {
			defer s.wg.Done()
			s.log.Warn("scope lost with this frontend's lease", "owner", o.agent)
			s.end(o, errScopeLost)
		}()
	}
}

// routed is what the routing reads of a sessionless request.
type routed struct {
	id     json.RawMessage // the JSON-RPC id (nil: a notification)
	method string
	handle string // the scope it names, "" for none
}

// scopeOfBody reads the scope a sessionless request names, as callTool and the
// tasks methods do: the scope argument, else the first task id that carries one.
func scopeOfBody(body []byte) routed {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments map[string]json.RawMessage `json:"arguments"`
			TaskID    string                     `json:"taskId"`
		} `json:"params"`
	}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' || json.Unmarshal(body, &m) != nil {
		return routed{}
	}
	r := routed{id: m.ID, method: m.Method}
	carried := func(id string) string {
		_, h, _ := strings.Cut(id, ".")
		return h
	}
	switch {
	case m.Method == "tools/call":
		args := m.Params.Arguments
		if raw, ok := args["scope"]; ok {
			_ = json.Unmarshal(raw, &r.handle)
			return r
		}
		var id string
		if json.Unmarshal(args["task_id"], &id) == nil && carried(id) != "" {
			r.handle = carried(id)
			return r
		}
		var ids []string
		_ = json.Unmarshal(args["task_ids"], &ids)
		for _, id := range ids {
			if h := carried(id); h != "" {
				r.handle = h
				return r
			}
		}
	case strings.HasPrefix(m.Method, "tasks/"):
		r.handle = carried(m.Params.TaskID)
	}
	return r
}

// route serves a sessionless request whose scope is not open here: forwarded to
// its home, or answered lost, or (false) left to this frontend.
func (h *httpHandler) route(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Context().Value(forwardedKey{}) != nil {
		return false
	}
	req := scopeOfBody(body)
	if req.handle == "" || req.id == nil {
		return false
	}
	var principal string
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		principal = ti.UserID
	}
	if h.s.findScope(req.handle, principal) != nil {
		return false
	}
	p := h.s.cfg.placement
	loc, err := p.Locate(r.Context(), req.handle, principal)
	switch {
	case err != nil:
		writeRPCError(w, req, "taskrt-mcp: cannot find where scope "+tools.Label(req.handle)+" lives: "+err.Error())
		return true
	case loc.Where == placement.Lost:
		writeLost(w, req, loc.Home)
		return true
	case loc.Where != placement.Elsewhere:
		return false
	}
	resp, err := p.Forward(r.Context(), loc.Home, placement.Request{Header: forwardHeader(r), Body: body})
	if err != nil {
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			why = "the call's deadline passed before it answered (" + err.Error() + ")"
		}
		h.s.log.Info("forwarding a request", "home", loc.Home, "err", err)
		writeRPCError(w, req, "taskrt-mcp: scope "+tools.Label(req.handle)+" lives on frontend "+loc.Home+": "+why)
		return true
	}
	for k, vs := range resp.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Connection", "Transfer-Encoding":
			continue
		}
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
	return true
}

// forwardHeader is what a forwarded request carries of r's headers: those the
// SDK reads, and the principal.
func forwardHeader(r *http.Request) http.Header {
	out := http.Header{}
	for _, k := range []string{"Content-Type", "Accept", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id"} {
		if v := r.Header.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		b, _ := json.Marshal(auth.TokenInfo{UserID: ti.UserID, Scopes: ti.Scopes})
		out.Set(principalHeader, string(b))
	}
	return out
}

// serveForwarded serves a request forwarded to this frontend, its home: through
// the same HTTP handler as any request, under the caller's deadline and
// principal, its answer kept whole.
func (s *Server) serveForwarded(ctx context.Context, req placement.Request) placement.Response {
	ctx = context.WithValue(ctx, forwardedKey{}, true)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+Path, bytes.NewReader(req.Body))
	if err != nil {
		return placement.Response{Status: http.StatusInternalServerError, Body: []byte(err.Error())}
	}
	for k, vs := range req.Header {
		if http.CanonicalHeaderKey(k) != principalHeader {
			r.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	var handler http.Handler = s.HTTPHandler()
	if raw := req.Header.Get(principalHeader); raw != "" {
		var ti auth.TokenInfo
		if err := json.Unmarshal([]byte(raw), &ti); err != nil {
			return placement.Response{Status: http.StatusBadRequest, Body: []byte("bad forwarded principal")}
		}
		// The frontend that received the request authenticated it; the SDK reads
		// the principal from where RequireBearerToken puts it.
		handler = auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
			return &ti, nil
		}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(handler)
		r.Header.Set("Authorization", "Bearer forwarded")
	}
	rec := &kept{header: http.Header{}}
	handler.ServeHTTP(rec, r)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return placement.Response{Status: rec.code, Header: rec.header, Body: rec.body.Bytes()}
}

// kept is a ResponseWriter that keeps the answer whole (an SSE stream too: its
// events reach the caller together, at its end).
type kept struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (k *kept) Header() http.Header { return k.header }
func (k *kept) WriteHeader(code int) {
	if k.code == 0 {
		k.code = code
	}
}
func (k *kept) Write(b []byte) (int, error) {
	if k.code == 0 {
		k.code = http.StatusOK
	}
	return k.body.Write(b)
}
func (k *kept) Flush() {}

// lostText is the answer for a scope whose home was lost.
func lostText(handle, home string) string {
	return "scope lost: " + tools.Label(handle) + " (its home frontend " + home + " stopped — it died or was cut off — and a scope lives in its home's memory, " +
		"so its tasks were killed with it; start a background command without scope for a new one)"
}

// writeLost answers a request for a lost scope: a tool error for a tool call (the
// model reads it), an invalid-params error for a tasks method.
func writeLost(w http.ResponseWriter, req routed, home string) {
	text := lostText(req.handle, home)
	if req.method != "tools/call" {
		writeRPC(w, req.id, nil, &rpcError{Code: -32602, Message: text})
		return
	}
	res := map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": true, "resultType": "complete"}
	writeRPC(w, req.id, res, nil)
}

// writeRPCError answers a request that could not be served with an internal
// error.
func writeRPCError(w http.ResponseWriter, req routed, msg string) {
	writeRPC(w, req.id, nil, &rpcError{Code: -32603, Message: msg})
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *rpcError) {
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{"2.0", id, result, e}
	b, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
