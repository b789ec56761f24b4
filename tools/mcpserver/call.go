package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// A call is one tools/call as the Server reads it.
type call struct {
	req         *mcp.CallToolRequest
	name        string
	tool        tools.Tool // nil for scope_close
	sessionless bool       // the request names the sessionless revision

	args       map[string]json.RawMessage // nil when the arguments are not an object
	raw        json.RawMessage            // the arguments the tool gets (scope taken out)
	handle     string                     // the scope the call named ("": none)
	background bool                       // run_in_background: true
	taskParams any                        // a 2025-11-25 task-augmented call's params.task
	asked      bool                       // the call is task-augmented (2025-11-25)
	extTasks   bool                       // the client declared the tasks extension

	owner  *owner // nil: the caller owns nothing (an unknown scope)
	held   bool   // owner.hold succeeded: release when the call ends
	minted bool   // owner is a scope this call minted
}

// agent is the agent the tool runs as: the owner's, or one that owns nothing.
func (c *call) agent() messages.AgentID {
	if c.owner == nil {
		return unscoped
	}
	return c.owner.agent
}

// startsTask reports whether the call starts a background task (and so needs an
// owner).
func (c *call) startsTask() bool { return c.background }

// callTool serves every tools/call, of every revision, in five steps:
//
//  1. read the call: its tool, its arguments and, in the sessionless revision,
//     the scope it names (readCall);
//  2. find its owner: the scope it names, else its connection's or session's,
//     else — a sessionless start over HTTP — a new scope (findOwner);
//  3. its context: the request's, ended also with the owner and with the HTTP
//     request that carried it;
//  4. run it: as a protocol task where the client asked for one or tracks
//     starts as tasks (runAsTask), else the tool itself;
//  5. answer: the tool's text and handle, the owner's notices, and in the
//     sessionless revision a minted scope and resultType (answer).
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	c, res, err := s.readCall(req)
	if res != nil || err != nil {
		return res, err
	}
	if c.tool == nil {
		return complete(s.closeScopeTool(c.handle, principalOf(req.Extra))), nil
	}
	if res, err := s.findOwner(ctx, c); res != nil || err != nil {
		return res, err
	}
	if c.held {
		defer c.owner.release()
	}
	var callCtx context.Context
	var done func()
	if c.owner != nil {
		callCtx, done, err = c.owner.callContext(ctx, req.Extra)
	} else {
		callCtx, done, err = s.requestContext(ctx, s.ctx, req.Extra)
	}
	if err != nil {
		return nil, err
	}
	defer done()
	if res, ok, err := s.runAsTask(callCtx, ctx, c); ok || err != nil {
		return res, err
	}
	r := c.tool.Call(s.withProgress(callCtx, ctx, req), c.agent(), c.raw)
	if err := cutShort(callCtx); err != nil {
		return nil, err
	}
	return s.answer(ctx, c, r), nil
}

// cutShort is the error of a call cut short by its owner's end, its request's or
// the Server's: it fails, rather than answer with what the cut left.
func cutShort(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, errSessionEnded) || errors.Is(cause, errClientGone) || errors.Is(cause, ErrClosed) {
		return cause
	}
	return nil // a request the client cancelled is answered: the client drops it
}

// readCall reads a tools/call. A call that cannot go on is answered at once: an
// unknown tool is an invalid-params error, as the MCP specification asks; a
// scope that is not a string a tool error.
func (s *Server) readCall(req *mcp.CallToolRequest) (*call, mcp.Result, error) {
	c := &call{req: req, name: req.Params.Name, sessionless: sessionless(req), raw: req.Params.Arguments}
	if p, asked := req.Params.Meta[metaTask]; asked {
		delete(req.Params.Meta, metaTask)
		c.taskParams, c.asked = p, !c.sessionless // the 2025-11-25 task param means nothing sessionless
	}
	c.extTasks = c.sessionless && declaresTasks(req)
	if len(c.raw) > 0 && string(c.raw) != "null" {
		_ = json.Unmarshal(c.raw, &c.args) // not an object: the tool says so
	}
	if raw, ok := c.args["scope"]; ok && c.sessionless {
		if err := json.Unmarshal(raw, &c.handle); err != nil {
			return nil, complete(toResult(tools.Result{Text: "bad arguments: scope must be a string (the handle a background start returned)", IsError: true}, nil)), nil
		}
		delete(c.args, "scope")
		if b, err := json.Marshal(c.args); err == nil {
			c.raw = b
		}
	}
	_ = json.Unmarshal(c.args["run_in_background"], &c.background)
	c.tool = s.tool(c.name)
	if c.tool == nil && !(c.sessionless && c.name == scopeCloseName) {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", c.name)}
	}
	return c, nil, nil
}

// findOwner finds the owner of a call (see owner): the scope the call names, or
// that one of the task ids it names carries (sessionless); else the connection's
// or HTTP session's — in the sessionless revision the connection's only; else,
// for a sessionless start (or a foreground bash that may become a task) over
// HTTP, a new scope. A call of a session-era request that has no session fails;
// a call that names an unknown scope runs as nobody's (every task id reads as not
// found), and a start that names one is refused.
func (s *Server) findOwner(ctx context.Context, c *call) (mcp.Result, error) {
	principal := principalOf(c.req.Extra)
	if c.sessionless && c.handle == "" {
		c.handle = s.scopeOfTaskIDs(c, principal)
	}
	switch {
	case c.sessionless && c.handle != "":
		c.owner = s.findScope(c.handle, principal)
		if c.owner == nil && c.startsTask() {
			return complete(toResult(tools.Result{Text: scopeNotFoundText(c.handle), IsError: true}, nil)), nil
		}
	default:
		if o := s.ownerOf(c.req.Session); o != nil && (!c.sessionless || o.httpID == "") {
			c.owner = o
		} else if !c.sessionless {
			return nil, errSessionEnded
		}
	}
	if c.owner == nil && c.sessionless && c.handle == "" && (c.startsTask() || c.name == tools.BashName && c.extTasks) {
		o, err := s.mintScope(ctx, principal)
		if err != nil {
			return complete(toResult(tools.Result{Text: "cannot start a scope: " + tools.Label(err.Error()), IsError: true}, nil)), nil
		}
		c.owner, c.minted = o, true
	}
	if c.owner == nil {
		return nil, nil
	}
	if c.held = c.owner.hold(); !c.held {
		if !c.owner.isScope() {
			return nil, errSessionEnded
		}
		c.owner = nil // it ended between the look-up and now: as if unknown
	}
	return nil, nil
}

// withProgress marks a call's context so that a foreground bash command reports
// its progress as notifications/progress, when the request carries a progress
// token. The notifications go out under ctx, the SDK's request context, which
// routes them to this call's stream.
func (s *Server) withProgress(callCtx, ctx context.Context, req *mcp.CallToolRequest) context.Context {
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return callCtx
	}
	return withReporter(callCtx, func(n int, line string) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: line})
	})
}

// answer is a tool Result as the MCP result of c: with the owner's notices
// (unless the client cancelled the request: it drops the result, so the notices
// wait for the next one), and, for a start in a scope, the scope.
func (s *Server) answer(ctx context.Context, c *call, r tools.Result) mcp.Result {
	if c.owner != nil {
		// Before the answer: a start's task is in its scope's record before the
		// model has its id.
		r = s.recordStart(ctx, c.owner, r)
	}
	if c.minted && r.Data == nil { // the start failed: nothing to own
		s.end(c.owner, errSessionEnded)
		c.owner = nil
	}
	var notices []string
	if c.owner != nil && ctx.Err() == nil {
		notices = c.owner.takeNotices()
	}
	scoped := c.owner != nil && c.owner.isScope() && r.Data != nil
	if scoped { // a start: the scope goes with the task id, in the text too
		r.Text += "\n" + scopeText(c.owner.handle, s.cfg.sessionTimeout)
	}
	res := toResult(r, notices)
	if scoped {
		res.StructuredContent = withScope(res.StructuredContent, c.owner.handle)
	}
	if c.sessionless {
		return complete(res)
	}
	return res
}

// complete is a sessionless tools/call result: resultType "complete", which the
// revision requires (the SDK's CallToolResult keeps it unexported, set only by
// its own tool dispatch, which callTool stands in for).
func complete(res *mcp.CallToolResult) mcp.Result {
	return &patched{Result: res, patch: func(m map[string]json.RawMessage) error {
		m["resultType"] = json.RawMessage(`"complete"`)
		return nil
	}}
}

// scopeOfTaskIDs is the scope a sessionless call names through the task ids it
// passes: a protocol task id over HTTP is "<task id>.<scope handle>" (see
// protocolID), which the model is shown by a harness that tracks tasks; such an
// id is rewritten to the task id. It returns "" when no id carries an open scope
// of principal.
func (s *Server) scopeOfTaskIDs(c *call, principal string) string {
	var found string
	rewrite := func(raw json.RawMessage) json.RawMessage {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			return raw
		}
		rid, handle, ok := strings.Cut(id, ".")
		if !ok || (found != "" && handle != found) || s.findScope(handle, principal) == nil {
			return raw
		}
		found = handle
		b, _ := json.Marshal(rid)
		return b
	}
	if raw, ok := c.args["task_id"]; ok {
		c.args["task_id"] = rewrite(raw)
	}
	if raw, ok := c.args["task_ids"]; ok {
		var ids []json.RawMessage
		if json.Unmarshal(raw, &ids) == nil {
			for i := range ids {
				ids[i] = rewrite(ids[i])
			}
			c.args["task_ids"], _ = json.Marshal(ids)
		}
	}
	if found != "" {
		if b, err := json.Marshal(c.args); err == nil {
			c.raw = b
		}
	}
	return found
}

func (s *Server) tool(name string) tools.Tool {
	for _, t := range s.tools {
		if t.Name() == name {
			return t
		}
	}
	return nil
}
