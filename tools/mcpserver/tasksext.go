package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) in the
// sessionless era.
//
// For a 2026-07-28 client that declares the extension in its request's
// capabilities, a foreground bash call that is still running after the
// Server's task-after (WithTaskAfter, default DefaultTaskAfter) is answered as a
// task: CreateTaskResult with resultType "task". The call runs, as from its start,
// as a taskrt task of its scope (minted when the call named none: the handle is in
// the result's _meta["taskrt/scope"]); a call that ends sooner is answered with its
// result as usual. Then, for the task's id (128 random bits, bound to the scope
// and its principal; any other id reads as unknown, -32602):
//
//   - tasks/get inlines the result once the call has ended (status completed, a
//     tool error included, as the extension asks), and counts as the model reading
//     it: no completion notice follows; other notices of the scope ride on it;
//   - tasks/cancel kills the command (an empty acknowledgement; cancelled stays
//     cancelled);
//   - tasks/update is acknowledged (taskrt's tools never ask for input);
//
// and each renews the scope's lease. The records live as long as their scope.
// A client that did not declare the extension gets -32021 from tasks/*.

// DefaultTaskAfter is how long a foreground bash call of a client with the tasks
// extension runs before it is answered as a task.
const DefaultTaskAfter = 5 * time.Second

const (
	tasksExtension         = "io.modelcontextprotocol/tasks"
	metaScope              = "taskrt/scope"
	codeMissingCapability  = -32021
	missingCapabilityError = "Missing required client capability"
)

// extTask is a task of the extension: the protocol task and its scope.
type extTask struct {
	pt    *protoTask
	scope *scope
}

// declaresTasks reports whether the request's capabilities declare the tasks
// extension.
func declaresTasks(req interface {
	ClientCapabilities() *mcp.ClientCapabilities
}) bool {
	caps := req.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// extTaskInfo is the extension's Task (DetailedTask) on the wire.
type extTaskInfo struct {
	mcp.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          int64               `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

func (e *extTask) info(resultType string) *extTaskInfo {
	info, rid := e.pt.info()
	status := info.Status
	if status == taskFailed { // a tool error is a completed call here
		status = taskCompleted
	}
	return &extTaskInfo{
		ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaRuntimeID: string(rid), metaScope: e.scope.handle}},
		ResultType: resultType, TaskID: info.TaskID, Status: status, StatusMessage: info.StatusMessage,
		CreatedAt: info.CreatedAt, LastUpdatedAt: info.LastUpdatedAt,
		TTLMs: info.TTL, PollIntervalMs: info.PollInterval,
	}
}

// callAsExtTask runs a foreground bash call of a client with the extension: its
// result if it ends within task-after, else a CreateTaskResult.
func (s *Server) callAsExtTask(ctx context.Context, t tools.Tool, args json.RawMessage, command string, c *scope, minted bool) (mcp.Result, error) {
	pt := newProtoTask(DefaultTaskTTL)
	spec := s.taskSpec(c.owner, t, args, command, pt, func(bool) {}, func() {})
	id, err := s.rt.Tasks().Start(ctx, spec)
	if err != nil {
		if minted {
			s.endScope(c)
		}
		return toResult(tools.Result{Text: tools.Label(err.Error()), IsError: true}, nil), nil
	}
	pt.mu.Lock()
	pt.rid = id
	pt.mu.Unlock()
	e := &extTask{pt: pt, scope: c}
	timer := time.NewTimer(s.cfg.taskAfter)
	defer timer.Stop()
	select {
	case <-pt.done: // it ended in time: the call's own result
		_, _ = s.rt.Tasks().Wait(ctx, id, c.owner, time.Minute) // seen: no notice
		if minted {
			s.endScope(c)
			return e.result(nil), nil
		}
		return e.result(s.takeScopeNotices(ctx, c)), nil
	case <-ctx.Done(): // the client gave up on the call: like a foreground call, it dies
		_, _ = s.rt.Tasks().Kill(context.Background(), id, c.owner, "the request was cancelled")
		if minted {
			s.endScope(c)
		}
		return nil, context.Cause(ctx)
	case <-timer.C:
	}
	s.scopes.mu.Lock()
	if s.scopes.tasks == nil {
		s.scopes.tasks = map[string]*extTask{}
	}
	s.scopes.tasks[pt.id] = e
	s.scopes.mu.Unlock()
	return e.info("task"), nil
}

// result is the call's result with notices appended (the task has ended).
func (e *extTask) result(notices []string) *mcp.CallToolResult {
	e.pt.mu.Lock()
	res := *e.pt.result
	e.pt.mu.Unlock()
	res.Content = append([]mcp.Content(nil), res.Content...)
	appendNotices(&res, notices)
	return &res
}

// findExtTask returns the task with id in an open scope of principal, held (the
// caller releases it), or nil.
func (s *Server) findExtTask(id, principal string) *extTask {
	s.scopes.mu.Lock()
	e := s.scopes.tasks[id]
	s.scopes.mu.Unlock()
	if e == nil || e.scope.principal != principal || !e.scope.hold() {
		return nil
	}
	return e
}

// dropExtTasks forgets the tasks of a scope that ended.
func (s *Server) dropExtTasks(c *scope) {
	s.scopes.mu.Lock()
	defer s.scopes.mu.Unlock()
	for id, e := range s.scopes.tasks {
		if e.scope == c {
			delete(s.scopes.tasks, id)
		}
	}
}

// sessionlessTasks answers tasks/* in the sessionless era.
func (s *Server) sessionlessTasks(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	if method == "tasks/result" || method == "tasks/list" {
		// SEP-2663 removed them.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not served in %s", method, SessionlessVersion)}
	}
	sr, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	})
	if !ok || !declaresTasks(sr) {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: missingCapabilityError, Data: data}
	}
	var id string
	if p, ok := req.GetParams().(*taskParams); ok && p != nil {
		id = p.TaskID
	}
	e := s.findExtTask(id, principalOf(req.GetExtra()))
	if e == nil {
		return nil, errTaskNotFound(id)
	}
	defer s.release(e.scope)
	switch method {
	case "tasks/get":
		info := e.info("complete")
		select {
		case <-e.pt.done:
			_, rid := e.pt.info()
			_, _ = s.rt.Tasks().Wait(ctx, rid, e.scope.owner, time.Minute) // seen: no notice
			info.Result = e.result(s.takeScopeNotices(ctx, e.scope))
		default:
		}
		return info, nil
	case "tasks/cancel":
		if _, ok := e.pt.cancel(); ok {
			_, rid := e.pt.info()
			if _, err := s.rt.Tasks().Kill(ctx, rid, e.scope.owner, "cancelled by tasks/cancel"); err != nil {
				s.log.Warn("cancelling a task", "task", rid, "err", err)
			}
		}
	}
	return &ackResult{ResultType: "complete"}, nil // tasks/cancel, tasks/update
}
