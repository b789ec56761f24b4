package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OnToolCall makes srv report the name of every tool call it receives to f, before
// the call's handler runs, so that a test can act knowing the call reached the
// server. Set it before any session begins.
func OnToolCall(srv *Server, f func(name string)) {
	srv.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				f(p.Name)
			}
			return next(ctx, method, req)
		}
	})
}

// EventsPath is the live page's event stream, below the page's path.
const EventsPath = eventsPath

// TailPath is the live page's tail endpoint, below the page's path.
const TailPath = tailPath

// The protocol constants the external tests check the wire against.
const (
	SessionlessVersion = sessionlessVersion
	ScopeCloseName     = scopeCloseName
	TaskPollInterval   = taskPollInterval
	DefaultTaskTTL     = defaultTaskTTL
	MinTaskTTL         = minTaskTTL
)

// BeforeMark makes srv call f after each sessionless answer in a cluster scope
// went out and before the notices it carried are marked delivered in the
// scope's record. Set it before the calls it is to see.
func BeforeMark(srv *Server, f func()) { srv.beforeMark.Store(&f) }
