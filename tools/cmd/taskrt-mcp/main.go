package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// tokenEnv is the environment variable that can carry the bearer token.
const tokenEnv = "TASKRT_MCP_TOKEN"

const usage = `taskrt-mcp serves taskrt's background-task tools over MCP: bash (with
run_in_background), task_output, task_list, task_kill, task_wait, task_input and task_watch.
Over stdio the client owns its tasks, whatever revision it speaks; over HTTP each session
does, and a sessionless (2026-07-28) client's tasks are owned by a scope, a handle passed as
the argument scope, which lapses after -idle-timeout. When an owner ends, every process it
started is killed and gone. A client that declares the MCP tasks extension gets background
starts as MCP tasks it can track, stop, and be woken by.

Usage:
  taskrt-mcp [flags]            one session over stdin/stdout (what MCP clients launch)
  taskrt-mcp -http ADDR [flags] streamable HTTP at http://ADDR/mcp
  taskrt-mcp -http ADDR -ui     the same, and a live page of every session and task at http://ADDR/

Flags:
`

func main() {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, signals))
}

// options are the parsed flags.
type options struct {
	httpAddr    string
	dir         string
	maxTasks    int
	killGrace   time.Duration
	idleTimeout time.Duration
	token       string
	maxRequest  int64
	ui          bool
	verbose     bool
	startKeys   bool
	queue       int
	globalLimit int
	natsURL     string        // -nats: run every bash command on a worker
	lease       time.Duration // -lease: this owner node's lease
	sandbox     bash.Sandbox  // -sandbox, -sandbox-network
	limits      bash.Limits   // -max-processes, -memory, -cpus
	blockOutput bool          // -output block
	sessionless bool
}

// parse parses the flags; an error has been printed with the usage.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("taskrt-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.httpAddr, "http", "", "serve streamable HTTP at `ADDR` (host:port; \":8080\" binds 127.0.0.1) instead of stdio")
	fs.StringVar(&o.dir, "dir", "", "working `directory` of the commands (default: the current directory)")
	fs.IntVar(&o.maxTasks, "max-tasks", actors.DefaultOwnerLimit, "running background tasks one session may have")
	fs.DurationVar(&o.killGrace, "kill-grace", bash.DefaultGrace, "time between SIGTERM and SIGKILL when a command is killed")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", mcpserver.DefaultSessionTimeout, "close an HTTP session, or a sessionless (2026-07-28) scope, idle this long, killing its tasks (0: never)")
	fs.StringVar(&o.token, "token", "", "HTTP: require this bearer `token` (default $"+tokenEnv+"); required when ADDR is not loopback")
	fs.Int64Var(&o.maxRequest, "max-request", mcpserver.DefaultMaxRequestBytes, "HTTP: largest request body, in `bytes` (larger ones are refused with 413)")
	fs.BoolVar(&o.ui, "ui", false, "HTTP: serve a live, read-only page of every session and its tasks at / (same token as /mcp)")
	fs.IntVar(&o.queue, "queue", 0, "queue up to `N` background starts per session beyond the caps, with status queued (0: none)")
	fs.IntVar(&o.globalLimit, "global-limit", 0, "at most `N` running background tasks across all sessions, handed out round robin (0: none)")
	fs.BoolVar(&o.startKeys, "start-keys", false, "offer bash's key parameter: a retried background start with the same key returns the task already started")
	fs.BoolVar(&o.verbose, "v", false, "log sessions beginning and ending to stderr")
	fs.StringVar(&o.natsURL, "nats", "", "run every bash command on a taskrt-worker reached through the NATS server at `URL` (see docs/remote.md)")
	fs.DurationVar(&o.lease, "lease", remote.DefaultLease, "with -nats: this node's lease; workers kill its commands this long after it stops renewing, and (with -http) another frontend then takes its sessionless scopes, whose commands run on")
	fs.BoolVar(&o.sessionless, "sessionless", true, "serve the sessionless revision 2026-07-28 (on stdio the connection owns the tasks, over HTTP scopes do); false: sessions only, a 2026-07-28 client falls back to a session")
	fs.Func("sandbox", "run commands in a bubblewrap sandbox of this `mode`: off (default), read-only (nothing writable but a private /tmp) or workspace-write (the working directory too); no network unless -sandbox-network", func(v string) (err error) {
		o.sandbox.Mode, err = bash.ParseSandboxMode(v)
		return err
	})
	fs.BoolVar(&o.sandbox.Network, "sandbox-network", false, "with -sandbox: let commands use this host's network")
	fs.IntVar(&o.limits.Processes, "max-processes", 0, "cap each command at `N` processes and threads alive at once; a fork past it fails (0: no cap; needs cgroup containment, or -nats)")
	fs.Func("memory", "cap each command's memory (RAM and swap) at `SIZE` bytes, or with a suffix: 512M, 2G; past it the OOM killer ends one of its processes (default: no cap; needs cgroup containment, or -nats)", func(v string) (err error) {
		o.limits.Memory, err = parseBytes(v)
		return err
	})
	fs.Func("output", "what a background command does with output nobody read yet, unless a call says otherwise: bounded (default: keep the start and the end, drop the middle) or block (drop nothing: the command pauses while 32 KiB is unread, until the model reads)", func(v string) error {
		switch v {
		case "bounded":
			o.blockOutput = false
		case "block":
			o.blockOutput = true
		default:
			return fmt.Errorf("want bounded or block, not %q", v)
		}
		return nil
	})
	fs.Float64Var(&o.limits.CPU, "cpus", 0, "cap each command's CPU time at `N` CPUs' worth, e.g. 0.5 or 2 (0: no cap; needs cgroup containment, or -nats)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "taskrt-mcp: %v\n", err)
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case o.maxTasks < 1:
		return bad("-max-tasks must be at least 1")
	case o.queue < 0 || o.globalLimit < 0:
		return bad("-queue and -global-limit must not be negative")
	case o.killGrace <= 0:
		return bad("-kill-grace must be positive")
	case o.idleTimeout < 0:
		return bad("-idle-timeout must not be negative")
	case o.maxRequest < 1:
		return bad("-max-request must be positive")
	case o.lease <= 0:
		return bad("-lease must be positive")
	case o.limits.Processes < 0 || o.limits.CPU < 0:
		return bad("-max-processes and -cpus must not be negative")
	case o.natsURL != "" && o.sandbox.On():
		return bad("-sandbox applies to local commands; with -nats the workers run them")
	case o.sandbox.Network && !o.sandbox.On():
		return bad("-sandbox-network needs -sandbox read-only or workspace-write")
	case o.ui && o.httpAddr == "":
		return bad("-ui needs -http: the live page is served over HTTP")
	}
	if o.token == "" {
		o.token = os.Getenv(tokenEnv)
	}
	if o.httpAddr != "" {
		host, port, err := net.SplitHostPort(o.httpAddr)
		if err != nil {
			return bad("-http %q: want host:port or :port", o.httpAddr)
		}
		if host == "" {
			host = "127.0.0.1"
		}
		o.httpAddr = net.JoinHostPort(host, port)
		if !mcpserver.IsLoopback(o.httpAddr) && o.token == "" {
			return bad("-http %s is not a loopback address: set a bearer token with -token or %s", o.httpAddr, tokenEnv)
		}
	}
	return o, nil
}

// run is the command with its environment passed in. The first value on signals
// starts a graceful shutdown; a second one ends run at once with status 1.
func run(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer, signals <-chan os.Signal) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	rtOpts := []actors.Option{actors.WithOwnerLimit(o.maxTasks)}
	rtOpts = append(rtOpts, actors.WithQueue(o.queue), actors.WithGlobalLimit(o.globalLimit)) // 0 keeps "none"
	toolOpts := []tools.BashOption{tools.WithWorkDir(o.dir)}
	if o.startKeys {
		toolOpts = append(toolOpts, tools.WithStartKeys())
	}
	if o.blockOutput {
		toolOpts = append(toolOpts, tools.WithBlockOutput())
	}
	opts := []mcpserver.Option{
		mcpserver.WithLogger(logger),
		mcpserver.WithRuntimeOptions(rtOpts...),
		mcpserver.WithSessionTimeout(o.idleTimeout),
		mcpserver.WithMaxRequestBytes(o.maxRequest),
	}
	if o.idleTimeout == 0 {
		opts = append(opts, mcpserver.WithoutSessionTimeout())
	}
	var node *clusterNode
	if o.natsURL != "" {
		var err error
		node, err = joinCluster(o, logger)
		if err != nil {
			fmt.Fprintf(stderr, "taskrt-mcp: %v\n", err)
			return 1
		}
		defer node.close()
		// The workers run the commands: the limits go with each command.
		toolOpts = append(toolOpts, tools.WithLimits(o.limits))
		opts = append(opts, mcpserver.WithBashRunner(node.producer))
		if node.placement != nil {
			// Task numbers come from the cluster, so that a task keeps its id on
			// whichever frontend serves its scope and no two tasks share one.
			opts = append(opts, mcpserver.WithPlacement(node.placement), mcpserver.WithRuntimeOptions(actors.WithIDs(node.placement.NextID)))
			fmt.Fprintf(stderr, "taskrt-mcp: frontend %s: serves every live sessionless scope of the cluster on %s\n", node.placement.ID(), o.natsURL)
		}
	} else {
		opts = append(opts, mcpserver.WithBashOptions(bash.WithGrace(o.killGrace), bash.WithSandbox(o.sandbox),
			bash.WithMaxProcesses(o.limits.Processes), bash.WithMemoryLimit(o.limits.Memory), bash.WithCPULimit(o.limits.CPU)))
	}
	opts = append(opts, mcpserver.WithBashToolOptions(toolOpts...))
	if !o.sessionless {
		opts = append(opts, mcpserver.WithoutSessionless())
	}
	srv, err := mcpserver.New(opts...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if node != nil {
		node.server.Store(srv)
	}

	// 1. Serve until the stdio client goes away, the HTTP listener fails, or a
	//    signal arrives.
	var serve <-chan error
	var hs *http.Server
	if o.httpAddr == "" {
		serve = goErr(func() error {
			return srv.Serve(context.Background(), &mcp.IOTransport{Reader: stdin, Writer: stdout})
		})
	} else {
		ln, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			fmt.Fprintf(stderr, "taskrt-mcp: %v\n", err)
			_ = srv.Close(context.Background())
			return 1
		}
		hs = &http.Server{Handler: handler(srv, o), ReadHeaderTimeout: 10 * time.Second}
		serve = goErr(func() error { return hs.Serve(ln) })
		fmt.Fprintf(stderr, "taskrt-mcp: serving MCP at http://%s%s\n", ln.Addr(), mcpserver.Path)
		if o.ui {
			fmt.Fprintf(stderr, "taskrt-mcp: live page at http://%s%s\n", ln.Addr(), mcpserver.PagePath)
		}
	}
	code := 0
	select {
	case err := <-serve:
		serve = nil
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(stderr, "taskrt-mcp: %v\n", err)
			code = 1
		}
	case sig := <-signals:
		fmt.Fprintf(stderr, "taskrt-mcp: %v: ending every session and killing its tasks (again to exit at once)\n", sig)
	}

	// 2. Close: every session ends, every task is killed and awaited, the runtime
	//    closes. A second signal cuts it short.
	closed := goErr(func() error {
		err := srv.Close(context.Background())
		if hs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if serr := hs.Shutdown(ctx); serr != nil {
				_ = hs.Close()
			}
		}
		if serve != nil {
			<-serve
		}
		return err
	})
	select {
	case err := <-closed:
		if err != nil {
			fmt.Fprintf(stderr, "taskrt-mcp: closing: %v\n", err)
			return 1
		}
		return code
	case sig := <-signals:
		fmt.Fprintf(stderr, "taskrt-mcp: %v again: exiting at once\n", sig)
		return 1
	}
}

// handler is the HTTP server's handler: /mcp, the live page at / with -ui, each
// behind the token when there is one (the page accepts it as a Basic password too,
// so that a browser can prompt for it).
func handler(srv *mcpserver.Server, o options) http.Handler {
	guard := func(h http.Handler) http.Handler { return h }
	guardPage := guard
	if o.token != "" {
		guard = func(h http.Handler) http.Handler { return mcpserver.RequireToken(o.token, h) }
		guardPage = func(h http.Handler) http.Handler { return mcpserver.RequireBrowserToken(o.token, h) }
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, guard(srv.HTTPHandler()))
	if o.ui {
		mux.Handle(mcpserver.PagePath, guardPage(srv.PageHandler()))
	} else {
		mux.Handle(mcpserver.PagePath, guard(http.NotFoundHandler()))
	}
	return mux
}

// parseBytes reads a size: a number of bytes, or one with a binary suffix (K, M,
// G, T; KiB, MiB, … and KB, MB, … mean the same).
func parseBytes(v string) (int64, error) {
	num := strings.TrimRight(strings.TrimSpace(v), "iBb")
	mult := int64(1)
	if n := len(num); n > 0 {
		if i := strings.IndexByte("KMGT", num[n-1]&^0x20); i >= 0 {
			mult, num = int64(1)<<(10*(i+1)), num[:n-1]
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size: want bytes, or a number with K, M, G or T", v)
	}
	return int64(f * float64(mult)), nil
}

// goErr runs f on a goroutine and delivers its error.
func goErr(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// clusterNode is this process's part in a cluster (-nats): an owner node whose
// bash commands run on workers and, serving HTTP, a frontend of the sessionless
// scopes (package placement).
type clusterNode struct {
	nc        *nats.Conn
	producer  *remote.Producer
	placement *placement.Placement             // nil on stdio
	server    atomic.Pointer[mcpserver.Server] // the frontend's, once made: it maps owners to scopes
}

// joinCluster connects this process as an owner node (-nats): every bash command
// then runs on a worker. Serving HTTP, it is also a frontend: the sessionless
// scopes live in the cluster, each homed on one frontend at a time, their
// commands the scope's rather than this process's (docs/scopes-cluster.md). Its
// id is the owner node's, new at every start.
func joinCluster(o options, logger *slog.Logger) (*clusterNode, error) {
	nc, err := remote.Connect(o.natsURL)
	if err != nil {
		return nil, err
	}
	n := &clusterNode{nc: nc}
	ropts := []remote.Option{remote.WithLease(o.lease), remote.WithLogger(logger)}
	if o.httpAddr != "" {
		ropts = append(ropts, remote.WithScopes(func(owner messages.AgentID) (string, uint64, bool) {
			if s := n.server.Load(); s != nil {
				return s.ScopeOf(owner)
			}
			return "", 0, false
		}))
	}
	p, err := remote.New(nc, ropts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	n.producer = p
	if o.httpAddr != "" {
		pl, err := placement.New(nc, p, placement.WithLogger(logger))
		if err != nil {
			n.close()
			return nil, err
		}
		n.placement = pl
	}
	return n, nil
}

// close ends the node after the server closed (which handed its scopes on): the
// placement, then the owner node, whose lease's end lets another frontend take
// those scopes at once.
func (n *clusterNode) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n.placement != nil {
		_ = n.placement.Close(ctx)
	}
	_ = n.producer.Close(ctx)
	n.nc.Close()
}
