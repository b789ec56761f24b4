package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// The sessionless revision, MCP 2026-07-28 (SEP-2567), beside 2025-11-25
// sessions on the same Server.
//
// A 2026-07-28 request names its revision in its own _meta
// (io.modelcontextprotocol/protocolVersion) and is served in that era: it never
// reaches a session's owner, and a session's request never reaches a scope's.
// There is no session to own a task, so the owner is a scope: a server-minted
// handle (crypto/rand.Text: 130 random bits) passed as the tool argument scope.
//
//   - A background start without a scope mints one: a new owner agent
//     ("scope-N") whose handle the result gives in its text and as
//     structuredContent.scope. Every task tool takes scope and answers for that
//     scope only. With an authenticated principal (the request's token info), the
//     scope is bound to it and checked on every call.
//   - A wrong or unknown scope (another principal's, a lapsed or closed one, a
//     guess) reads exactly as a scope with no tasks: every task id is "task not
//     found", task_list lists nothing, a start is refused with "scope not found".
//   - Each scope has an idle lease (the Server's idle timeout, WithSessionTimeout,
//     default 30 minutes): every request naming it renews it, a request in progress
//     holds it, and when it lapses the owner is disposed as a session end is —
//     every task killed, every process gone. The tool scope_close ends a scope at
//     once. The tool descriptions state this policy.
//   - There are no server-initiated messages outside a request: a completion
//     notice rides on the next tool result naming its scope, exactly once (never
//     when the model saw the task's end itself).

// SessionlessVersion is the first protocol revision without sessions.
const SessionlessVersion = "2026-07-28"

// ScopeCloseName is the name of the tool that ends a scope at once.
const ScopeCloseName = "scope_close"

// lastSessionVersion is what an initialize that asks for a sessionless revision
// is negotiated down to: initialize opens a session, and sessions end at
// 2025-11-25.
const lastSessionVersion = "2025-11-25"

// unscoped is the owner a request with a wrong, unknown or missing scope acts as:
// never registered, so it owns nothing and can start nothing, and every task id
// reads to it as not found.
const unscoped messages.AgentID = "scope-none"

// scope is one sessionless owner.
type scope struct {
	handle    string
	owner     messages.AgentID
	principal string // "" when the request that minted it had none

	mu       sync.Mutex // protects the fields below
	pending  []notice
	inflight int         // requests naming the scope still running: they hold the lease
	lease    *time.Timer // nil without an idle timeout
	over     bool        // closed or lapsed
}

// scopes are the Server's sessionless owners.
type scopes struct {
	numbered atomic.Uint64 // scope-1, scope-2, …

	mu       sync.Mutex // protects byHandle and closed, and orders wg.Add before wg.Wait
	byHandle map[string]*scope
	tasks    map[string]*extTask // the tasks extension's tasks, by MCP task id (tasksext.go)
	closed   bool
	wg       sync.WaitGroup // disposals of lapsed scopes
}

// sessionless reports whether req names a sessionless revision in its _meta.
func sessionless(req mcp.Request) bool {
	p := req.GetParams()
	if p == nil {
		return false
	}
	defer func() { _ = recover() }() // a typed nil params: no _meta
	v, _ := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string)
	return v >= SessionlessVersion
}

// principalOf is the authenticated principal of a request, "" if none.
func principalOf(extra *mcp.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	return extra.TokenInfo.UserID
}

// find returns the open scope with handle bound to principal, or nil.
func (sc *scopes) find(handle, principal string) *scope {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if c := sc.byHandle[handle]; c != nil && c.principal == principal {
		return c
	}
	return nil
}

// mint registers a new scope's owner.
func (s *Server) mintScope(ctx context.Context, principal string) (*scope, error) {
	c := &scope{handle: rand.Text(), owner: messages.AgentID(fmt.Sprintf("scope-%d", s.scopes.numbered.Add(1))), principal: principal}
	if err := s.rt.Agents().Register(ctx, c.owner, actors.WithInjector(c.inject)); err != nil {
		return nil, err
	}
	s.scopes.mu.Lock()
	if s.scopes.closed {
		s.scopes.mu.Unlock()
		_ = s.rt.Agents().Dispose(context.Background(), c.owner)
		return nil, ErrClosed
	}
	if s.scopes.byHandle == nil {
		s.scopes.byHandle = map[string]*scope{}
	}
	s.scopes.byHandle[c.handle] = c
	s.scopes.mu.Unlock()
	s.log.Info("scope minted", "owner", c.owner)
	return c, nil
}

// inject is the scope owner's injector: the notice waits for the next tool
// result naming the scope.
func (c *scope) inject(ctx context.Context, text string) error {
	id, _ := messages.NoticeTask(ctx) // the task the notice is about (issue 24)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.over {
		c.pending = append(c.pending, notice{id: id, text: text})
	}
	return nil
}

// takeNotices is session.takeNotices for a scope.
func (s *Server) takeScopeNotices(ctx context.Context, c *scope) []string {
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	var out []string
	for _, n := range pending {
		if n.id != "" {
			snap, err := s.rt.Tasks().Get(ctx, n.id, c.owner)
			switch {
			case err == nil && snap.Reported:
				continue
			case err != nil && !errors.Is(err, messages.ErrTaskNotFound):
				continue
			}
		}
		out = append(out, n.text)
	}
	return out
}

// hold marks a request naming c as begun: the lease cannot lapse while it runs.
// It reports false when the scope is over.
func (c *scope) hold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.over {
		return false
	}
	c.inflight++
	if c.lease != nil {
		c.lease.Stop()
	}
	return true
}

// release ends a request naming c and renews the lease from now.
func (s *Server) release(c *scope) {
	idle := s.cfg.sessionTimeout
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	if c.over || c.inflight > 0 || idle <= 0 {
		return
	}
	if c.lease == nil {
		c.lease = time.AfterFunc(idle, func() { s.lapse(c) })
		return
	}
	c.lease.Reset(idle)
}

// lapse is the end of c's lease: its owner is disposed (every process gone), on a
// goroutine the Server waits for at Close.
func (s *Server) lapse(c *scope) {
	c.mu.Lock()
	if c.over || c.inflight > 0 {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	s.scopes.mu.Lock()
	if s.scopes.closed {
		s.scopes.mu.Unlock()
		return // Close disposes it
	}
	s.scopes.wg.Add(1)
	s.scopes.mu.Unlock()
	go func() {
		defer s.scopes.wg.Done()
		s.log.Info("scope lapsed", "owner", c.owner)
		s.endScope(c)
	}()
}

// endScope closes c: no request finds it from now on, its notices are dropped,
// and its owner is disposed (every task killed and awaited).
func (s *Server) endScope(c *scope) {
	s.scopes.mu.Lock()
	if s.scopes.byHandle[c.handle] == c {
		delete(s.scopes.byHandle, c.handle)
	}
	s.scopes.mu.Unlock()
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return
	}
	c.over = true
	c.pending = nil
	if c.lease != nil {
		c.lease.Stop()
	}
	c.mu.Unlock()
	s.dropExtTasks(c)
	if err := s.rt.Agents().Dispose(context.Background(), c.owner); err != nil && !errors.Is(err, messages.ErrClosed) {
		s.log.Warn("disposing a scope's owner", "owner", c.owner, "err", err)
	}
}

// closeScopes ends every scope (Close's step before the runtime closes): lapses
// in progress are awaited, the rest disposed.
func (s *Server) closeScopes() {
	s.scopes.mu.Lock()
	s.scopes.closed = true
	all := make([]*scope, 0, len(s.scopes.byHandle))
	for _, c := range s.scopes.byHandle {
		all = append(all, c)
	}
	s.scopes.mu.Unlock()
	s.scopes.wg.Wait()
	var ending sync.WaitGroup
	for _, c := range all {
		ending.Go(func() { s.endScope(c) })
	}
	ending.Wait()
}

// requestContext is the context of a sessionless call: ctx, ended also when the
// Server closes and, over HTTP, when the client closes the request.
func (s *Server) requestContext(ctx context.Context, extra *mcp.RequestExtra) (context.Context, func(), error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopServer := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	stopPost := func() bool { return true }
	if extra != nil && extra.Header != nil {
		if key := extra.Header.Get(callHeader); key != "" {
			post, ok := s.httpPost(key)
			if !ok {
				stopServer()
				cancel(errClientGone)
				return nil, nil, errClientGone
			}
			stopPost = context.AfterFunc(post, func() { cancel(errClientGone) })
		}
	}
	return ctx, func() {
		stopServer()
		stopPost()
		cancel(nil)
	}, nil
}

// callSessionless serves a 2026-07-28 tools/call.
func (s *Server) callSessionless(ctx context.Context, cr *mcp.CallToolRequest) (mcp.Result, error) {
	name := cr.Params.Name
	var args map[string]json.RawMessage
	if len(cr.Params.Arguments) > 0 && string(cr.Params.Arguments) != "null" {
		if err := json.Unmarshal(cr.Params.Arguments, &args); err != nil {
			return toResult(tools.Result{Text: "bad arguments: want a JSON object", IsError: true}, nil), nil
		}
	}
	var handle string
	if raw, ok := args["scope"]; ok {
		if err := json.Unmarshal(raw, &handle); err != nil {
			return toResult(tools.Result{Text: "bad arguments: scope must be a string (the handle a background start returned)", IsError: true}, nil), nil
		}
		delete(args, "scope")
	}
	principal := principalOf(cr.Extra)
	if name == ScopeCloseName {
		return s.closeScopeTool(handle, principal), nil
	}
	t := s.tool(name)
	if t == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	callCtx, done, err := s.requestContext(ctx, cr.Extra)
	if err != nil {
		return nil, err
	}
	defer done()

	var c *scope
	if handle != "" {
		if c = s.scopes.find(handle, principal); c != nil && !c.hold() {
			c = nil
		}
	}
	minted := false
	switch {
	case c == nil && handle != "" && startsTask(name, args):
		return toResult(tools.Result{Text: scopeNotFoundText(handle), IsError: true}, nil), nil
	case c == nil && handle == "" && startsTask(name, args):
		if c, err = s.mintScope(callCtx, principal); err != nil {
			return toResult(tools.Result{Text: "cannot start a scope: " + tools.Label(err.Error()), IsError: true}, nil), nil
		}
		c.hold()
		minted = true
	}
	if c == nil && name == tools.BashName && !startsTask(name, args) && declaresTasks(cr) {
		if handle != "" {
			return toResult(tools.Result{Text: scopeNotFoundText(handle), IsError: true}, nil), nil
		}
		if c, err = s.mintScope(callCtx, principal); err != nil {
			return toResult(tools.Result{Text: "cannot start a scope: " + tools.Label(err.Error()), IsError: true}, nil), nil
		}
		c.hold()
		minted = true
	}
	if c != nil && name == tools.BashName && !startsTask(name, args) && declaresTasks(cr) {
		defer s.release(c)
		var command struct {
			Command string `json:"command"`
		}
		raw, _ := json.Marshal(args)
		_ = json.Unmarshal(raw, &command)
		return s.callAsExtTask(callCtx, t, raw, command.Command, c, minted)
	}
	owner := unscoped
	if c != nil {
		owner = c.owner
		defer s.release(c)
	}
	raw, err := json.Marshal(args)
	if err != nil || args == nil {
		raw = cr.Params.Arguments
	}
	r := t.Call(callCtx, owner, raw)
	if cause := context.Cause(callCtx); errors.Is(cause, ErrClosed) || errors.Is(cause, errClientGone) {
		return nil, cause
	}
	if minted && r.Data == nil { // the start failed: nothing to own
		s.endScope(c)
		c = nil
	}
	if c == nil {
		return toResult(r, nil), nil
	}
	if r.Data != nil { // a start: the scope goes with the task id, in the text too
		r.Text += "\n" + scopeText(c.handle, s.cfg.sessionTimeout)
	}
	var notices []string
	if ctx.Err() == nil { // a cancelled request drops its result: the notices wait
		notices = s.takeScopeNotices(callCtx, c)
	}
	res := toResult(r, notices)
	if r.Data != nil {
		res.StructuredContent = withScope(res.StructuredContent, c.handle)
	}
	return res, nil
}

// startsTask reports whether a call of tool name with args starts a background
// task (and so needs an owner).
func startsTask(name string, args map[string]json.RawMessage) bool {
	if name != tools.BashName {
		return false
	}
	var bg bool
	return json.Unmarshal(args["run_in_background"], &bg) == nil && bg
}

// scopedHandle is a sessionless start's structured content: the handle's fields,
// the scope beside them, then what the model must read.
type scopedHandle struct {
	tools.Handle
	Scope   string   `json:"scope"`
	Message string   `json:"message"`
	Notices []string `json:"notices,omitempty"`
}

// withScope is a start's structured content with the scope beside the task id.
func withScope(data any, handle string) any {
	if h, ok := data.(handleResult); ok {
		return scopedHandle{Handle: h.Handle, Scope: handle, Message: h.Message, Notices: h.Notices}
	}
	m := map[string]any{}
	if b, err := json.Marshal(data); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	m["scope"] = handle
	return m
}

func scopeText(handle string, idle time.Duration) string {
	lapse := "it lasts until scope_close"
	if idle > 0 {
		lapse = fmt.Sprintf("it lapses after %s without a request naming it, which kills its tasks; scope_close ends it at once", idle)
	}
	return fmt.Sprintf("scope: %s (pass it as scope to every task tool: task_output, task_list, task_kill, … and to later background starts; "+
		"the notice that a task finished comes only on the result of a call naming its scope; %s)", handle, lapse)
}

func scopeNotFoundText(handle string) string {
	return "scope not found: " + tools.Label(handle) + " (it lapsed or was closed; start a background command without scope for a new one)"
}

// closeScopeTool is the scope_close tool: it ends the scope at once and returns
// once every process of it is gone.
func (s *Server) closeScopeTool(handle, principal string) *mcp.CallToolResult {
	c := s.scopes.find(handle, principal)
	if handle == "" || c == nil {
		return toResult(tools.Result{Text: scopeNotFoundText(handle), IsError: true}, nil)
	}
	s.endScope(c)
	return toResult(tools.Result{Text: "closed scope " + handle + ": its tasks were killed and every process they started is gone"}, nil)
}

// ---- tools/list in the sessionless era ----

// scopeProperty is the scope parameter every task tool takes in the
// sessionless era.
func (s *Server) scopeProperty() json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "string", "description": s.scopePolicy()})
	return b
}

// scopePolicy is the policy the tool descriptions state.
func (s *Server) scopePolicy() string {
	lapse := "until scope_close ends it"
	if idle := s.cfg.sessionTimeout; idle > 0 {
		lapse = fmt.Sprintf("until %s pass without a request naming it, or scope_close ends it; then every task of it is killed", idle)
	}
	return "The scope handle a background start returned (structuredContent.scope). A background bash without scope mints a new scope; " +
		"a scope owns its tasks " + lapse + ". A wrong or unknown scope owns nothing. " +
		"There is no session: the notice that one of its tasks finished comes only on the result of a later call naming the scope, " +
		"so pass it on every call (a call without it neither reaches its tasks nor carries their notices)."
}

// markScopeTools patches a sessionless tools/list: scope in every task tool's
// schema, the policy in its description, and the scope_close tool.
func (s *Server) markScopeTools(m map[string]json.RawMessage) error {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &list); err != nil {
		return err
	}
	for _, t := range list {
		var schema map[string]json.RawMessage
		if err := json.Unmarshal(t["inputSchema"], &schema); err != nil {
			return err
		}
		props := map[string]json.RawMessage{}
		if raw, ok := schema["properties"]; ok {
			if err := json.Unmarshal(raw, &props); err != nil {
				return err
			}
		}
		props["scope"] = s.scopeProperty()
		var err error
		if schema["properties"], err = json.Marshal(props); err != nil {
			return err
		}
		if t["inputSchema"], err = json.Marshal(schema); err != nil {
			return err
		}
		var desc string
		_ = json.Unmarshal(t["description"], &desc)
		if t["description"], err = json.Marshal(strings.TrimSpace(desc + "\n\nSessionless (MCP " + SessionlessVersion + "): " + s.scopePolicy())); err != nil {
			return err
		}
	}
	closeTool, err := json.Marshal(map[string]any{
		"name":        ScopeCloseName,
		"description": "End a scope at once: every task it owns is killed, and this returns once every process they started is gone. " + s.scopePolicy(),
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"scope": json.RawMessage(s.scopeProperty())},
			"required": []string{"scope"}, "additionalProperties": false},
	})
	if err != nil {
		return err
	}
	var ct map[string]json.RawMessage
	if err := json.Unmarshal(closeTool, &ct); err != nil {
		return err
	}
	list = append(list, ct)
	b, err := json.Marshal(list)
	m["tools"] = b
	return err
}

// sessionlessMethod serves the methods taskrt takes over in the sessionless era;
// the rest (server/discover, …) are the SDK's.
func (s *Server) sessionlessMethod(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	switch method {
	case "tools/list":
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		return &patched{Result: res, patch: func(m map[string]json.RawMessage) error {
			m["resultType"] = json.RawMessage(`"complete"`) // patched hides the SDK's own setter
			return s.markScopeTools(m)
		}}, nil
	case "server/discover":
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		return &patched{Result: res, patch: offerTasksExtension}, nil
	case "tools/call":
		cr, ok := req.(*mcp.CallToolRequest)
		if !ok || cr.Params == nil {
			return next(ctx, method, req)
		}
		delete(cr.Params.Meta, metaTask) // the 2025-11-25 task param means nothing here
		return s.callSessionless(ctx, cr)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update":
		return s.sessionlessTasks(ctx, method, req)
	}
	return next(ctx, method, req)
}

// offerTasksExtension adds the tasks extension to a server/discover result's
// capabilities.
func offerTasksExtension(m map[string]json.RawMessage) error {
	m["resultType"] = json.RawMessage(`"complete"`)
	caps := map[string]json.RawMessage{}
	if raw, ok := m["capabilities"]; ok {
		if err := json.Unmarshal(raw, &caps); err != nil {
			return err
		}
	}
	ext := map[string]json.RawMessage{}
	if raw, ok := caps["extensions"]; ok {
		if err := json.Unmarshal(raw, &ext); err != nil {
			return err
		}
	}
	ext[tasksExtension] = json.RawMessage(`{}`)
	var err error
	if caps["extensions"], err = json.Marshal(ext); err != nil {
		return err
	}
	m["capabilities"], err = json.Marshal(caps)
	return err
}
