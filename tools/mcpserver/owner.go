package mcpserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
)

// An owner is one owner agent of the Server's runtime and what the Server keeps
// for it: the notices waiting for a result to ride on, its protocol tasks, and
// its end. Three things own tasks over MCP, and each is an owner:
//
//   - a connection served by Serve or Connect (stdio above all): one client per
//     connection, so every call that names no scope acts as the connection's
//     owner, whatever revision it speaks. Registered when the connection is made,
//     ended when it ends.
//   - an HTTP session (a revision with sessions, over streamable HTTP):
//     registered at initialize, ended by a DELETE, the idle timeout or Close.
//   - a scope (the sessionless revision over HTTP, where nothing else tells two
//     clients apart): minted by a background start that named none, found by its
//     handle, held by an idle lease; ended when the lease lapses, by scope_close,
//     or by Close.
//
// The three differ only in how they are found and when they end; notices,
// protocol tasks and the end itself are this type's.
type owner struct {
	srv   *Server
	agent messages.AgentID // "mcp-N" (a connection or a session) or "scope-N"
	began time.Time

	// ctx ends when the owner ends; every call of the owner ends with it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	ended  chan struct{} // closed once the agent is disposed

	ss     *mcp.ServerSession // a connection's or a session's; nil for a scope
	httpID string             // an HTTP session's id (the Mcp-Session-Id header)
	stream *stream            // a stdio connection's: where task status notifications go
	logs   chan string        // notices for the log sender; nil for a scope
	notes  chan *protoTask    // status notifications for the sender; nil without a stream

	handle    string // a scope's handle (crypto/rand.Text); "" otherwise
	principal string // the authenticated principal a scope is bound to
	homeEpoch uint64 // with a placement: the frontend's lease epoch the scope is homed under
	gen       uint64 // with a placement: the scope's epoch (remote.WithScopes)
	pHash     string // with a placement: placement.PrincipalHash of the principal

	saveMu sync.Mutex // with a placement: one save of the scope's record at a time (takeover.go)

	mu       sync.Mutex // protects the fields below
	pending  []notice
	tasks    map[string]*protoTask          // protocol tasks by protocol id (tasks.go)
	byRID    map[messages.TaskID]*protoTask // the same, by runtime id
	order    []*protoTask                   // the same, in creation order
	sessions bool                           // 2025-11-25 protocol tasks are offered to it
	inflight int                            // a scope's requests still running: they hold its lease
	lease    *time.Timer                    // a scope's idle lease; nil without an idle timeout
	over     bool                           // the owner ended: no notice, no task, no request
	sent     []messages.TaskID              // with a placement: tasks whose notice went on a result not yet written
	told     map[messages.TaskID]bool       // with a placement: tasks whose end the model has had
}

// notice is a pending completion notice.
type notice struct {
	id   messages.TaskID // "" if the text names no task (it then always goes out)
	text string
}

// logLogger is the logger name of the notices sent as notifications/message.
const logLogger = "taskrt"

// logBuffer bounds the notices waiting to be sent as log messages, per owner.
// Log messages are a courtesy: when a client does not read them fast enough, the
// extra ones are dropped (the notice still reaches the next tool result).
const logBuffer = 64

// errSessionEnded fails a call that arrives, or is still running, when its owner
// ends (the client disconnected, deleted the session, let it idle out or closed
// the scope, or the server is shutting down).
var errSessionEnded = errors.New("taskrt-mcp: the session has ended")

// errClientGone ends a call whose HTTP request was closed by the client: its result
// can no longer be delivered.
var errClientGone = errors.New("taskrt-mcp: the client closed the request")

func (s *Server) newOwner(agent messages.AgentID) *owner {
	o := &owner{srv: s, agent: agent, began: time.Now(), ended: make(chan struct{}),
		tasks: map[string]*protoTask{}, byRID: map[messages.TaskID]*protoTask{}, told: map[messages.TaskID]bool{}}
	o.ctx, o.cancel = context.WithCancelCause(s.ctx)
	return o
}

// isScope reports whether o is a scope.
func (o *owner) isScope() bool { return o.handle != "" }

// inject is the owner's injector. The runtime calls it on a listener goroutine
// shared by every owner, so it never blocks. A notice of a task whose client
// delivers the result itself (a protocol task of the tasks extension) is not
// queued: the client's own notification is the one.
func (o *owner) inject(ctx context.Context, text string) error {
	id, _ := messages.NoticeTask(ctx)
	o.mu.Lock()
	if o.over || o.deliveredByClient(id) {
		o.mu.Unlock()
		return nil
	}
	o.pending = append(o.pending, notice{id: id, text: text})
	o.mu.Unlock()
	if o.logs != nil {
		select {
		case o.logs <- text:
		default: // courtesy only; the tool result still carries it
		}
	}
	return nil
}

// deliveredByClient reports whether the client delivers task id's end to the
// model itself. o.mu is held.
func (o *owner) deliveredByClient(id messages.TaskID) bool {
	if id == "" {
		return false
	}
	pt := o.byRID[id]
	return pt != nil && pt.ext
}

// takeNotices removes the pending notices and returns those still news to the
// model, in arrival order: not about a task whose end the model saw some other
// way (it read or waited on the terminal state, or killed it: the runtime's
// Reported flag) nor about one the client delivers itself. Concurrent calls never
// return one notice twice.
func (o *owner) takeNotices() []string {
	o.mu.Lock()
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	var out []string
	for _, n := range pending {
		if n.id != "" {
			o.mu.Lock()
			tracked := o.deliveredByClient(n.id)
			o.mu.Unlock()
			if tracked {
				continue
			}
			snap, err := o.srv.rt.Tasks().Get(o.ctx, n.id, o.agent)
			switch {
			case err == nil && snap.Reported:
				continue // the model saw the task's end: collected, waited on or killed
			case err != nil && !errors.Is(err, messages.ErrTaskNotFound):
				continue // the owner or the runtime is ending
			}
		}
		out = append(out, n.text)
		if n.id != "" && o.srv.inCluster(o) {
			o.mu.Lock()
			o.sent = append(o.sent, n.id)
			o.mu.Unlock()
		}
	}
	return out
}

// sendLogs sends the queued notices as log messages, and protocol tasks' status
// changes as notifications/tasks/status, until the owner ends: a client slow to
// read them never holds up the runtime's listener. The SDK sends no log message
// before the client set a log level (logging/setLevel).
func (o *owner) sendLogs() {
	defer o.srv.wg.Done()
	for {
		select {
		case <-o.ctx.Done():
			return
		case text := <-o.logs:
			//lint:ignore SA1019 the notice as a log message is a courtesy to the clients of revisions that still have logging; it stays while they do
			_ = o.ss.Log(o.ctx, &mcp.LoggingMessageParams{Logger: logLogger, Level: "info", Data: text})
		case pt := <-o.notes:
			if err := o.stream.notify(taskStatusNote, pt.info()); err != nil {
				o.srv.log.Debug("sending a task status notification", "err", err)
			}
		}
	}
}

// hold marks a request of the owner as begun: a scope's lease cannot lapse while
// it runs. It reports false when the owner has ended.
func (o *owner) hold() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.over {
		return false
	}
	o.inflight++
	if o.lease != nil {
		o.lease.Stop()
	}
	return true
}

// release ends a request of the owner; a scope's lease is renewed from now.
func (o *owner) release() {
	idle := o.srv.cfg.sessionTimeout
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight--
	if !o.isScope() || o.over || o.inflight > 0 || idle <= 0 {
		return
	}
	if o.lease == nil {
		o.lease = time.AfterFunc(idle, o.lapse)
		return
	}
	o.lease.Reset(idle)
}

// lapse is the end of a scope's lease: it ends, on a goroutine the Server waits
// for at Close.
func (o *owner) lapse() {
	o.mu.Lock()
	busy := o.over || o.inflight > 0
	o.mu.Unlock()
	if busy {
		return
	}
	s := o.srv
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		return // Close ends it
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.log.Info("scope lapsed", "owner", o.agent)
		s.end(o, errSessionEnded)
	}()
}

// callContext returns the context of one call of the owner: ctx, ended also when
// the owner ends and, for a call that came in an HTTP POST, when that request is
// closed by the client (the SDK would otherwise let the call run on with nobody
// to answer).
func (o *owner) callContext(ctx context.Context, extra *mcp.RequestExtra) (context.Context, func(), error) {
	if o.ctx.Err() != nil {
		return nil, nil, errSessionEnded
	}
	return o.srv.requestContext(ctx, o.ctx, extra)
}

// requestContext returns ctx, ended also when within ends and, for a request that
// came in an HTTP POST, when that request is closed by the client.
func (s *Server) requestContext(ctx, within context.Context, extra *mcp.RequestExtra) (context.Context, func(), error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopWithin := context.AfterFunc(within, func() { cancel(context.Cause(within)) })
	stopPost := func() bool { return true }
	if extra != nil && extra.Header != nil {
		if key := extra.Header.Get(callHeader); key != "" {
			post, ok := s.httpPost(key)
			if !ok {
				stopWithin()
				cancel(errClientGone)
				return nil, nil, errClientGone
			}
			stopPost = context.AfterFunc(post, func() { cancel(errClientGone) })
		}
	}
	return ctx, func() {
		stopWithin()
		stopPost()
		cancel(nil)
	}, nil
}

// end ends o, once, in order:
//
//  1. mark it over: no request finds it, no notice is queued, its protocol
//     records are dropped;
//  2. cancel its context: its calls in flight end (foreground commands are
//     killed and awaited by their runner);
//  3. take it off the Server's tables (the live page stops listing it before the
//     disposal it will hear of);
//  4. dispose its agent: every task killed and awaited, every process gone.
//
// Concurrent calls all return once the disposal is done.
func (s *Server) end(o *owner, cause error) {
	o.mu.Lock()
	if o.over {
		o.mu.Unlock()
		<-o.ended
		return
	}
	o.over = true
	o.pending = nil
	records := o.order
	o.tasks, o.byRID, o.order = map[string]*protoTask{}, map[messages.TaskID]*protoTask{}, nil
	if o.lease != nil {
		o.lease.Stop()
	}
	o.mu.Unlock()
	for _, pt := range records {
		pt.forget()
	}
	o.cancel(cause)
	if s.inCluster(o) {
		s.mu.Lock()
		s.ending[o.handle] = o // a takeover here waits for its tasks to be gone
		s.mu.Unlock()
		if errors.Is(cause, errScopeLost) || errors.Is(cause, errHandedOff) {
			// Another frontend takes the scope: its commands run on.
			s.cfg.placement.Node().DetachScope(o.handle)
		}
	}
	s.forget(o)
	s.unplace(o, cause)
	if err := s.rt.Agents().Dispose(context.Background(), o.agent); err != nil && !errors.Is(err, messages.ErrClosed) {
		s.log.Warn("disposing an owner", "owner", o.agent, "err", err)
	}
	close(o.ended)
	if s.inCluster(o) {
		s.mu.Lock()
		if s.ending[o.handle] == o {
			delete(s.ending, o.handle)
		}
		s.mu.Unlock()
	}
}

// addTask puts a protocol task into the owner's table; false once the owner
// ended.
func (o *owner) addTask(pt *protoTask) bool {
	o.mu.Lock()
	if o.over {
		o.mu.Unlock()
		return false
	}
	o.tasks[pt.id] = pt
	o.byRID[pt.rid] = pt
	o.order = append(o.order, pt)
	o.mu.Unlock()
	pt.mu.Lock()
	pt.added = true
	ended := pt.finished
	pt.mu.Unlock()
	if ended { // it ended before it was added: what workEnded skipped
		pt.end()
	}
	return true
}

// task returns the protocol task id of the owner, or nil.
func (o *owner) task(id string) *protoTask {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tasks[id]
}

// dropTask removes pt from the owner's table (its record expired).
func (o *owner) dropTask(pt *protoTask) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tasks[pt.id] == pt {
		delete(o.tasks, pt.id)
		delete(o.byRID, pt.rid)
		o.order = slices.DeleteFunc(o.order, func(p *protoTask) bool { return p == pt })
	}
}

// taskList is the owner's protocol tasks in creation order.
func (o *owner) taskList() []*protoTask {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

// offersSessionTasks reports whether 2025-11-25 protocol tasks are offered to
// the owner (its session negotiated them over a transport that can carry them).
func (o *owner) offersSessionTasks() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sessions
}
