package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

// serverName is the server's name in the MCP handshake.
const serverName = "taskrt-mcp"

// ErrClosed is returned for sessions that begin, and by Serve, once Close began.
var ErrClosed = errors.New("taskrt-mcp: the server is shutting down")

// Server serves taskrt's task tools over MCP. Every connection, HTTP session and
// scope is an owner agent of the Server's runtime (see owner); when it ends, its
// agent is disposed, which kills every task it owns and waits until their
// processes are gone.
//
// A Server owns its runtime, its bash producer and its task tools. Create it with
// New, serve connections with Serve (stdio and other single-client transports) or
// HTTPHandler (streamable HTTP), and Close it when done.
type Server struct {
	cfg   config
	log   *slog.Logger
	rt    *actors.Runtime
	tasks *tools.TaskTools
	tools []tools.Tool
	mcp   *mcp.Server

	// ctx is the parent of every owner's context; Close cancels it, which ends
	// every call in flight.
	ctx    context.Context
	cancel context.CancelCauseFunc // with ErrClosed

	numbered atomic.Uint64 // numbers connections and sessions: mcp-1, mcp-2, …
	scoped   atomic.Uint64 // numbers scopes: scope-1, scope-2, …

	mu    sync.Mutex // protects the fields below, and orders wg.Add before wg.Wait
	phase phase
	// owners are every owner, by agent: what the live page lists. An owner is
	// added before it is registered and removed before it is disposed, so that a
	// page's snapshot, taken after it subscribed to the runtime's events, never
	// misses a registered owner nor lists one whose disposal it will not hear of.
	owners     map[messages.AgentID]*owner
	bySession  map[*mcp.ServerSession]*owner // connections and HTTP sessions
	byHTTPID   map[string]*owner             // HTTP sessions, by Mcp-Session-Id
	byHandle   map[string]*owner             // scopes, by handle
	taking     map[string]*take              // scopes being taken here (takeover.go)
	ending     map[string]*owner             // cluster scopes whose owner is ending here, by handle
	beforeMark atomic.Pointer[func()]        // a test's: runs after an answer went out, before its notices are marked delivered
	// connecting are the connections being made: a request that arrives on one
	// before its owner is bound waits for it (see ownerOf).
	connecting map[chan struct{}]struct{}

	wg sync.WaitGroup // owners' watchers and log senders, lapsing scopes

	httpOnce sync.Once
	http     *httpHandler

	pageOnce sync.Once
	page     *livepage.Handler

	listen func() // removes the runtime listener of background protocol tasks

	closeOnce sync.Once
	closed    chan struct{}  // closed when the teardown is complete
	closeErr  error          // the teardown's error, set before closed is closed
	bash      *bash.Producer // the server's own bash producer; nil with WithBashRunner

	bgTasks sync.Map // messages.TaskID → *protoTask: background protocol tasks not yet ended
}

// phase is the Server's lifecycle:
//
//	open ──Close──▶ closing ──(owners ended, runtime closed)──▶ (the closed channel is closed)
//
// Owners begin only while open. The end of the teardown is not a phase: nothing
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
	rt, err := actors.NewRuntime(append([]actors.Option{actors.WithLogger(cfg.logger)}, cfg.rtOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("taskrt-mcp: %w", err)
	}
	run, producer, err := bashRunner(cfg)
	if err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.logger,
		rt:         rt,
		tasks:      tools.NewTaskTools(rt),
		owners:     map[messages.AgentID]*owner{},
		bySession:  map[*mcp.ServerSession]*owner{},
		byHTTPID:   map[string]*owner{},
		byHandle:   map[string]*owner{},
		taking:     map[string]*take{},
		ending:     map[string]*owner{},
		connecting: map[chan struct{}]struct{}{},
		closed:     make(chan struct{}),
		bash:       producer,
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	bashTool, err := tools.NewBashWithRunner(rt, run, cfg.toolOpts...)
	if err != nil {
		s.cancel(ErrClosed)
		s.tasks.Close()
		_ = rt.Close(context.Background())
		if producer != nil {
			_ = producer.Close()
		}
		return nil, fmt.Errorf("taskrt-mcp: %w", err)
	}
	s.tools = append([]tools.Tool{bashTool}, s.tasks.Tools()...)
	s.listen = rt.Tasks().OnDone(s.settled)

	s.mcp = mcp.NewServer(&mcp.Implementation{Name: serverName, Title: "taskrt background tasks", Version: version()}, &mcp.ServerOptions{
		Instructions:              instructions(),
		Logger:                    cfg.logger,
		SupportedProtocolVersions: protocolVersions(cfg.noSessionless),
		Capabilities: &mcp.ServerCapabilities{
			//lint:ignore SA1019 notices go out as log messages too, for the revisions that still have logging
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{}, // a fixed set: no list_changed
		},
	})
	s.mcp.AddReceivingMiddleware(s.registerAtInitialize)
	if err := s.addTaskMethods(); err != nil { // go-sdk refuses only a standard method's name
		panic("mcpserver: " + err.Error())
	}
	for _, t := range s.tools {
		s.mcp.AddTool(&mcp.Tool{Name: t.Name(), Description: t.Description(), InputSchema: t.Schema()}, s.toolHandler)
	}
	if err := s.joinPlacement(); err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// bashRunner is what runs the bash tool's commands: the configured runner, or a
// bash producer of the Server's own (returned, for the teardown to close).
func bashRunner(cfg config) (tools.BashRunner, *bash.Producer, error) {
	if cfg.runner != nil {
		if len(cfg.bashOpts) > 0 {
			// The runner runs the commands elsewhere: options of a producer here would
			// not apply, and a command must never run without the sandbox or the
			// limits it was promised.
			return nil, nil, errors.New("taskrt-mcp: bash options apply to the server's own producer; WithBashOptions and WithBashRunner cannot be combined")
		}
		return cfg.runner, nil, nil
	}
	producer, err := newProducer(append([]bash.Option{bash.WithLogger(cfg.logger)}, cfg.bashOpts...))
	if err != nil {
		return nil, nil, fmt.Errorf("taskrt-mcp: %w", err)
	}
	return runner{p: producer, interval: progressInterval}, producer, nil
}

// protocolVersions are the revisions served: those with sessions (up to
// 2025-11-25) and the sessionless 2026-07-28 (sessionless.go); only the former
// WithoutSessionless. A newer one is refused with -32022 and this list, so a
// client can fall back.
func protocolVersions(sessionsOnly bool) []string {
	last := sessionlessVersion
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
// (the owner of a connection or session is the agent "mcp-N" named in the
// Server's log, a scope's "scope-N").
func (s *Server) Runtime() *actors.Runtime { return s.rt }

// Connect connects one client over t and returns at once, its owner registered:
// every call on the connection that names no scope acts as that owner, whatever
// revision the client speaks. Use Serve to run a connection to its end.
func (s *Server) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	o, err := s.connect(ctx, t)
	if err != nil {
		return nil, err
	}
	return o.ss, nil
}

// connect connects t, registers the connection's owner and starts its watcher
// (which ends the owner when the connection ends) and log sender.
func (s *Server) connect(ctx context.Context, t mcp.Transport) (*owner, error) {
	bound := make(chan struct{})
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.connecting[bound] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.connecting, bound)
		s.mu.Unlock()
		close(bound)
	}()
	t, st := s.carried(t)
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	o := s.newOwner(messages.AgentID(fmt.Sprintf("mcp-%d", s.numbered.Add(1))))
	o.ss, o.stream, o.logs = ss, st, make(chan string, logBuffer)
	if st != nil {
		o.notes = make(chan *protoTask, logBuffer)
	}
	if err := s.begin(ctx, o); err != nil {
		_ = ss.Close()
		_ = ss.Wait()
		return nil, err
	}
	return o, nil
}

// begin registers a connection's or session's owner and starts its watcher and
// log sender.
func (s *Server) begin(ctx context.Context, o *owner) error {
	if err := s.register(ctx, o); err != nil {
		return err
	}
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		s.end(o, errSessionEnded)
		return ErrClosed
	}
	s.bySession[o.ss] = o
	if o.httpID != "" {
		s.byHTTPID[o.httpID] = o
	}
	s.wg.Add(2)
	s.mu.Unlock()
	go s.watch(o)
	go o.sendLogs()
	s.log.Info("session began", "owner", o.agent, "session_id", o.httpID)
	return nil
}

// register lists o among the owners, then registers its agent.
func (s *Server) register(ctx context.Context, o *owner) error {
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		o.cancel(errSessionEnded)
		return ErrClosed
	}
	s.owners[o.agent] = o
	s.mu.Unlock()
	if err := s.rt.Agents().Register(ctx, o.agent, actors.WithInjector(o.inject)); err != nil {
		s.forget(o)
		o.over = true
		o.cancel(errSessionEnded)
		close(o.ended)
		if errors.Is(err, messages.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("taskrt-mcp: registering an owner: %w", err)
	}
	return nil
}

// forget takes o off the Server's tables.
func (s *Server) forget(o *owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[o.agent] == o {
		delete(s.owners, o.agent)
	}
	if o.ss != nil && s.bySession[o.ss] == o {
		delete(s.bySession, o.ss)
	}
	if o.httpID != "" && s.byHTTPID[o.httpID] == o {
		delete(s.byHTTPID, o.httpID)
	}
	if o.handle != "" && s.byHandle[o.handle] == o {
		delete(s.byHandle, o.handle)
	}
}

// watch waits for a connection or session to end, however it ends, and ends its
// owner.
func (s *Server) watch(o *owner) {
	defer s.wg.Done()
	_ = o.ss.Wait()
	s.end(o, errSessionEnded)
	s.log.Info("session ended", "owner", o.agent, "session_id", o.httpID)
}

// Serve runs one connection over t — &mcp.StdioTransport{} for a server launched
// by its client — and returns when the connection has ended and its owner has
// been disposed (every process it started is gone): when the client closes the
// connection (nil, or the transport's error), when ctx is done (Serve then closes
// the connection and returns ctx's error), or when the Server closes (nil).
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	o, err := s.connect(ctx, t)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- o.ss.Wait() }()
	select {
	case err = <-ended:
		if s.isClosing() {
			err = nil // Close ended it
		}
	case <-ctx.Done():
		o.cancel(errSessionEnded)
		_ = o.ss.Close()
		<-ended
		err = ctx.Err()
	}
	<-o.ended
	return err
}

// Close ends every owner (their calls are cancelled, their agents disposed, so
// every process they started is gone), then closes the task tools and the
// runtime. New connections and owners are refused from its start. If ctx ends
// first, Close returns ctx's error and the teardown goes on; call Close again to
// wait for it. Close is idempotent.
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
//  1. cancel every owner's context: calls in flight end (foreground commands are
//     killed and awaited by their runner);
//  2. close every MCP session, initialized or not, and wait for each one's watcher
//     to end its owner (which kills and awaits its tasks); end every scope;
//  3. close the task tools, then the runtime (nothing is left to kill by now),
//     then the server's own bash producer (the cgroups it keeps for later commands).
func (s *Server) teardown() {
	if p := s.cfg.placement; p != nil {
		// The scopes live on: their commands are detached before their owners
		// end, and another frontend takes them once this one's lease ends.
		p.Node().Handoff()
	}
	s.cancel(ErrClosed)
	var closing sync.WaitGroup
	for ss := range s.mcp.Sessions() {
		closing.Go(func() { _ = ss.Close() })
	}
	closing.Wait()
	s.mu.Lock()
	rest := make([]*owner, 0, len(s.owners))
	for _, o := range s.owners {
		rest = append(rest, o)
	}
	s.mu.Unlock()
	for _, o := range rest {
		cause := errSessionEnded
		if s.inCluster(o) {
			cause = errHandedOff
		}
		closing.Go(func() { s.end(o, cause) })
	}
	closing.Wait()
	s.wg.Wait()
	s.listen()
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

// ownerOf returns the owner of the connection or HTTP session ss, or nil (an HTTP
// request without a session). A request that arrives on a connection before its
// owner is bound waits for it.
func (s *Server) ownerOf(ss *mcp.ServerSession) *owner {
	s.mu.Lock()
	o := s.bySession[ss]
	var waits []chan struct{}
	if o == nil {
		for c := range s.connecting {
			waits = append(waits, c)
		}
	}
	s.mu.Unlock()
	if o != nil || len(waits) == 0 {
		return o
	}
	for _, c := range waits {
		<-c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bySession[ss]
}

func (s *Server) lookupID(id string) *owner {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byHTTPID[id]
}

// registerAtInitialize is receiving middleware: when an HTTP session's initialize
// succeeds, its owner is registered before the result reaches the client, so that
// no tool call can come first. (A connection's owner exists from its start.)
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
		if s.ownerOf(ss) != nil {
			return res, nil
		}
		o := s.newOwner(messages.AgentID(fmt.Sprintf("mcp-%d", s.numbered.Add(1))))
		o.ss, o.httpID, o.logs = ss, ss.ID(), make(chan string, logBuffer)
		if err := s.begin(ctx, o); err != nil {
			return nil, err
		}
		return res, nil
	}
}

// toolHandler is the SDK's handler of every tool. The receiving middleware serves
// every tools/call itself (callTool), so it is reached only by a request that got
// past it.
func (s *Server) toolHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := s.callTool(ctx, req)
	if err != nil {
		return nil, err
	}
	if p, ok := res.(*patched); ok {
		res = p.Result
	}
	if r, ok := res.(*mcp.CallToolResult); ok {
		return r, nil
	}
	return nil, errors.New("taskrt-mcp: a task result where the SDK takes a tool result")
}

// instructions are the server's instructions: the prompt section that teaches
// the habit, and what differs over MCP, where the server cannot speak to the
// model between its calls.
func instructions() string {
	return tools.PromptSection().Text + "\n\n" + mcpNotices
}

// mcpNotices tells the model where a completion notice comes from over MCP: on
// the next result of one of these tools, or from a harness that tracks the start
// as a task of its own (tasks.go) and wakes the session when it ends.
const mcpNotices = `Over MCP, the notice that a background task finished comes with the result of your next call to one of these tools — unless your harness tracks the task itself and tells you when it ends (it then shows you the task id to use with these tools). So before you end your turn while background tasks are running, call task_list: it shows each task's status and brings any notice that is due.`
