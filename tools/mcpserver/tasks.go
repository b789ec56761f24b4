package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// Protocol-level tasks (MCP 2025-11-25, SEP-1686) on sessions, mapped onto
// taskrt tasks.
//
// A session that negotiated 2025-11-25 over a transport the Server reads itself
// (stdio, streamable HTTP; see carry.go) is offered capabilities.tasks (list,
// cancel, requests.tools.call) and sees execution.taskSupport "optional" on bash.
// A task-augmented tools/call of bash (params.task: {ttl}) then:
//
//  1. starts a taskrt task of the session's owner, kind "bash" (id bash-N, the
//     per-kind counter every bash task uses), whose work is the very foreground
//     call — same timeout, same output, same result — so that tasks/result is by
//     construction the CallToolResult the call would have returned;
//  2. answers at once with CreateTaskResult, {task: {taskId, status: "working",
//     createdAt, lastUpdatedAt, ttl, pollInterval}}.
//
// The MCP task id is 128 random bits (crypto/rand.Text), never the runtime's id:
// it is looked up in the session's own table, so another session's id reads
// exactly like an unknown one (-32602 "task not found: <id>"). The table maps it
// to the runtime's id, which every tasks/get, tasks/cancel and CreateTaskResult
// carries in _meta["taskrt/task_id"] and a working task's statusMessage names, so
// task_output, task_kill and task_list reach the same task.
//
// Statuses: working while the call runs; then completed, or failed when the
// result is a tool error (isError; statusMessage is the result's last line: the
// reason or the status line), or cancelled once tasks/cancel, task_kill or the
// session's end asked it to stop — cancelled stays cancelled, whatever the
// process does next. On stdio each change is sent as notifications/tasks/status;
// the SDK's HTTP handler has no way to send a notification of a method it does
// not know, so HTTP clients poll (pollInterval).
//
// tasks/result blocks until the call has ended and returns its result, with
// _meta["io.modelcontextprotocol/related-task"]; it counts as the model reading
// the task's end, so the session gets no completion notice for it. A task the
// client never collected is announced like any background task, on the
// session's next tool result. A record is kept ttl (default DefaultTaskTTL, at
// most MaxTaskTTL) after its task ended, then tasks/get reads it as unknown; the
// session's end drops every record and kills every task with the owner.
const (
	// TaskPollInterval is the pollInterval the Server suggests to task clients.
	TaskPollInterval = 500 * time.Millisecond
	// DefaultTaskTTL is how long a protocol task's record outlives its end when
	// the client asked for no ttl.
	DefaultTaskTTL = time.Hour
	// MaxTaskTTL caps the ttl a client may ask for.
	MaxTaskTTL = 24 * time.Hour
	// MinTaskTTL is the least ttl granted.
	MinTaskTTL = time.Second
)

const (
	tasksVersion    = "2025-11-25" // the first revision with protocol-level tasks
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	metaRuntimeID   = "taskrt/task_id"
	taskStatusNote  = "notifications/tasks/status"
)

// MCP task statuses (input_required is never used: taskrt's tools ask nothing of
// the client).
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// protoTask is one protocol task: its MCP id, the runtime task it maps to, and
// the call's result once it ended.
type protoTask struct {
	id      string // the MCP task id: 128 random bits
	created time.Time
	ttl     time.Duration
	done    chan struct{} // closed when result is set

	mu      sync.Mutex // protects the fields below
	rid     messages.TaskID
	status  string
	message string // statusMessage once terminal
	updated time.Time
	result  *mcp.CallToolResult
	added   bool        // in its table: notifications and expiry start
	expiry  *time.Timer // drops the record ttl after the end
}

// taskInfo is the wire form of an MCP Task.
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

func (pt *protoTask) info() (taskInfo, messages.TaskID) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	msg := pt.message
	if pt.status == taskWorking || msg == "" && pt.status == taskCancelled {
		msg = fmt.Sprintf("taskrt task %s: %s", pt.rid, pt.status)
	}
	return taskInfo{
		TaskID: pt.id, Status: pt.status, StatusMessage: msg,
		CreatedAt: stamp(pt.created), LastUpdatedAt: stamp(pt.updated),
		TTL: pt.ttl.Milliseconds(), PollInterval: TaskPollInterval.Milliseconds(),
	}, pt.rid
}

// cancel moves a working task to cancelled; it reports false (and the status)
// when the task was already terminal.
func (pt *protoTask) cancel() (string, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.status != taskWorking {
		return pt.status, false
	}
	pt.status, pt.updated = taskCancelled, time.Now()
	return pt.status, true
}

// finish records the call's result; a cancelled task stays cancelled.
func (pt *protoTask) finish(res *mcp.CallToolResult) (changed bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.result = res
	last := lastLine(res)
	switch {
	case pt.status == taskCancelled:
		pt.message = "cancelled; " + last
	case res.IsError:
		pt.status, pt.message, changed = taskFailed, last, true
	default:
		pt.status, pt.message, changed = taskCompleted, last, true
	}
	pt.updated = time.Now()
	close(pt.done)
	return changed
}

// lastLine is the last line of a result's text: a tool error's reason, or the
// status line of a command's output.
func lastLine(res *mcp.CallToolResult) string {
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	text = strings.TrimRight(text, "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	return tools.Label(text)
}

// taskTable is one session's protocol tasks.
type taskTable struct {
	srv    *Server
	sess   *session
	stream *stream // where status notifications go; nil over HTTP

	mu     sync.Mutex // protects byID, order and closed
	byID   map[string]*protoTask
	order  []*protoTask
	closed bool
}

func newTaskTable(s *Server, sess *session, st *stream) *taskTable {
	return &taskTable{srv: s, sess: sess, stream: st, byID: map[string]*protoTask{}}
}

func (tt *taskTable) get(id string) *protoTask {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.byID[id]
}

// add puts a started task into the table; false once the session ended.
func (tt *taskTable) add(pt *protoTask) bool {
	tt.mu.Lock()
	if tt.closed {
		tt.mu.Unlock()
		return false
	}
	tt.byID[pt.id] = pt
	tt.order = append(tt.order, pt)
	tt.mu.Unlock()
	pt.mu.Lock()
	pt.added = true
	ended := pt.result != nil
	pt.mu.Unlock()
	if ended { // it ended before it was added: what finish skipped
		tt.ended(pt, true)
	}
	return true
}

// ended is the end of pt's call: its status notification (when it changed) and
// the expiry of its record.
func (tt *taskTable) ended(pt *protoTask, changed bool) {
	pt.mu.Lock()
	if !pt.added {
		pt.mu.Unlock()
		return // add does it
	}
	if pt.expiry == nil {
		pt.expiry = time.AfterFunc(pt.ttl, func() { tt.drop(pt) })
	}
	pt.mu.Unlock()
	if changed {
		tt.notify(pt)
	}
}

func (tt *taskTable) drop(pt *protoTask) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.byID[pt.id] == pt {
		delete(tt.byID, pt.id)
		tt.order = slices.DeleteFunc(tt.order, func(p *protoTask) bool { return p == pt })
	}
}

func (tt *taskTable) list() []taskInfo {
	tt.mu.Lock()
	order := slices.Clone(tt.order)
	tt.mu.Unlock()
	infos := make([]taskInfo, 0, len(order))
	for _, pt := range order {
		info, _ := pt.info()
		infos = append(infos, info)
	}
	return infos
}

// notify sends pt's status as notifications/tasks/status, where the transport
// allows (stdio).
func (tt *taskTable) notify(pt *protoTask) {
	if tt.stream == nil || tt.sess.ctx.Err() != nil {
		return
	}
	info, _ := pt.info()
	if err := tt.stream.notify(taskStatusNote, info); err != nil {
		tt.srv.log.Debug("sending a task status notification", "err", err)
	}
}

// close drops every record at the session's end (its tasks die with the owner).
func (tt *taskTable) close() {
	tt.mu.Lock()
	tt.closed = true
	order := tt.order
	tt.byID, tt.order = map[string]*protoTask{}, nil
	tt.mu.Unlock()
	for _, pt := range order {
		pt.mu.Lock()
		if pt.expiry != nil {
			pt.expiry.Stop()
		}
		pt.mu.Unlock()
	}
}

// ---- the SDK's extension points ----

// patched is a result whose JSON is the SDK's, edited: how fields go-sdk v1.8.0
// does not model (capabilities.tasks, Tool.execution) reach the client.
type patched struct {
	mcp.Result
	patch func(map[string]json.RawMessage) error
}

func (p *patched) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := p.patch(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// tasksCapability is the 2025-11-25 server capability for task-augmented
// tools/call, tasks/list and tasks/cancel.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskCapable reports whether a tool may be called as a task.
func taskCapable(name string) bool { return name == tools.BashName }

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

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

type extraKey struct{}

// addTaskMethods registers tasks/* and the receiving middleware for initialize,
// tools/list and tools/call.
func (s *Server) addTaskMethods() error {
	s.mcp.AddReceivingMiddleware(s.protocolTasks)
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/get", s.tasksGet),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/result", s.tasksResult),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/cancel", s.tasksCancel),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/list", s.tasksList),
		// tasks/update is the sessionless tasks extension's (tasksext.go).
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/update", s.tasksUpdate),
	)
}

// protocolTasks is receiving middleware: it offers the capability at initialize
// (to sessions that can carry it), marks the task-capable tools in tools/list,
// turns a task-augmented tools/call into a task, and hands the request's extra
// (its HTTP header) to the tasks/* handlers.
func (s *Server) protocolTasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if sessionless(req) {
			return s.sessionlessMethod(ctx, next, method, req)
		}
		switch method {
		case "initialize":
			return s.initializeTasks(ctx, next, method, req)
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil || s.taskTable(req) == nil {
				return res, err
			}
			return &patched{Result: res, patch: markTaskTools}, nil
		case "tools/call":
			return s.callAsTask(ctx, next, method, req)
		case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list":
			ctx = context.WithValue(ctx, extraKey{}, req.GetExtra())
		}
		return next(ctx, method, req)
	}
}

func (s *Server) taskTable(req mcp.Request) *taskTable {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok {
		return nil
	}
	if sess := s.lookup(ss); sess != nil {
		return sess.tasks.Load()
	}
	return nil
}

func (s *Server) initializeTasks(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	var key string
	if p := req.GetParams(); p != nil {
		if meta := p.GetMeta(); meta != nil {
			key, _ = meta[metaStream].(string)
			delete(meta, metaStream)
		}
	}
	if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && ip.ProtocolVersion >= SessionlessVersion {
		ip.ProtocolVersion = lastSessionVersion // initialize opens a session: the last revision with them
	}
	var st *stream
	carried := key == streamHTTP
	if key != "" && !carried {
		st = s.takeStream(key)
		carried = st != nil
	}
	res, err := next(ctx, method, req)
	if err != nil || !carried {
		return res, err
	}
	ir, ok := res.(*mcp.InitializeResult)
	ss, _ := req.GetSession().(*mcp.ServerSession)
	sess := s.lookup(ss)
	if !ok || sess == nil || ir.ProtocolVersion < tasksVersion {
		return res, err
	}
	sess.tasks.Store(newTaskTable(s, sess, st))
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

// callAsTask serves a tools/call: one that asked for a task (params.task,
// carried in _meta) on a session with protocol tasks starts one; any other goes
// on as before.
func (s *Server) callAsTask(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	cr, ok := req.(*mcp.CallToolRequest)
	if !ok || cr.Params == nil {
		return next(ctx, method, req)
	}
	raw, asked := cr.Params.Meta[metaTask]
	if asked {
		delete(cr.Params.Meta, metaTask)
	}
	tt := s.taskTable(req)
	if !asked || tt == nil {
		return next(ctx, method, req)
	}
	t := s.tool(cr.Params.Name)
	if t == nil {
		return next(ctx, method, req) // the SDK's unknown-tool error
	}
	if !taskCapable(t.Name()) {
		// -32602, not the -32601 the specification suggests: go-sdk's jsonrpc2 takes
		// any -32601 for "no such method" and answers with its own message.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("tool %s cannot be called as a task (its execution.taskSupport is forbidden)", t.Name())}
	}
	ttl, err := taskTTL(raw)
	if err != nil {
		return nil, err
	}
	var args struct {
		Command         string `json:"command"`
		RunInBackground bool   `json:"run_in_background"`
	}
	_ = json.Unmarshal(cr.Params.Arguments, &args) // the call itself reports bad arguments
	if args.RunInBackground {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "a task-augmented call runs the command as a task already: leave out run_in_background"}
	}
	return tt.start(ctx, t, cr.Params.Arguments, args.Command, ttl)
}

// taskTTL reads params.task's ttl (milliseconds; absent or null: the default),
// clamped to [MinTaskTTL, MaxTaskTTL].
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
		return DefaultTaskTTL, nil
	}
	ttl := time.Duration(*task.TTL * float64(time.Millisecond))
	return min(max(ttl, MinTaskTTL), MaxTaskTTL), nil
}

func (s *Server) tool(name string) tools.Tool {
	for _, t := range s.tools {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

// runCapture receives the producer's result of the foreground command a
// protocol task runs (see runner.Run).
type runCapture struct {
	res bash.Result
	ok  bool
}

type captureKey struct{}

func captured(ctx context.Context, res bash.Result) {
	if c, ok := ctx.Value(captureKey{}).(*runCapture); ok {
		c.res, c.ok = res, true
	}
}

// start starts the task: a taskrt task of the session's owner whose work is the
// foreground call.
func (tt *taskTable) start(ctx context.Context, t tools.Tool, args json.RawMessage, command string, ttl time.Duration) (mcp.Result, error) {
	s, sess := tt.srv, tt.sess
	pt := newProtoTask(ttl)
	spec := s.taskSpec(sess.owner, t, args, command, pt, func(changed bool) { tt.ended(pt, changed) }, func() { tt.notify(pt) })
	id, err := s.rt.Tasks().Start(ctx, spec)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: tools.Label(err.Error())}
	}
	pt.mu.Lock()
	pt.rid = id
	pt.mu.Unlock()
	if !tt.add(pt) {
		return nil, errSessionEnded
	}
	return &createTaskResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaRuntimeID: string(id)}}, Task: pt.seed()}, nil
}

// seed is the task as it was created: working. CreateTaskResult carries it even
// when the call has ended by the time it is sent (tasks/get says so then).
func (pt *protoTask) seed() taskInfo {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return taskInfo{
		TaskID: pt.id, Status: taskWorking, StatusMessage: fmt.Sprintf("taskrt task %s: %s", pt.rid, taskWorking),
		CreatedAt: stamp(pt.created), LastUpdatedAt: stamp(pt.created),
		TTL: pt.ttl.Milliseconds(), PollInterval: TaskPollInterval.Milliseconds(),
	}
}

func newProtoTask(ttl time.Duration) *protoTask {
	now := time.Now()
	return &protoTask{id: rand.Text(), created: now, ttl: ttl, done: make(chan struct{}), status: taskWorking, updated: now}
}

// taskSpec is the spec of a protocol task's runtime task: kind bash (the tool's
// name), the command as label, owned by owner; its work is the foreground call of
// t, whose result pt records before the runtime hears of the end. ended follows
// the record (changed: the status changed); cancelled follows a cancel that moved
// pt to cancelled.
func (s *Server) taskSpec(owner messages.AgentID, t tools.Tool, args json.RawMessage, command string, pt *protoTask, ended func(changed bool), cancelled func()) messages.Spec {
	label := tools.Label(command)
	if label == "" {
		label = t.Name()
	}
	return messages.Spec{Kind: t.Name(), Label: label, Owner: owner, Run: func() (messages.Hooks, error) {
		runCtx, cancel := context.WithCancelCause(s.ctx)
		done := make(chan messages.Outcome, 1)
		go func() {
			defer cancel(nil)
			capture := &runCapture{}
			res := toResult(t.Call(context.WithValue(runCtx, captureKey{}, capture), owner, args), nil)
			o := messages.Outcome{Status: messages.Failed, Detail: lastLine(res), Output: resultText(res)}
			if capture.ok && capture.res.Outcome.Status != "" {
				o.Status, o.Detail = capture.res.Outcome.Status, capture.res.Outcome.Detail
			}
			ended(pt.finish(res))
			done <- o
		}()
		return messages.Hooks{
			Cancel: func(reason string) error {
				if _, ok := pt.cancel(); ok {
					cancelled()
				}
				cancel(errors.New(reason))
				return nil
			},
			Done: done,
		}, nil
	}}
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ---- tasks/* ----

// errTaskNotFound is the answer for an unknown task id, another session's, one
// whose record expired, and any id on a session without protocol tasks: the same
// error for each, so that no id's existence leaks.
func errTaskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found: " + tools.Label(id)}
}

// findTask returns the session and the task the params name.
func (s *Server) findTask(ss *mcp.ServerSession, p *taskParams) (*session, *taskTable, *protoTask, error) {
	if p == nil {
		return nil, nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params.taskId"}
	}
	sess := s.lookup(ss)
	if sess == nil {
		return nil, nil, nil, errSessionEnded
	}
	tt := sess.tasks.Load()
	if tt == nil {
		return nil, nil, nil, errTaskNotFound(p.TaskID)
	}
	pt := tt.get(p.TaskID)
	if pt == nil {
		return nil, nil, nil, errTaskNotFound(p.TaskID)
	}
	return sess, tt, pt, nil
}

func taskAnswer(pt *protoTask) *taskResult {
	info, rid := pt.info()
	return &taskResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{metaRuntimeID: string(rid)}}, taskInfo: info}
}

func (s *Server) tasksGet(_ context.Context, ss *mcp.ServerSession, p *taskParams) (*taskResult, error) {
	_, _, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	return taskAnswer(pt), nil
}

// tasksResult waits for the call to end and returns its result. The wait ends
// early, with an error, when the session ends or (HTTP) the client closes the
// request.
func (s *Server) tasksResult(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*mcp.CallToolResult, error) {
	sess, _, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	extra, _ := ctx.Value(extraKey{}).(*mcp.RequestExtra)
	callCtx, done, err := sess.callContext(ctx, extra)
	if err != nil {
		return nil, err
	}
	defer done()
	select {
	case <-pt.done:
	case <-callCtx.Done():
		return nil, context.Cause(callCtx)
	}
	_, rid := pt.info()
	// The model has this task's end now: a wait that returns the terminal state
	// marks the task reported, so no completion notice follows. (The runtime
	// settles the task just after the call's result is recorded.)
	if _, err := s.rt.Tasks().Wait(callCtx, rid, sess.owner, time.Minute); err != nil && !errors.Is(err, messages.ErrTaskNotFound) {
		return nil, err
	}
	pt.mu.Lock()
	res := *pt.result
	pt.mu.Unlock()
	res.Content = slices.Clone(res.Content)
	meta := mcp.Meta{}
	for k, v := range res.Meta {
		meta[k] = v
	}
	meta[metaRelatedTask] = map[string]string{"taskId": pt.id}
	res.Meta = meta
	appendNotices(&res, sess.takeNotices())
	return &res, nil
}

func (s *Server) tasksCancel(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*taskResult, error) {
	sess, tt, pt, err := s.findTask(ss, p)
	if err != nil {
		return nil, err
	}
	status, ok := pt.cancel()
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("cannot cancel task %s: it is already %s", tools.Label(p.TaskID), status)}
	}
	tt.notify(pt)
	_, rid := pt.info()
	if _, err := s.rt.Tasks().Kill(ctx, rid, sess.owner, "cancelled by tasks/cancel"); err != nil && !errors.Is(err, messages.ErrTaskNotFound) {
		s.log.Warn("cancelling a protocol task", "task", rid, "err", err)
	}
	return taskAnswer(pt), nil
}

func (s *Server) tasksList(_ context.Context, ss *mcp.ServerSession, _ *listParams) (*listTasksResult, error) {
	sess := s.lookup(ss)
	if sess == nil {
		return nil, errSessionEnded
	}
	res := &listTasksResult{Tasks: []taskInfo{}}
	if tt := sess.tasks.Load(); tt != nil {
		res.Tasks = tt.list()
	}
	return res, nil
}

// tasksUpdate answers a session's tasks/update: it belongs to the sessionless
// tasks extension, not to 2025-11-25.
func (s *Server) tasksUpdate(_ context.Context, _ *mcp.ServerSession, _ *taskParams) (*taskResult, error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/update is not served in 2025-11-25 sessions"}
}
