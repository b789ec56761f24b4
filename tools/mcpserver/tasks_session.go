package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// Protocol tasks of 2025-11-25 sessions (SEP-1686); see tasks.go for what they
// map onto.
//
// A session that negotiated 2025-11-25 over a transport the Server reads itself
// (stdio, streamable HTTP; see carry.go) is offered capabilities.tasks (list,
// cancel, requests.tools.call) and sees execution.taskSupport "optional" on bash.
// A task-augmented tools/call of bash (params.task: {ttl}) then starts a taskrt
// task of the session's owner — its work the foreground call itself (same
// timeout, same output, same result), or with run_in_background the background
// task the call starts — and answers at once with CreateTaskResult, {task:
// {taskId, status: "working", createdAt, lastUpdatedAt, ttl, pollInterval}},
// _meta["taskrt/task_id"] naming the runtime id.
//
// Statuses: working while the work runs; then completed, or failed when a
// foreground call's result is a tool error (statusMessage is the result's last
// line: the reason or the status line), or cancelled once tasks/cancel,
// task_kill or the session's end asked it to stop — cancelled stays cancelled,
// whatever the process does next. On stdio each change is sent as
// notifications/tasks/status; the SDK's HTTP handler has no way to send a
// notification of a method it does not know, so HTTP clients poll.
//
// tasks/result blocks until the work ended and returns its result, with
// _meta["io.modelcontextprotocol/related-task"] and the session's pending
// notices; it counts as the model reading the task's end. tasks/get, tasks/list
// (the session's own, in creation order) and tasks/cancel (an ended task:
// -32602) as the revision says. Another session's id, an unknown one and an
// expired one all read alike: -32602 "task not found: <id>".

type createTaskResult struct {
	mcp.ResultBase
	Task taskInfo `json:"task"`
}

type taskResult struct {
	mcp.ResultBase
	taskInfo
}

type listTasksResult struct {
	mcp.ResultBase
	Tasks []taskInfo `json:"tasks"`
}

// taskInfo is the wire form of a 2025-11-25 Task.
type taskInfo struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (pt *protoTask) info() taskInfo {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return taskInfo{
		TaskID: pt.id, Status: pt.status, StatusMessage: pt.statusMessageLocked(),
		CreatedAt: stamp(pt.created), LastUpdatedAt: stamp(pt.updated),
		TTL: pt.ttl.Milliseconds(), PollInterval: taskPollInterval.Milliseconds(),
	}
}

// seed is the task as it was created: working. CreateTaskResult carries it even
// when the work has ended by the time it is sent (tasks/get says so then).
func (pt *protoTask) seed() taskInfo {
	info := pt.info()
	info.Status, info.StatusMessage, info.LastUpdatedAt = taskWorking, fmt.Sprintf("taskrt task %s: %s", pt.rid, taskWorking), info.CreatedAt
	return info
}

// tasksCapability is the 2025-11-25 server capability for task-augmented
// tools/call, tasks/list and tasks/cancel.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskCapable reports whether a tool may be called as a task.
func taskCapable(name string) bool { return name == tools.BashName }

// sessionTask serves a task-augmented tools/call: on a session offered protocol
// tasks it starts one; on any other it runs as a plain call (ok false).
func (s *Server) sessionTask(callCtx, ctx context.Context, c *call) (mcp.Result, bool, error) {
	if c.owner == nil || !c.owner.offersSessionTasks() {
		return nil, false, nil
	}
	if !taskCapable(c.name) {
		// -32602, not the -32601 the specification suggests: go-sdk's jsonrpc2 takes
		// any -32601 for "no such method" and answers with its own message.
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("tool %s cannot be called as a task (its execution.taskSupport is forbidden)", c.name)}
	}
	ttl, err := taskTTL(c.taskParams)
	if err != nil {
		return nil, true, err
	}
	var pt *protoTask
	if c.background {
		var r tools.Result
		if pt, r, err = s.startBackground(callCtx, c, c.raw, false, ttl); pt == nil && err == nil {
			return s.answer(ctx, c, r), true, nil // nothing started: the tool's answer
		}
	} else {
		pt, err = s.startForeground(callCtx, c, ttl)
	}
	if err != nil {
		if errors.Is(err, errSessionEnded) {
			return nil, true, err
		}
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: tools.Label(err.Error())}
	}
	return &createTaskResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaRuntimeID: string(pt.rid)}}, Task: pt.seed()}, true, nil
}

// taskTTL reads params.task's ttl (milliseconds; absent or null: the default),
// clamped to [minTaskTTL, maxTaskTTL].
func taskTTL(raw any) (time.Duration, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return 0, err
	}
	var task struct {
		TTL *float64 `json:"ttl"`
	}
	if err := json.Unmarshal(b, &task); err != nil {
		return 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.task must be an object {ttl?: milliseconds}"}
	}
	if task.TTL == nil {
		return defaultTaskTTL, nil
	}
	ttl := time.Duration(*task.TTL * float64(time.Millisecond))
	return min(max(ttl, minTaskTTL), maxTaskTTL), nil
}

// initializeTasks serves initialize: a session that negotiated 2025-11-25 or
// later over a transport that carries task params (a stdio stream, or HTTP) is
// offered protocol tasks.
func (s *Server) initializeTasks(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	var stamped string
	if p := req.GetParams(); p != nil {
		if meta := p.GetMeta(); meta != nil {
			stamped, _ = meta[metaStream].(string)
			delete(meta, metaStream)
		}
	}
	if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && ip.ProtocolVersion >= sessionlessVersion {
		ip.ProtocolVersion = lastSessionVersion // initialize opens a session: the last revision with them
	}
	res, err := next(ctx, method, req)
	if err != nil {
		return res, err
	}
	ir, ok := res.(*mcp.InitializeResult)
	o := s.ownerOf(sessionOf(req))
	if !ok || o == nil || ir.ProtocolVersion < tasksVersion || (stamped != streamHTTP && o.stream == nil) {
		return res, nil
	}
	o.mu.Lock()
	o.sessions = true
	o.mu.Unlock()
	return &patched{Result: res, patch: func(m map[string]json.RawMessage) error {
		var caps map[string]json.RawMessage
		if err := json.Unmarshal(m["capabilities"], &caps); err != nil {
			return err
		}
		caps["tasks"] = tasksCapability
		b, err := json.Marshal(caps)
		m["capabilities"] = b
		return err
	}}, nil
}

// markTaskTools adds execution.taskSupport "optional" to the task-capable tools
// of a tools/list result (absent means "forbidden").
func markTaskTools(m map[string]json.RawMessage) error {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &list); err != nil {
		return err
	}
	for _, t := range list {
		var name string
		if json.Unmarshal(t["name"], &name) == nil && taskCapable(name) {
			t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
		}
	}
	b, err := json.Marshal(list)
	m["tools"] = b
	return err
}

// ---- tasks/* ----

// findTask returns the owner of session ss and its protocol task the params
// name.
func (s *Server) findTask(ss *mcp.ServerSession, p *taskParams) (*owner, *protoTask, error) {
	if p == nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params.taskId"}
	}
	o := s.ownerOf(ss)
	if o == nil {
		return nil, nil, errSessionEnded
	}
	pt := o.task(p.TaskID)
	if pt == nil || pt.ext || !o.offersSessionTasks() {
		return nil, nil, errTaskNotFound(p.TaskID)
	}
	return o, pt, nil
}

func taskAnswer(pt *protoTask) *taskResult {
	return &taskResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaRuntimeID: string(pt.rid)}}, taskInfo: pt.info()}
}

func (s *Server) tasksGet(_ context.Context, ss *mcp.ServerSession, p *taskParams) (*taskResult, error) {
	_, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	return taskAnswer(pt), nil
}

// tasksResult waits for the work to end and returns its result. The wait ends
// early, with an error, when the session ends or (HTTP) the client closes the
// request.
func (s *Server) tasksResult(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*mcp.CallToolResult, error) {
	o, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	extra, _ := ctx.Value(extraKey{}).(*mcp.RequestExtra)
	callCtx, done, err := o.callContext(ctx, extra)
	if err != nil {
		return nil, err
	}
	defer done()
	select {
	case <-pt.ended:
	case <-callCtx.Done():
		return nil, context.Cause(callCtx)
	}
	final, err := pt.finalResult(callCtx)
	if err != nil {
		return nil, err
	}
	res := *final
	res.Content = slices.Clone(res.Content)
	meta := mcp.Meta{}
	for k, v := range res.Meta {
		meta[k] = v
	}
	meta[metaRelatedTask] = map[string]string{"taskId": pt.id}
	res.Meta = meta
	appendNotices(&res, o.takeNotices())
	return &res, nil
}

func (s *Server) tasksCancel(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*taskResult, error) {
	o, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	status, ok := pt.cancel()
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("cannot cancel task %s: it is already %s", tools.Label(p.TaskID), status)}
	}
	o.noteStatus(pt)
	if _, _, err := s.rt.Tasks().Kill(ctx, pt.rid, o.agent, "cancelled by tasks/cancel"); err != nil && !errors.Is(err, messages.ErrTaskNotFound) {
		s.log.Warn("cancelling a protocol task", "task", pt.rid, "err", err)
	}
	return taskAnswer(pt), nil
}

func (s *Server) tasksList(_ context.Context, ss *mcp.ServerSession, _ *listParams) (*listTasksResult, error) {
	o := s.ownerOf(ss)
	if o == nil {
		return nil, errSessionEnded
	}
	res := &listTasksResult{Tasks: []taskInfo{}}
	if !o.offersSessionTasks() {
		return res, nil
	}
	for _, pt := range o.taskList() {
		if !pt.ext {
			res.Tasks = append(res.Tasks, pt.info())
		}
	}
	return res, nil
}

// tasksUpdate answers a session's tasks/update: it belongs to the sessionless
// tasks extension, not to 2025-11-25.
func (s *Server) tasksUpdate(_ context.Context, _ *mcp.ServerSession, _ *taskParams) (*taskResult, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/update is not served in 2025-11-25 sessions"}
}
