package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// Protocol tasks: MCP's own task handles, mapped onto taskrt tasks, in the two
// forms clients speak.
//
//   - 2025-11-25 (SEP-1686), on sessions: a task-augmented tools/call of bash
//     (params.task: {ttl}) becomes a protocol task, answered at once with
//     CreateTaskResult; the client uses tasks/get, tasks/result, tasks/cancel
//     and tasks/list (tasks_session.go). Only a call the client sent
//     task-augmented becomes one, as the revision requires.
//   - 2026-07-28, the tasks extension (SEP-2663), for a client that declares
//     io.modelcontextprotocol/tasks in its request's capabilities: the server
//     decides. Every background start (run_in_background) is answered as a task at
//     once, and a foreground bash still running after task-after
//     (WithTaskAfter) is moved to the background and answered as one; the client
//     polls tasks/get, which inlines the result at the end, and stops it with
//     tasks/cancel (tasks_ext.go). A harness like Claude Code tracks such a task
//     itself, offers its own stop, and wakes an idle session when it ends.
//
// Each protocol task is a taskrt task of the call's owner, whose work is either
// a background task (its result at the end is what task_output returns then: the
// output not yet read and the status line, bounded as every read) or, for a
// task-augmented foreground call of 2025-11-25, the very foreground call (its
// result is that call's result). The model reaches the same task with every task
// tool: the protocol id is the runtime id itself where the connection fences it
// (stdio: one client per process), and "<runtime id>.<secret>" elsewhere — 130
// random bits, the scope's handle for a scope — which task tools take too.
//
// One completion notice per task: where the client delivers the result as its
// own notification (the extension), taskrt's own notice for it is never sent;
// where the model reads the task itself first (task_output, task_wait), the
// client's result is what task_output would return by then — no output twice,
// only the status line. In 2025-11-25, tasks/result counts as the model reading
// the task's end; a task the client never collected is announced like any
// background task. A record lives ttl (default defaultTaskTTL) after its task
// ended, and never past its owner.
const (
	// taskPollInterval is the pollInterval the Server suggests to task clients.
	taskPollInterval = 500 * time.Millisecond
	// defaultTaskTTL is how long a protocol task's record outlives its end when
	// the client asked for no ttl.
	defaultTaskTTL = time.Hour
	// maxTaskTTL caps the ttl a client may ask for.
	maxTaskTTL = 24 * time.Hour
	// minTaskTTL is the least ttl granted.
	minTaskTTL = time.Second
)

const (
	tasksVersion    = "2025-11-25" // the first revision with protocol-level tasks
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	metaRuntimeID   = "taskrt/task_id"
	metaScope       = "taskrt/scope"
	taskStatusNote  = "notifications/tasks/status"
)

// Protocol task statuses (input_required is never used: taskrt's tools ask
// nothing of the client).
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// protoTask is one protocol task. Its status machine:
//
//	working ──the work ended──▶ completed | failed (a foreground call's tool error, 2025-11-25)
//	   │                         | cancelled (a background task that was killed)
//	   └──tasks/cancel, task_kill, the owner's end──▶ cancelled (stays cancelled)
type protoTask struct {
	srv        *Server
	owner      *owner
	id         string // the protocol id (protocolID)
	rid        messages.TaskID
	ext        bool // the tasks extension's: its wire form; the client delivers the end itself
	background bool // the work is a background task; else a foreground call
	created    time.Time
	ttl        time.Duration
	ended      chan struct{} // closed when the work ended
	endOnce    sync.Once
	reading    sync.Mutex          // serializes taking the final result; protects delivered
	delivered  *mcp.CallToolResult // the extension's inlined result, as first answered

	mu       sync.Mutex // protects the fields below
	status   string
	message  string // statusMessage once terminal
	updated  time.Time
	result   *mcp.CallToolResult // the result once taken: the call's, or the final read
	expiry   *time.Timer         // drops the record ttl after the end
	added    bool                // in its owner's table
	finished bool                // the work ended
	changed  bool                // the end changed the status (a notification is due)
	gone     bool                // its owner ended: no expiry, no notification
}

func (s *Server) newProtoTask(o *owner, rid messages.TaskID, ext, background bool, ttl time.Duration) *protoTask {
	now := time.Now()
	return &protoTask{srv: s, owner: o, id: protocolID(o, rid), rid: rid, ext: ext, background: background,
		created: now, ttl: ttl, ended: make(chan struct{}), status: taskWorking, updated: now}
}

// protocolID is the protocol id of rid, a task of o: rid itself on a connection
// (one client: nobody else can name it), else rid and a secret after a dot — a
// scope's handle (a tasks/get names no scope: its id is the scope's capability,
// and the task tools take it as such), or 130 random bits for a session.
func protocolID(o *owner, rid messages.TaskID) string {
	switch {
	case o.isScope():
		return string(rid) + "." + o.handle
	case o.httpID != "":
		return string(rid) + "." + rand.Text()
	}
	return string(rid)
}

// statusMessage is what a task's status says to a person (or a model) reading
// it.
func (pt *protoTask) statusMessageLocked() string {
	if pt.status == taskWorking || pt.message == "" && pt.status == taskCancelled {
		return fmt.Sprintf("taskrt task %s: %s", pt.rid, pt.status)
	}
	return pt.message
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

// finish records a foreground call's result; a cancelled task stays cancelled.
func (pt *protoTask) finish(res *mcp.CallToolResult) {
	pt.mu.Lock()
	pt.result = res
	last := lastLine(res)
	changed := false
	switch {
	case pt.status == taskCancelled:
		pt.message = "cancelled; " + last
	case res.IsError:
		pt.status, pt.message, changed = taskFailed, last, true
	default:
		pt.status, pt.message, changed = taskCompleted, last, true
	}
	pt.updated = time.Now()
	pt.mu.Unlock()
	pt.workEnded(changed)
}

// settle records the end of a background task (its snapshot at settlement): the
// result is read only when the client asks for it.
func (pt *protoTask) settle(snap messages.Snapshot) {
	pt.mu.Lock()
	changed := false
	if pt.status == taskWorking {
		pt.status, changed = taskCompleted, true
		if snap.Status == messages.Killed {
			pt.status = taskCancelled
		}
	}
	pt.message = tools.StatusLine(snap)
	pt.updated = time.Now()
	pt.mu.Unlock()
	pt.workEnded(changed)
}

// workEnded records that the work ended; the record ends (end) once it is also
// in its owner's table.
func (pt *protoTask) workEnded(changed bool) {
	pt.mu.Lock()
	pt.finished = true
	pt.changed = pt.changed || changed
	added := pt.added
	pt.mu.Unlock()
	if added {
		pt.end()
	}
}

// end is the end of the work, once the task is in its owner's table: the
// record's expiry starts, and the status change is sent where the transport
// carries notifications (2025-11-25 on stdio).
func (pt *protoTask) end() {
	pt.endOnce.Do(func() {
		pt.mu.Lock()
		if !pt.gone {
			pt.expiry = time.AfterFunc(pt.ttl, func() { pt.owner.dropTask(pt) })
		}
		changed := pt.changed
		pt.mu.Unlock()
		close(pt.ended)
		if changed && !pt.ext {
			pt.owner.noteStatus(pt)
		}
	})
}

// forget is the end of the task's owner: no expiry, no notification.
func (pt *protoTask) forget() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.gone = true
	if pt.expiry != nil {
		pt.expiry.Stop()
	}
}

// isEnded reports whether the work has ended.
func (pt *protoTask) isEnded() bool {
	select {
	case <-pt.ended:
		return true
	default:
		return false
	}
}

// finalResult is the task's result once its work ended: a foreground call's
// own, or — taken once, on the first request that needs it — what task_output
// returns for a background task then: its output not yet read, and its status
// line. The read counts as the model reading the task's end, so no taskrt notice
// follows it.
func (pt *protoTask) finalResult(ctx context.Context) (*mcp.CallToolResult, error) {
	pt.reading.Lock()
	defer pt.reading.Unlock()
	return pt.finalResultLocked(ctx)
}

// finalResultLocked is finalResult with pt.reading held.
func (pt *protoTask) finalResultLocked(ctx context.Context) (*mcp.CallToolResult, error) {
	pt.mu.Lock()
	res := pt.result
	pt.mu.Unlock()
	if res != nil {
		if !pt.background {
			// A foreground call's end, seen: a wait that returns the terminal state
			// marks the task reported (the runtime settles it just after the call's
			// result is recorded).
			if _, err := pt.srv.rt.Tasks().Wait(ctx, pt.rid, pt.owner.agent, time.Minute); err != nil && !errors.Is(err, messages.ErrTaskNotFound) {
				return nil, err
			}
		}
		return res, nil
	}
	args, _ := json.Marshal(map[string]string{"task_id": string(pt.rid)})
	r := pt.srv.tool(tools.TaskOutputName).Call(ctx, pt.owner.agent, args)
	if ctx.Err() != nil { // the read was cut short: it is taken again next time
		return nil, context.Cause(ctx)
	}
	res = toResult(r, nil)
	pt.mu.Lock()
	pt.result = res
	pt.mu.Unlock()
	return res, nil
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

// noteStatus hands pt's status to the owner's sender, for notifications/tasks/
// status where the transport allows (stdio). Notifications are a courtesy (the
// client polls): when the sender is behind, this one is dropped.
func (o *owner) noteStatus(pt *protoTask) {
	pt.mu.Lock()
	added := pt.added
	pt.mu.Unlock()
	if o.stream == nil || o.notes == nil || !added {
		return
	}
	select {
	case o.notes <- pt:
	default:
	}
}

// ---- starting ----

// runAsTask runs c as a protocol task where it becomes one; ok is false when it
// does not (the call then runs as any other).
func (s *Server) runAsTask(callCtx, ctx context.Context, c *call) (res mcp.Result, ok bool, err error) {
	switch {
	case c.asked:
		return s.sessionTask(callCtx, ctx, c)
	case !c.extTasks || c.owner == nil:
		return nil, false, nil
	case c.background:
		res, err = s.extStart(callCtx, ctx, c, c.raw)
		return res, true, err
	case c.name == tools.BashName:
		return s.extForeground(callCtx, ctx, c)
	}
	return nil, false, nil
}

// startBackground starts c's background task and, when it started, the protocol
// task that tracks it; else it returns the tool's answer.
func (s *Server) startBackground(callCtx context.Context, c *call, args json.RawMessage, ext bool, ttl time.Duration) (*protoTask, tools.Result, error) {
	r := c.tool.Call(callCtx, c.agent(), args)
	if err := cutShort(callCtx); err != nil {
		return nil, r, err
	}
	h, ok := r.Data.(tools.Handle)
	if !ok {
		return nil, r, nil
	}
	pt := s.newProtoTask(c.owner, h.TaskID, ext, true, ttl)
	if !c.owner.addTask(pt) {
		return nil, r, errSessionEnded
	}
	s.bgTasks.Store(pt.rid, pt)
	if rr := s.recordStart(callCtx, c.owner, r); rr.Data == nil {
		// A cluster scope's record could not keep it: killed, answered so.
		s.bgTasks.Delete(pt.rid)
		c.owner.dropTask(pt)
		return nil, rr, nil
	}
	if snap, err := s.rt.Tasks().Get(callCtx, pt.rid, c.owner.agent); err == nil && snap.Status.Terminal() {
		s.settled(snap) // it ended before it was tracked
	}
	return pt, r, nil
}

// settled is the runtime's listener: the end of a background protocol task.
func (s *Server) settled(snap messages.Snapshot) {
	if v, ok := s.bgTasks.LoadAndDelete(snap.ID); ok {
		v.(*protoTask).settle(snap)
	}
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

// startForeground starts a protocol task whose work is the foreground call c: a
// taskrt task of the owner, kind bash (the tool's name), the command as label,
// whose result pt records before the runtime hears of the end.
func (s *Server) startForeground(ctx context.Context, c *call, ttl time.Duration) (*protoTask, error) {
	var command struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(c.raw, &command) // the call itself reports bad arguments
	label := tools.Label(command.Command)
	if label == "" {
		label = c.tool.Name()
	}
	// The runtime id is known once Start returns; the record is added to its
	// owner's table then, and its end takes effect from then (workEnded).
	now := time.Now()
	pt := &protoTask{srv: s, owner: c.owner, created: now, ttl: ttl, ended: make(chan struct{}), status: taskWorking, updated: now}
	spec := messages.Spec{Kind: c.tool.Name(), Label: label, Owner: c.owner.agent, Run: func() (messages.Hooks, error) {
		runCtx, cancel := context.WithCancelCause(s.ctx)
		done := make(chan messages.Outcome, 1)
		go func() {
			defer cancel(nil)
			capture := &runCapture{}
			res := toResult(c.tool.Call(context.WithValue(runCtx, captureKey{}, capture), c.owner.agent, c.raw), nil)
			o := messages.Outcome{Status: messages.Failed, Detail: lastLine(res), Output: resultText(res)}
			if capture.ok && capture.res.Outcome.Status != "" {
				o.Status, o.Detail = capture.res.Outcome.Status, capture.res.Outcome.Detail
			}
			pt.finish(res)
			done <- o
		}()
		return messages.Hooks{
			Cancel: func(reason string) error {
				if _, ok := pt.cancel(); ok {
					pt.owner.noteStatus(pt)
				}
				cancel(errors.New(reason))
				return nil
			},
			Done: done,
		}, nil
	}}
	id, err := s.rt.Tasks().Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	pt.mu.Lock()
	pt.rid, pt.id = id, protocolID(c.owner, id)
	pt.mu.Unlock()
	if !c.owner.addTask(pt) {
		return nil, errSessionEnded
	}
	return pt, nil
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

// errTaskNotFound is the answer for an unknown protocol task id, another
// owner's, one whose record expired, and any id where protocol tasks are not
// offered: the same error for each, so that no id's existence leaks.
func errTaskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found: " + tools.Label(id)}
}

// ---- the SDK's extension points ----

// patched is a result whose JSON is the SDK's, edited: how fields go-sdk v1.8.0
// does not model (capabilities.tasks, Tool.execution, resultType) reach the
// client.
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

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type extraKey struct{}

// addTaskMethods registers tasks/* and the receiving middleware that serves
// tools/call and patches initialize and tools/list.
func (s *Server) addTaskMethods() error {
	s.mcp.AddReceivingMiddleware(s.receive)
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/get", s.tasksGet),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/result", s.tasksResult),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/cancel", s.tasksCancel),
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/list", s.tasksList),
		// tasks/update is the sessionless tasks extension's (tasks_ext.go).
		mcp.AddReceivingCustomMethod(s.mcp, "tasks/update", s.tasksUpdate),
	)
}

// receive is receiving middleware: every tools/call goes to callTool; a
// sessionless request to sessionlessMethod; initialize offers 2025-11-25 tasks
// to the sessions that can carry them; tools/list marks the task-capable tools
// for them; and the request's extra (its HTTP header) is handed to the tasks/*
// handlers.
func (s *Server) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if sessionless(req) {
			return s.sessionlessMethod(ctx, next, method, req)
		}
		switch method {
		case "initialize":
			return s.initializeTasks(ctx, next, method, req)
		case "tools/list":
			res, err := next(ctx, method, req)
			if o := s.ownerOf(sessionOf(req)); err != nil || o == nil || !o.offersSessionTasks() {
				return res, err
			}
			return &patched{Result: res, patch: markTaskTools}, nil
		case "tools/call":
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
				return s.callTool(ctx, cr)
			}
		case "tasks/get", "tasks/result", "tasks/cancel", "tasks/list":
			ctx = context.WithValue(ctx, extraKey{}, req.GetExtra())
		}
		return next(ctx, method, req)
	}
}
