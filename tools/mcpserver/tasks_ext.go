package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) of the
// sessionless revision; see tasks.go for what its tasks map onto.
//
// For a 2026-07-28 client that declares the extension in its request's
// capabilities:
//
//   - a background start (run_in_background) is answered at once as a task:
//     {resultType: "task", taskId, status: "working", statusMessage, createdAt,
//     lastUpdatedAt, ttlMs, pollIntervalMs}, _meta["taskrt/task_id"] naming the
//     runtime id (and _meta["taskrt/scope"] a scope's handle);
//   - a foreground bash is run with background_after_ms set to task-after
//     (WithTaskAfter, default defaultTaskAfter) unless it sets its own: one that
//     ends sooner is answered with its result as usual; one still running is moved
//     to the background — never killed at its foreground timeout, as an explicit
//     timeout_ms still bounds it — and answered as a task the same way.
//
// Then, for the task's id (any other id, another owner's included, reads as
// unknown, -32602):
//
//   - tasks/get inlines the result once the task ended (status completed, or
//     cancelled for a task that was killed): what task_output returns then, with
//     the owner's other pending notices appended; taskrt sends no notice of its
//     own for the task, the client's notification is the one;
//   - tasks/cancel kills the task as task_kill does (an empty acknowledgement;
//     cancelled stays cancelled);
//   - tasks/update is acknowledged (taskrt's tools never ask for input).
//
// Each renews a scope's lease. A client that did not declare the extension gets
// -32021 from tasks/*; tasks/result and tasks/list, which the extension removed,
// are -32601.

// defaultTaskAfter is how long a foreground bash call of a client with the tasks
// extension runs before it is moved to the background and answered as a task.
const defaultTaskAfter = 5 * time.Second

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// metaAgentTask is Claude Code's _meta key on a CreateTaskResult: its
	// modelImmediateResponse is the one text of the server's the model is shown
	// beside Claude Code's own (in an <mcp-server-note>, at most 20,000
	// characters); other clients ignore it.
	metaAgentTask          = "com.anthropic/agent-task"
	maxImmediateResponse   = 20000
	codeMissingCapability  = -32021
	missingCapabilityError = "Missing required client capability"
)

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

// extInfo is the task on the wire. ended says whether the work had ended when
// the caller looked: a status of completed comes with its result, so while the
// end is still being recorded the task reads working.
func (pt *protoTask) extInfo(resultType string, ended bool) *extTaskInfo {
	info := pt.info()
	if info.Status != taskWorking && info.Status != taskCancelled && !ended {
		info.Status = taskWorking
	}
	meta := mcp.Meta{metaRuntimeID: string(pt.rid)}
	if pt.owner.isScope() {
		meta[metaScope] = pt.owner.handle
	}
	return &extTaskInfo{
		ResultBase: mcp.ResultBase{Meta: meta},
		ResultType: resultType, TaskID: info.TaskID, Status: info.Status, StatusMessage: info.StatusMessage,
		CreatedAt: info.CreatedAt, LastUpdatedAt: info.LastUpdatedAt,
		TTLMs: info.TTL, PollIntervalMs: info.PollInterval,
	}
}

// extStart starts c's background task with args and answers it as a task; a
// start that failed is answered with the tool's result.
func (s *Server) extStart(callCtx, ctx context.Context, c *call, args json.RawMessage) (mcp.Result, error) {
	pt, r, err := s.startBackground(callCtx, c, args, true, defaultTaskTTL)
	if err != nil {
		return nil, err
	}
	if pt == nil {
		return s.answer(ctx, c, r), nil
	}
	info := pt.extInfo("task", false)
	info.Meta[metaAgentTask] = map[string]string{"modelImmediateResponse": immediateResponse(r.Text, pt)}
	return info, nil
}

// immediateResponse is what the model is told of a start answered as a task,
// beside its harness's own text: the start's text (or a moved command's output so
// far), and over HTTP how the task's id names its scope. A harness shows the
// protocol id, which is the runtime id on a connection.
func immediateResponse(text string, pt *protoTask) string {
	if pt.owner.isScope() {
		text += fmt.Sprintf("\nIts id here is %s: task_output, task_wait, task_watch, task_input and task_kill take it as task_id, and task_list takes scope %s.", pt.id, pt.owner.handle)
	}
	if len(text) > maxImmediateResponse { // keep the end: the status and the id
		text = "…" + strings.ToValidUTF8(text[len(text)-maxImmediateResponse+len("…"):], "")
	}
	return text
}

// extForeground runs a foreground bash of a client with the extension: moved to
// the background after task-after, and then answered as a task.
func (s *Server) extForeground(callCtx, ctx context.Context, c *call) (mcp.Result, bool, error) {
	if c.args == nil {
		return nil, false, nil // not an object: the tool says so
	}
	if _, own := c.args["background_after_ms"]; !own {
		c.args["background_after_ms"], _ = json.Marshal(s.cfg.taskAfter.Milliseconds())
	}
	args, err := json.Marshal(c.args)
	if err != nil {
		return nil, false, nil
	}
	res, err := s.extStart(callCtx, ctx, c, args)
	return res, true, err
}

// extTasksMethod answers tasks/* in the sessionless era.
func (s *Server) extTasksMethod(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	if method == "tasks/result" || method == "tasks/list" {
		// SEP-2663 removed them.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not served in %s", method, sessionlessVersion)}
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
	o, pt := s.findExtTask(req, id)
	if pt == nil {
		return nil, errTaskNotFound(id)
	}
	defer o.release()
	switch method {
	case "tasks/get":
		return s.extGet(ctx, o, pt, req.GetExtra())
	case "tasks/cancel":
		if _, ok := pt.cancel(); ok {
			if _, _, err := s.rt.Tasks().Kill(ctx, pt.rid, o.agent, "cancelled by tasks/cancel"); err != nil {
				s.log.Warn("cancelling a task", "task", pt.rid, "err", err)
			}
		}
	}
	return &ackResult{ResultType: "complete"}, nil // tasks/cancel, tasks/update
}

// findExtTask finds the task id of the extension for a request, its owner held
// (the caller releases it): on a connection, among the connection's owner's
// tasks; elsewhere, in the scope whose handle the id carries, bound to the
// request's principal.
func (s *Server) findExtTask(req mcp.Request, id string) (*owner, *protoTask) {
	o := s.ownerOf(sessionOf(req))
	if o == nil || o.httpID != "" {
		_, handle, ok := strings.Cut(id, ".")
		if !ok {
			return nil, nil
		}
		o = s.findScope(handle, principalOf(req.GetExtra()))
	}
	if o == nil {
		return nil, nil
	}
	pt := o.task(id)
	if pt == nil || !pt.ext || !o.hold() {
		return nil, nil
	}
	return o, pt
}

// extGet answers tasks/get: the task, with its result inlined once it ended.
func (s *Server) extGet(ctx context.Context, o *owner, pt *protoTask, extra *mcp.RequestExtra) (mcp.Result, error) {
	if !pt.isEnded() {
		return pt.extInfo("complete", false), nil
	}
	callCtx, done, err := o.callContext(ctx, extra)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := s.extResult(callCtx, o, pt)
	if err != nil {
		return nil, err
	}
	info := pt.extInfo("complete", true)
	if info.Status != taskCancelled {
		info.Result = res
	}
	return info, nil
}

// extResult is the result tasks/get inlines: the final read, with the owner's
// pending notices appended the first time (later answers repeat that one).
func (s *Server) extResult(ctx context.Context, o *owner, pt *protoTask) (*mcp.CallToolResult, error) {
	pt.reading.Lock()
	defer pt.reading.Unlock()
	if pt.delivered != nil {
		return pt.delivered, nil
	}
	final, err := pt.finalResultLocked(ctx)
	if err != nil {
		return nil, err
	}
	res := *final
	res.Content = append([]mcp.Content(nil), res.Content...)
	appendNotices(&res, o.takeNotices())
	pt.delivered = &res
	return pt.delivered, nil
}
