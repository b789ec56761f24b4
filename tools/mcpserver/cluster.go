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
// Each sessionless scope has one home: a frontend that runs its owner agent —
// fence, ids, caps, queue, notices — by the same code as a single server, and
// keeps the scope's record in the store (package placement): its tasks (id,
// kind, label, the command's key on the workers, start, whether the model has had
// its end). The home writes the record before it answers a start, and after the
// answer that carried a notice or showed an end. A sessionless HTTP request that
// names a scope (the scope argument, a task id "<id>.<scope>", a tasks/* taskId)
// is served thus:
//
//   - the scope is homed here and this frontend's lease is valid: served here;
//   - the store knows no such scope for the request's principal: served here, so
//     refused exactly as on one server (an unknown and a foreign scope read alike
//     on every frontend);
//   - another live frontend homes it: the request is forwarded to that home with
//     the time the caller has left, and the home's answer returned unchanged;
//   - its home's lease ended (it died, was paused or cut off, or shut down): this
//     frontend takes the scope (a compare-and-set on its record, with the scope's
//     next epoch), adopts its commands from the workers under that epoch, makes
//     each recorded task a task again under its id (actors.Tasks.Restore), and
//     serves the request. Every frontend also takes the scopes of a home whose
//     lease it sees end, at once, so that their commands are adopted within the
//     workers' orphan grace whether or not a request comes.
//
// A frontend that loses its lease (a pause, a partition) detaches its scopes'
// commands before anything else (its kills never reach the workers, which refuse
// its epoch anyway once another frontend adopted them) and drops those scopes
// without a write; Close hands its scopes on the same way. Requests without a
// scope (a start that mints one, tools/list, server/discover) are served by the
// frontend that received them; sessions (2025-11-25) stay with their connection.

// principalHeader carries a forwarded request's principal to its home.
const principalHeader = "Taskrt-Principal"

// forwardedKey marks the context of a request forwarded to this frontend: it is
// served here, never forwarded again.
type forwardedKey struct{}

// joinPlacement makes the Server's placement, if any, serve the requests
// forwarded here, drop the scopes of a lost lease and take those of an ended one.
func (s *Server) joinPlacement() error {
	p := s.cfg.placement
	if p == nil {
		return nil
	}
	p.Node().OnFence(s.fenced)
	p.Node().OnOwnerEnded(s.orphaned)
	if err := p.Serve(s.serveForwarded); err != nil {
		return fmt.Errorf("taskrt-mcp: %w", err)
	}
	return nil
}

// inCluster reports whether o is a scope with a record in the placement.
func (s *Server) inCluster(o *owner) bool { return s.cfg.placement != nil && o.isScope() }

// homedHere reports whether this frontend may answer for o now: its lease is
// valid and is the one o was homed under (not a lease it lost, whose scopes are
// being dropped).
func (s *Server) homedHere(o *owner) bool {
	epoch, ok := s.cfg.placement.Epoch()
	return ok && epoch == o.homeEpoch
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
	o.homeEpoch, o.gen, o.pHash = epoch, 1, placement.PrincipalHash(o.principal)
	return nil
}

// errScopeLost ends the scopes of a lease this frontend lost, and errHandedOff
// those of a frontend that closes: their records stay for the frontend that
// takes them, and their commands run on (detached here first).
var (
	errScopeLost = errors.New("taskrt-mcp: this frontend lost its lease; another frontend takes its scopes")
	errHandedOff = errors.New("taskrt-mcp: this frontend is shutting down; another frontend takes its scopes")
)

// unplace deletes an ended scope's record, unless the scope was dropped here
// to be taken elsewhere.
func (s *Server) unplace(o *owner, cause error) {
	p := s.cfg.placement
	if !s.inCluster(o) {
		return
	}
	if errors.Is(cause, errScopeLost) || errors.Is(cause, errHandedOff) {
		p.Abandon(o.handle)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(p.Lease()/4, 500*time.Millisecond))
	defer cancel()
	p.Unregister(ctx, o.handle)
}

// fenced drops every scope homed here under epoch, the lease this frontend lost
// (its commands are detached already): from now on another frontend takes them.
// It does not block.
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
			s.log.Warn("scope dropped with this frontend's lease", "owner", o.agent)
			s.end(o, errScopeLost)
		}()
	}
}

// routed is what the routing reads of a sessionless request.
type routed struct {
	id     json.RawMessage // the JSON-RPC id (nil: a notification)
	method string
	tool   string // a tools/call's tool
	handle string // the scope it names, "" for none
}

// scopeOfBody reads the scope a sessionless request names, as callTool and the
// tasks methods do: the scope argument, else the first task id that carries one.
func scopeOfBody(body []byte) routed {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
			TaskID    string                     `json:"taskId"`
		} `json:"params"`
	}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' || json.Unmarshal(body, &m) != nil {
		return routed{}
	}
	r := routed{id: m.ID, method: m.Method, tool: m.Params.Name}
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

// route serves a sessionless request whose scope is not served here: forwarded
// to its home, or taken here, or (false) left to this frontend.
func (h *httpHandler) route(w http.ResponseWriter, r *http.Request, body []byte) bool {
	req := scopeOfBody(body)
	var principal string
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		principal = ti.UserID
	}
	if r.Context().Value(forwardedKey{}) != nil {
		// Sent here as the scope's home, by its record: if this frontend is
		// taking the scope a moment ago, the request waits for the take; an
		// owner of a lease this frontend lost answers nothing.
		if req.handle != "" {
			h.s.awaitTake(r.Context(), req.handle)
			if o := h.s.findScope(req.handle, principal); o != nil && !h.s.homedHere(o) && req.id != nil {
				writeRPCError(w, req, "taskrt-mcp: scope "+tools.Label(req.handle)+": "+placement.ErrNoLease.Error()+"; try again")
				return true
			}
		}
		return false
	}
	if req.handle == "" || req.id == nil {
		return false
	}
	p := h.s.cfg.placement
	if o := h.s.findScope(req.handle, principal); o != nil && h.s.homedHere(o) {
		return false
	}
	for try := 0; ; try++ {
		loc, err := p.Locate(r.Context(), req.handle, principal)
		if err == nil && (loc.Where == placement.Orphaned || loc.Where == placement.Here) {
			// Here: homed here by the record, taken a moment ago or being taken.
			_, err = h.s.takeScope(r.Context(), req.handle)
			if err == nil {
				return false
			}
			if (errors.Is(err, placement.ErrHomeLive) || errors.Is(err, placement.ErrMoved)) && try < 3 {
				continue // another frontend took it first: find it there
			}
		}
		switch {
		case err != nil:
			writeRPCError(w, req, "taskrt-mcp: cannot find where scope "+tools.Label(req.handle)+" lives: "+err.Error())
			return true
		case loc.Where != placement.Elsewhere:
			return false
		}
		resp, err := p.Forward(r.Context(), loc.Home, placement.Request{Header: forwardHeader(r), Body: body})
		if errors.Is(err, placement.ErrNotSent) && try < 3 {
			// The home is gone and the request never reached it: wait for its
			// lease to end, then take the scope here (the caller sees a slow
			// answer, not an error).
			if err = p.AwaitHomeEnd(r.Context(), loc.Home, loc.Epoch); err == nil {
				continue
			}
		}
		return h.answerForwarded(w, req, loc.Home, resp, err)
	}
}

// answerForwarded writes the home's answer to a forwarded request, or the error
// that kept it from one.
func (h *httpHandler) answerForwarded(w http.ResponseWriter, req routed, home string, resp placement.Response, err error) bool {
	if err != nil {
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			why = "the call's deadline passed before it answered (" + err.Error() + ")"
		}
		h.s.log.Info("forwarding a request", "home", home, "err", err)
		writeRPCError(w, req, "taskrt-mcp: scope "+tools.Label(req.handle)+" lives on frontend "+home+": "+why)
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
	if _, err := w.Write(resp.Body); err == nil && resp.Delivered != nil {
		// The home marks the notices the answer carried once it hears that the
		// answer reached the caller, never before.
		h.s.spawn(resp.Delivered)
	}
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
	if !s.cfg.placement.Valid() {
		// A stale home (resumed from a pause past its lease): it answers for no
		// scope; the forwarder's next try finds the scope's new home.
		return placement.Response{Status: http.StatusServiceUnavailable, Body: []byte(placement.ErrNoLease.Error())}
	}
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
	var principal string
	if raw := req.Header.Get(principalHeader); raw != "" {
		var ti auth.TokenInfo
		if err := json.Unmarshal([]byte(raw), &ti); err != nil {
			return placement.Response{Status: http.StatusBadRequest, Body: []byte("bad forwarded principal")}
		}
		principal = ti.UserID
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
	return placement.Response{Status: rec.code, Header: rec.header, Body: rec.body.Bytes(), Sent: func() { s.answered(ctx, principal, req.Body) }}
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
