package mcpserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
)

// logLogger is the logger name of the notices sent as notifications/message.
const logLogger = "taskrt"

// logBuffer bounds the notices waiting to be sent as log messages, per session.
// Log messages are a courtesy: when a client does not read them fast enough, the
// extra ones are dropped (the notice still reaches the next tool result).
const logBuffer = 64

// errClientGone ends a call whose HTTP request was closed by the client: its result
// can no longer be delivered.
var errClientGone = errors.New("taskrt-mcp: the client closed the request")

// session is one MCP session: its owner agent and its pending notices.
//
// A notice reaches the session in two ways. The runtime's injector (inject) queues
// it and hands it to the log sender, which sends it at once as a notifications/
// message log message — a courtesy for clients that show logs. The queued notice
// is appended to the session's next tool result, whichever tool that is, exactly
// once; unless, by then, the model has seen the task's end some other way (it read
// or waited on the terminal state, or killed the task): the runtime's Reported flag
// says so, and the notice is dropped.
type session struct {
	srv   *Server
	ss    *mcp.ServerSession
	owner messages.AgentID
	id    string // the HTTP session id, "" on stdio and in-memory transports
	began time.Time

	// ctx ends when the session ends; every call's context ends with it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	tasks atomic.Pointer[taskTable] // protocol tasks (tasks.go); nil when not offered

	logs  chan string   // notices for the log sender
	ended chan struct{} // closed once the owner is disposed

	mu      sync.Mutex // protects pending and over
	pending []notice
	over    bool // the session ended: notices are dropped
}

// notice is a pending completion notice.
type notice struct {
	id   messages.TaskID // "" if the text names no task (it then always goes out)
	text string
}

func newSession(s *Server, ss *mcp.ServerSession, owner messages.AgentID) *session {
	sess := &session{srv: s, ss: ss, owner: owner, id: ss.ID(), began: time.Now(),
		logs: make(chan string, logBuffer), ended: make(chan struct{})}
	sess.ctx, sess.cancel = context.WithCancelCause(s.ctx)
	return sess
}

// inject is the owner's injector. The runtime calls it on a listener goroutine
// shared by every session, so it never blocks.
func (s *session) inject(ctx context.Context, text string) error {
	id, _ := messages.NoticeTask(ctx)
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return nil
	}
	s.pending = append(s.pending, notice{id: id, text: text})
	s.mu.Unlock()
	select {
	case s.logs <- text:
	default: // courtesy only; the tool result still carries it
	}
	return nil
}

// takeNotices removes the pending notices and returns those still news to the
// model, in arrival order. Concurrent calls never return one notice twice.
func (s *session) takeNotices() []string {
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	var out []string
	for _, n := range pending {
		if n.id != "" {
			snap, err := s.srv.rt.Tasks().Get(s.ctx, n.id, s.owner)
			switch {
			case err == nil && snap.Reported:
				continue // the model saw the task's end: collected, waited on or killed
			case err != nil && !errors.Is(err, messages.ErrTaskNotFound):
				continue // the session or the runtime is ending
			}
		}
		out = append(out, n.text)
	}
	return out
}

// sendLogs sends the queued notices as log messages until the session ends. The
// SDK sends none before the client set a log level (logging/setLevel).
func (s *session) sendLogs() {
	defer s.srv.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case text := <-s.logs:
			_ = s.ss.Log(s.ctx, &mcp.LoggingMessageParams{Logger: logLogger, Level: "info", Data: text})
		}
	}
}

// finish ends the session's calls and drops its pending notices.
func (s *session) finish() {
	s.cancel(errSessionEnded)
	if tt := s.tasks.Load(); tt != nil {
		tt.close()
	}
	s.mu.Lock()
	s.over = true
	s.pending = nil
	s.mu.Unlock()
}

// callContext returns the context of one call: ctx, ended also when the session
// ends and, for a call that came in an HTTP POST, when that request is closed by
// the client (the SDK would otherwise let the call run on with nobody to answer).
func (s *session) callContext(ctx context.Context, extra *mcp.RequestExtra) (context.Context, func(), error) {
	if s.ctx.Err() != nil {
		return nil, nil, errSessionEnded
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stopSession := context.AfterFunc(s.ctx, func() { cancel(errSessionEnded) })
	stopPost := func() bool { return true }
	if extra != nil && extra.Header != nil {
		if key := extra.Header.Get(callHeader); key != "" {
			post, ok := s.srv.httpPost(key)
			if !ok {
				stopSession()
				cancel(errClientGone)
				return nil, nil, errClientGone
			}
			stopPost = context.AfterFunc(post, func() { cancel(errClientGone) })
		}
	}
	return ctx, func() {
		stopSession()
		stopPost()
		cancel(nil)
	}, nil
}
