package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// Name is the server's name in the MCP handshake.
const Name = "taskrt-mcp"

// ErrClosed is returned for sessions that begin, and by Serve, once Close began.
var ErrClosed = errors.New("taskrt-mcp: the server is shutting down")

// errSessionEnded fails a call that arrives, or is still running, when its session
// ends (the client disconnected, deleted the session or let it idle out, or the
// server is shutting down).
var errSessionEnded = errors.New("taskrt-mcp: the session has ended")

// Server serves taskrt's task tools over MCP. Every MCP session gets an owner agent
// of its own in the Server's runtime, registered when the session initializes and
// disposed when it ends; disposal kills every task of the session and waits until
// its processes are gone.
//
// A Server owns its runtime, its bash producer and its task tools. Create it with
// New, serve sessions with Serve (stdio and other single-session transports) or
// HTTPHandler (streamable HTTP), and Close it when done.
type Server struct {
	cfg   config
	log   *slog.Logger
	rt    *actors.Runtime
	tasks *tools.TaskTools
	tools []tools.Tool
	mcp   *mcp.Server

	// ctx is the parent of every session's context; Close cancels it, which ends
	// every call in flight.
	ctx    context.Context
	cancel context.CancelFunc

	numbered atomic.Uint64 // numbers the owners: mcp-1, mcp-2, …

	mu       sync.Mutex // protects phase, sessions, byID and owners
	phase    phase
	sessions map[*mcp.ServerSession]*session
	byID     map[string]*session // by HTTP session id (the Mcp-Session-Id header)
	// owners are the owners the live page lists: an owner is added before it is
	// registered and removed before it is disposed, so that a page's snapshot,
	// taken after it subscribed to the runtime's events, never misses a registered
	// owner nor lists one whose disposal it will not hear of.
	owners map[messages.AgentID]*session
	// streams are the stdio streams connected and not yet initialized, by key
	// (see carry.go): a session's initialize takes its stream.
	streams map[string]*stream

	wg sync.WaitGroup // each session's watcher and log sender

	scopes scopes // the sessionless era's owners (sessionless.go)

	httpOnce sync.Once
	http     *httpHandler

	pageOnce sync.Once
	page     *pageHandler

	closeOnce sync.Once
	closed    chan struct{}  // closed when the teardown is complete
	closeErr  error          // the teardown's error, set before closed is closed
	bash      *bash.Producer // the server's own bash producer; nil with WithBashRunner
}

// phase is the Server's lifecycle:
//
//	open ──Close──▶ closing ──(sessions ended, runtime closed)──▶ (the closed channel is closed)
//
// Sessions begin only while open. The end of the teardown is not a phase: nothing
// asks for it but Close, which waits on the closed channel.
type phase int

const (
	open phase = iota
	closing
)

// New creates a Server: a runtime, a bash producer, the task tools attached to the
// runtime, and an MCP server offering bash and the task tools (task_output,
// task_list, task_kill, task_wait: whatever tools.TaskTools offers) with the names,
// descriptions and schemas package tools defines.
func New(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.workDir != "" {
		fi, err := os.Stat(cfg.workDir)
		if err != nil {
			return nil, fmt.Errorf("taskrt-mcp: working directory: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("taskrt-mcp: working directory %s is not a directory", cfg.workDir)
		}
	}
	rtOpts := []actors.Option{actors.WithLogger(cfg.logger)}
	if cfg.ownerLimit > 0 {
		rtOpts = append(rtOpts, actors.WithOwnerLimit(cfg.ownerLimit))
	}
	rtOpts = append(rtOpts, actors.WithQueue(cfg.queue), actors.WithGlobalLimit(cfg.globalLimit)) // 0 keeps "none"
	rt, err := actors.NewRuntime(rtOpts...)
	if err != nil {
		return nil, fmt.Errorf("taskrt-mcp: %w", err)
	}
	bashOpts := []bash.Option{bash.WithLogger(cfg.logger), bash.WithSandbox(cfg.sandbox)}
	if cfg.killGrace > 0 {
		bashOpts = append(bashOpts, bash.WithGrace(cfg.killGrace))
	}
	run := cfg.runner
	var producer *bash.Producer // the server's own, closed by its teardown
	switch {
	case run != nil && cfg.sandbox.On():
		// The runner runs the commands elsewhere: a sandbox set here would not apply,
		// and a command must never run unsandboxed without saying so.
		_ = rt.Close(context.Background())
		return nil, errors.New("taskrt-mcp: a sandbox applies to local commands only; WithSandbox and WithBashRunner cannot be combined")
	case run == nil:
		var err error
		producer, err = newProducer(cfg, bashOpts)
		if err != nil {
			_ = rt.Close(context.Background())
			return nil, fmt.Errorf("taskrt-mcp: %w", err)
		}
		run = runner{p: producer, interval: ProgressInterval}
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.logger,
		rt:       rt,
		tasks:    tools.NewTaskTools(rt),
		sessions: map[*mcp.ServerSession]*session{},
		byID:     map[string]*session{},
		owners:   map[messages.AgentID]*session{},
		streams:  map[string]*stream{},
		closed:   make(chan struct{}),
		bash:     producer,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	bashToolOpts := []tools.BashOption{tools.WithWorkDir(cfg.workDir)}
	if cfg.startKeys {
		bashToolOpts = append(bashToolOpts, tools.WithStartKeys())
	}
	bashTool, err := tools.NewBashWithRunner(rt, run, bashToolOpts...)
	if err != nil {
		s.cancel()
		s.tasks.Close()
		_ = rt.Close(context.Background())
		return nil, fmt.Errorf("taskrt-mcp: %w", err)
	}
	s.tools = append([]tools.Tool{bashTool}, s.tasks.Tools()...)

	s.mcp = mcp.NewServer(&mcp.Implementation{Name: Name, Title: "taskrt background tasks", Version: version()}, &mcp.ServerOptions{
		Instructions:              tools.PromptSection().Text,
		Logger:                    cfg.logger,
		SupportedProtocolVersions: protocolVersions(cfg.noSessionless),
		Capabilities: &mcp.ServerCapabilities{
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{}, // a fixed set: no list_changed
		},
	})
	s.mcp.AddReceivingMiddleware(s.registerAtInitialize)
	if err := s.addTaskMethods(); err != nil { // go-sdk refuses only a standard method's name
		panic("mcpserver: " + err.Error())
	}
	for _, t := range s.tools {
		s.mcp.AddTool(&mcp.Tool{Name: t.Name(), Description: t.Description(), InputSchema: t.Schema()}, s.handler(t))
	}
	return s, nil
}

// protocolVersions are the revisions served: those with sessions (up to
// 2025-11-25) and the sessionless 2026-07-28, whose requests are served with
// scopes as owners (sessionless.go); only the former WithoutSessionless. A newer
// one is refused with -32022 and this list, so a client can fall back.
func protocolVersions(sessionsOnly bool) []string {
	last := SessionlessVersion
	if sessionsOnly {
		last = lastSessionVersion
	}
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v > last })
}

// version is the module version the command was built from ("(devel)" for a
// local build).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Runtime is the Server's runtime, for embedders that observe or drive it directly
// (the owner of an MCP session is the agent "mcp-N" named in the session's log).
func (s *Server) Runtime() *actors.Runtime { return s.rt }

// Connect connects one MCP session over t and returns at once; the session's owner
// is registered when the client initializes. Use Serve to run a session to its end.
func (s *Server) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	ss, _, err := s.connect(ctx, t)
	return ss, err
}

// connect is Connect, also returning the stream the Server reads t through (nil
// when it cannot: that session has no protocol tasks).
func (s *Server) connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, *stream, error) {
	if s.isClosing() {
		return nil, nil, ErrClosed
	}
	t, st := s.carried(t)
	if st != nil {
		s.mu.Lock()
		s.streams[st.key] = st
		s.mu.Unlock()
	}
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil && st != nil {
		s.takeStream(st.key)
	}
	return ss, st, err
}

// takeStream removes the stream under key and returns it (nil if none).
func (s *Server) takeStream(key string) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[key]
	delete(s.streams, key)
	return st
}

// Serve runs one session over t — &mcp.StdioTransport{} for a server launched by
// its client — and returns when the session has ended and its owner has been
// disposed (every process it started is gone): when the client closes the
// connection (nil, or the transport's error), when ctx is done (Serve then closes
// the session and returns ctx's error), or when the Server closes (nil).
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	ss, st, err := s.connect(ctx, t)
	if err != nil {
		return err
	}
	if st != nil {
		defer s.takeStream(st.key) // a session that never initialized
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err = <-ended:
		if s.isClosing() {
			err = nil // Close ended it
		}
	case <-ctx.Done():
		s.endSession(ss)
		<-ended
		err = ctx.Err()
	}
	if sess := s.lookup(ss); sess != nil {
		<-sess.ended
	}
	return err
}

// endSession ends ss from the server side: its calls are cancelled first, because
// closing an MCP session waits for the calls in flight.
func (s *Server) endSession(ss *mcp.ServerSession) {
	if sess := s.lookup(ss); sess != nil {
		sess.cancel(errSessionEnded)
	}
	_ = ss.Close()
}

// Close ends every session (their calls are cancelled, their owners disposed, so
// every process they started is gone), then closes the task tools and the runtime.
// New sessions are refused from its start. If ctx ends first, Close returns ctx's
// error and the teardown goes on; call Close again to wait for it. Close is
// idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.phase = closing
		s.mu.Unlock()
		go s.teardown()
	})
	select {
	case <-s.closed:
		return s.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// teardown is Close's work, in order:
//
//  1. cancel every session's context: calls in flight end (foreground commands are
//     killed and awaited by their runner);
//  2. close every MCP session, initialized or not, and wait for each one's watcher
//     to dispose its owner (which kills and awaits its tasks);
//  3. close the task tools, then the runtime (nothing is left to kill by now),
//     then the server's own bash producer (the cgroups it keeps for later commands).
func (s *Server) teardown() {
	s.cancel()
	var closing sync.WaitGroup
	for ss := range s.mcp.Sessions() {
		closing.Go(func() { _ = ss.Close() })
	}
	closing.Wait()
	s.wg.Wait()
	s.closeScopes()
	s.tasks.Close()
	s.closeErr = s.rt.Close(context.Background())
	if s.bash != nil { // the empty cgroups it kept for later commands
		s.closeErr = errors.Join(s.closeErr, s.bash.Close())
	}
	close(s.closed)
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase != open
}

func (s *Server) lookup(ss *mcp.ServerSession) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[ss]
}

func (s *Server) lookupID(id string) *session {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// registerAtInitialize is receiving middleware: when a session's initialize
// succeeds, its owner is registered before the result reaches the client, so that
// no tool call can come first.
func (s *Server) registerAtInitialize(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "initialize" {
			return res, err
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return nil, fmt.Errorf("taskrt-mcp: initialize without a server session")
		}
		if err := s.begin(ctx, ss); err != nil {
			return nil, err
		}
		return res, nil
	}
}

// begin registers the owner of a new session and starts the session's watcher
// (which disposes the owner when the session ends) and log sender.
func (s *Server) begin(ctx context.Context, ss *mcp.ServerSession) error {
	sess := newSession(s, ss, messages.AgentID(fmt.Sprintf("mcp-%d", s.numbered.Add(1))))
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		sess.cancel(errSessionEnded)
		return ErrClosed
	}
	s.owners[sess.owner] = sess
	s.mu.Unlock()
	if err := s.rt.Agents().Register(ctx, sess.owner, actors.WithInjector(sess.inject)); err != nil {
		s.dropOwner(sess)
		sess.cancel(errSessionEnded)
		if errors.Is(err, messages.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("taskrt-mcp: registering the session's owner: %w", err)
	}
	s.mu.Lock()
	if s.phase != open {
		delete(s.owners, sess.owner)
		s.mu.Unlock()
		sess.cancel(errSessionEnded)
		_ = s.rt.Agents().Dispose(context.Background(), sess.owner)
		return ErrClosed
	}
	s.sessions[ss] = sess
	if sess.id != "" {
		s.byID[sess.id] = sess
	}
	s.wg.Add(2)
	s.mu.Unlock()
	go s.watch(sess)
	go sess.sendLogs()
	s.log.Info("session began", "owner", sess.owner, "session_id", sess.id)
	return nil
}

// dropOwner removes sess from the owners the live page lists.
func (s *Server) dropOwner(sess *session) {
	s.mu.Lock()
	delete(s.owners, sess.owner)
	s.mu.Unlock()
}

// watch waits for the session to end, however it ends, and disposes its owner.
func (s *Server) watch(sess *session) {
	defer s.wg.Done()
	_ = sess.ss.Wait()
	sess.finish()
	s.dropOwner(sess)
	if err := s.rt.Agents().Dispose(context.Background(), sess.owner); err != nil && !errors.Is(err, messages.ErrClosed) {
		s.log.Warn("disposing a session's owner", "owner", sess.owner, "err", err)
	}
	s.mu.Lock()
	delete(s.sessions, sess.ss)
	if sess.id != "" {
		delete(s.byID, sess.id)
	}
	s.mu.Unlock()
	s.log.Info("session ended", "owner", sess.owner, "session_id", sess.id)
	close(sess.ended)
}

// handler adapts one tool: the call runs as the session's owner, under a context
// that ends with the session (and, over HTTP, with the POST that carried it); the
// result carries the tool's text, its Handle as structured content, and the
// session's pending notices.
func (s *Server) handler(t tools.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess := s.lookup(req.Session)
		if sess == nil {
			return nil, errSessionEnded
		}
		callCtx, done, err := sess.callContext(ctx, req.Extra)
		if err != nil {
			return nil, err
		}
		defer done()
		if tok := req.Params.GetProgressToken(); tok != nil {
			callCtx = withReporter(callCtx, func(n int, line string) {
				// ctx, not callCtx: the SDK's request context routes the
				// notification to this call's stream.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(n), Message: line,
				})
			})
		}
		r := t.Call(callCtx, sess.owner, req.Params.Arguments)
		if cause := context.Cause(callCtx); errors.Is(cause, errSessionEnded) || errors.Is(cause, errClientGone) {
			// The call was cut short by its session's end (or its request's): it
			// fails, rather than answer with what the cut left.
			return nil, cause
		}
		if ctx.Err() != nil {
			// The client cancelled the request (notifications/cancelled): it
			// drops the result, so the notices wait for the next one.
			return toResult(r, nil), nil
		}
		return toResult(r, sess.takeNotices()), nil
	}
}

// toResult is a tool Result, with the session's notices, as an MCP result, such
// that every part a client may show the model carries everything the model must
// read (Claude Code and Codex show structuredContent instead of content when a
// result has it):
//
//   - content: the text as one text item, then one text item per notice;
//   - structuredContent, for a result with structured data (a background Handle):
//     the data's own fields unchanged ("kind", "task_id"), plus "message", the
//     text, and "notices", the notices (absent when there are none).
//
// A tool error is isError. No tool declares an outputSchema, which would oblige
// every result of the tool to carry structuredContent — and these clients would then
// show the model the structured part of plain results too.
func toResult(r tools.Result, notices []string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
	for _, text := range notices {
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	if r.Data != nil {
		res.StructuredContent = structured(r, notices)
	}
	return res
}

// appendNotices adds notices to an MCP result built earlier (a protocol-level
// task's stored result): to its content, and to its structuredContent when it has
// one, so that they reach the model whichever part its client shows.
func appendNotices(res *mcp.CallToolResult, notices []string) {
	if len(notices) == 0 {
		return
	}
	res.Content = slices.Clone(res.Content)
	for _, text := range notices {
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	switch sc := res.StructuredContent.(type) {
	case nil:
	case handleResult:
		sc.Notices = append(slices.Clone(sc.Notices), notices...)
		res.StructuredContent = sc
	case scopedHandle:
		sc.Notices = append(slices.Clone(sc.Notices), notices...)
		res.StructuredContent = sc
	default:
		m := map[string]any{}
		if b, err := json.Marshal(sc); err == nil {
			_ = json.Unmarshal(b, &m)
		}
		prior, _ := m["notices"].([]any)
		for _, n := range notices {
			prior = append(prior, n)
		}
		m["notices"] = prior
		res.StructuredContent = m
	}
}

// handleResult is a background Handle as structuredContent: the handle's fields
// first, as programs read them, then what the model must read.
type handleResult struct {
	tools.Handle
	Message string   `json:"message"`
	Notices []string `json:"notices,omitempty"`
}

// structured is r's structured data with the text and the notices added (see
// toResult).
func structured(r tools.Result, notices []string) any {
	if h, ok := r.Data.(tools.Handle); ok {
		return handleResult{Handle: h, Message: r.Text, Notices: notices}
	}
	// Other data, as a JSON object with the same two fields added.
	m := map[string]any{}
	if b, err := json.Marshal(r.Data); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	m["message"] = r.Text
	if len(notices) > 0 {
		m["notices"] = notices
	}
	return m
}
