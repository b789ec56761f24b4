package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// The sessionless revision, MCP 2026-07-28 (SEP-2567), beside 2025-11-25
// sessions on the same Server.
//
// A 2026-07-28 request names its revision in its own _meta
// (io.modelcontextprotocol/protocolVersion). Who owns what it starts:
//
//   - On a connection served by Serve (stdio: one client per process), the
//     connection's owner, as for every request on it: the model carries no handle,
//     and the tools/list of this revision is the session's, unchanged.
//   - Over HTTP, where nothing else tells two clients apart, a scope: a
//     server-minted handle (crypto/rand.Text: 130 random bits) passed as the tool
//     argument scope. A background start without a scope mints one: a new owner
//     ("scope-N") whose handle the result gives in its text and as
//     structuredContent.scope. Every task tool takes scope and answers for that
//     scope only. With an authenticated principal (the request's token info), the
//     scope is bound to it and checked on every call.
//
// A scope, on either transport (an explicit scope on stdio keeps working):
//
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
//
// A request never reaches an HTTP session's owner; a session's request never
// reaches a scope.

// sessionlessVersion is the first protocol revision without sessions.
const sessionlessVersion = "2026-07-28"

// scopeCloseName is the name of the tool that ends a scope at once.
const scopeCloseName = "scope_close"

// lastSessionVersion is what an initialize that asks for a sessionless revision
// is negotiated down to: initialize opens a session, and sessions end at
// 2025-11-25.
const lastSessionVersion = "2025-11-25"

// unscoped is the agent a request with a wrong, unknown or missing scope acts as:
// never registered, so it owns nothing and can start nothing, and every task id
// reads to it as not found.
const unscoped messages.AgentID = "scope-none"

// sessionless reports whether req names a sessionless revision in its _meta.
func sessionless(req mcp.Request) bool {
	p := req.GetParams()
	if p == nil {
		return false
	}
	defer func() { _ = recover() }() // a typed nil params: no _meta
	v, _ := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string)
	return v >= sessionlessVersion
}

// principalOf is the authenticated principal of a request, "" if none.
func principalOf(extra *mcp.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	return extra.TokenInfo.UserID
}

// findScope returns the open scope with handle bound to principal, or nil.
func (s *Server) findScope(handle, principal string) *owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.byHandle[handle]
	switch {
	case o == nil:
	case o.pHash != "" && o.pHash == placement.PrincipalHash(principal):
		return o // a scope of the cluster: it may have been taken from its minter
	case o.pHash == "" && o.principal == principal:
		return o
	}
	return nil
}

// mintScope registers a new scope's owner.
func (s *Server) mintScope(ctx context.Context, principal string) (*owner, error) {
	o := s.newOwner(messages.AgentID(fmt.Sprintf("scope-%d", s.scoped.Add(1))))
	o.handle, o.principal = rand.Text(), principal
	if err := s.register(ctx, o); err != nil {
		return nil, err
	}
	if err := s.place(ctx, o); err != nil {
		s.end(o, err)
		return nil, err
	}
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		s.end(o, ErrClosed)
		return nil, ErrClosed
	}
	s.byHandle[o.handle] = o
	s.mu.Unlock()
	s.log.Info("scope minted", "owner", o.agent)
	return o, nil
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

// scopedHandle is a sessionless start's structured content: the handle's fields,
// the scope beside them, then what the model must read.
type scopedHandle struct {
	tools.Handle
	Scope   string   `json:"scope"`
	Message string   `json:"message"`
	Notices []string `json:"notices,omitempty"`
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
	o := s.findScope(handle, principal)
	if handle == "" || o == nil {
		return toResult(tools.Result{Text: scopeNotFoundText(handle), IsError: true}, nil)
	}
	s.end(o, errSessionEnded)
	return toResult(tools.Result{Text: "closed scope " + handle + ": its tasks were killed and every process they started is gone"}, nil)
}

// ---- tools/list and server/discover in the sessionless era ----

// scopeProperty is the scope parameter every task tool takes in the
// sessionless era over HTTP.
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
	return "The scope handle a background start returned (structuredContent.scope; where your harness showed a task id as <id>.<scope>, the part after the dot). A background bash without scope mints a new scope; " +
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
		if err := s.markScopeTool(t); err != nil {
			return err
		}
	}
	closeTool, err := json.Marshal(map[string]any{
		"name":        scopeCloseName,
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

// markScopeTool adds scope to one tool's schema and the policy to its
// description.
func (s *Server) markScopeTool(t map[string]json.RawMessage) error {
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
	t["description"], err = json.Marshal(strings.TrimSpace(desc + "\n\nSessionless (MCP " + sessionlessVersion + "): " + s.scopePolicy()))
	return err
}

// sessionlessMethod serves the methods taskrt takes over in the sessionless era;
// the rest are the SDK's.
func (s *Server) sessionlessMethod(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	switch method {
	case "tools/list":
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if o := s.ownerOf(sessionOf(req)); o != nil && o.httpID == "" {
			return res, nil // a connection: its owner needs no scope
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
		return s.callTool(ctx, cr)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update":
		return s.extTasksMethod(ctx, method, req)
	}
	return next(ctx, method, req)
}

// sessionOf is the server session a request came on (nil if none).
func sessionOf(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
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
