// Command taskrt-scopes-bench measures sessionless scopes served by several
// taskrt-mcp frontends (-http -nats) over an embedded NATS server with in-process
// workers, and prints one table (progress goes to stderr).
//
// Usage:
//
//	taskrt-scopes-bench [-runs 10] [-samples 1000] [-lease 2s] [-scopes 1000]
//
// Figures:
//
//   - takeover after SIGKILL: a frontend homing a scope with a long task is
//     killed; the time until another frontend serves the scope (task_output
//     answers, the task running), p50 and max over -runs;
//   - takeover after a partition: the home's NATS connection goes through a
//     blackhole proxy, which is cut; the same time;
//   - a forwarded call's overhead: task_list of a scope at its home and at
//     another frontend, p50 and p99 over -samples each;
//   - a random-kill run: -scopes scopes, each with one task (sleep 0–8 s, then
//     append a line to a file of its own), started through three frontends while
//     one random frontend is SIGKILLed (and a new one started) every 3 s; every
//     scope is polled with task_list through random live frontends until its
//     notice came, then read once. Counted: tasks that did not complete, notices
//     missing or duplicated, commands that ran more than once (a file with more
//     than one line), starts and reads whose answer was lost (their frontend
//     died during the call; a start is retried as a new scope, a read again,
//     which returns what the lost answer did not).
//
// It builds taskrt-mcp into a temporary directory to run the frontends.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/taskrt/taskrt/internal/blackhole"
	"github.com/taskrt/taskrt/internal/sessionless"
	"github.com/taskrt/taskrt/producers/remote"
)

var (
	runs    = flag.Int("runs", 10, "runs of each takeover figure")
	samples = flag.Int("samples", 1000, "samples of each latency figure")
	lease   = flag.Duration("lease", 2*time.Second, "lease of every frontend and worker")
	scopes  = flag.Int("scopes", 1000, "scopes of the random-kill run")
	keep    = flag.Bool("keep", false, "keep the working directory (the frontends' logs) and print its path")
	only    = flag.Bool("random-only", false, "run only the random-kill run")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-scopes-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "taskrt-scopes-bench")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "taskrt-scopes-bench: working directory %s (kept)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	fmt.Fprintf(os.Stderr, "taskrt-scopes-bench: %d CPUs, lease %s; building taskrt-mcp …\n", runtime.NumCPU(), *lease)
	bin := filepath.Join(dir, "taskrt-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/taskrt/taskrt/tools/cmd/taskrt-mcp").CombinedOutput(); err != nil {
		return fmt.Errorf("building taskrt-mcp: %v\n%s", err, out)
	}
	ns, err := remote.StartServer(filepath.Join(dir, "nats"), 0)
	if err != nil {
		return err
	}
	defer ns.Close()
	c := &cluster{bin: bin, nats: ns.URL(), dir: dir}
	for _, name := range []string{"w1", "w2"} {
		stop, err := c.worker(name)
		if err != nil {
			return err
		}
		defer stop()
	}
	if !*only {
		if err := c.figures(); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "  random-kill run with %d scopes …\n", *scopes)
	r, err := c.randomKills(*scopes)
	if err != nil {
		return err
	}
	fmt.Printf("\nrandom-kill run: %d scopes, %d frontend SIGKILLs in %s\n", *scopes, r.kills, r.took.Round(time.Second))
	fmt.Printf("  tasks completed and read: %d; not completed: %d; notices missing: %d; notices twice: %d; commands run twice: %d\n",
		r.completed, r.notCompleted, r.missing, r.twice, r.ranTwice)
	fmt.Printf("  calls whose frontend died during them: %d starts (started again as new scopes), %d reads (read again)\n", r.unanswered, r.readsLost)
	if r.notCompleted+r.missing+r.ranTwice > 0 {
		logs, _ := filepath.Glob(filepath.Join(dir, "frontend-*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
					fmt.Fprintln(os.Stderr, filepath.Base(l), line)
				}
			}
		}
		return fmt.Errorf("the random-kill run lost or repeated work: %+v", r)
	}
	return nil
}

// figures measures the takeover times and the forwarding overhead and prints
// them as a table.
func (c *cluster) figures() error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\tp50\tmax\t\n")
	for _, f := range []struct {
		name string
		cut  bool
	}{{"takeover after SIGKILL of the home (ms)", false}, {"takeover after a partition of the home (ms)", true}} {
		var ds []time.Duration
		for i := range *runs {
			d, err := c.takeover(f.cut)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", f.name, i, err)
			}
			fmt.Fprintf(os.Stderr, "  %s: %s\n", f.name, d.Round(time.Millisecond))
			ds = append(ds, d)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t\n", f.name, ms(pct(ds, 0.5)), ms(slices.Max(ds)))
	}
	home, fwd, err := c.forwarded()
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "\t\t\t\nlatency of task_list\tp50\tp99\t\n")
	fmt.Fprintf(tw, "at the scope's home (µs)\t%.0f\t%.0f\t\n", us(pct(home, 0.5)), us(pct(home, 0.99)))
	fmt.Fprintf(tw, "forwarded from another frontend (µs)\t%.0f\t%.0f\t\n", us(pct(fwd, 0.5)), us(pct(fwd, 0.99)))
	fmt.Fprintf(tw, "forwarding overhead (µs)\t%.0f\t%.0f\t\n", us(pct(fwd, 0.5)-pct(home, 0.5)), us(pct(fwd, 0.99)-pct(home, 0.99)))
	tw.Flush()
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func pct(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// cluster is the NATS server, its workers, and the frontends' binary.
type cluster struct {
	bin, nats, dir string
}

func (c *cluster) worker(name string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(c.dir, name), 0o700); err != nil {
		return nil, err
	}
	nc, err := remote.Connect(c.nats)
	if err != nil {
		return nil, err
	}
	w, err := remote.NewWorker(nc, remote.WithName(name), remote.WithLease(*lease), remote.WithMaxTasks(1000), remote.WithDir(filepath.Join(c.dir, name)))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return func() { _ = w.Close(context.Background()); nc.Close() }, nil
}

// frontend is a taskrt-mcp -http -nats process.
type frontend struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

var (
	servesRE = regexp.MustCompile(`serving MCP at (http://\S+)`)
)

// start runs a frontend on natsURL.
func (c *cluster) start(natsURL string) (*frontend, error) {
	cmd := exec.Command(c.bin, "-http", "127.0.0.1:0", "-nats", natsURL, "-lease", lease.String(), "-v")
	errs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &frontend{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	logf, err := os.CreateTemp(c.dir, "frontend-*.log")
	if err != nil {
		return nil, err
	}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(errs)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if m := servesRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_ = cmd.Wait()
		close(f.exited)
	}()
	select {
	case f.url = <-found:
		return f, nil
	case <-f.exited:
		return nil, errors.New("a frontend exited at its start")
	case <-time.After(time.Minute):
		f.kill()
		return nil, errors.New("a frontend did not start within a minute")
	}
}

func (f *frontend) kill() {
	_ = f.cmd.Process.Signal(syscall.SIGKILL)
	<-f.exited
}

func (f *frontend) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(time.Minute):
		f.kill()
	}
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends one sessionless tools/call; err is a transport failure (the
// frontend died during the call).
func call(ctx context.Context, u, tool string, args map[string]any) (sessionless.Result, error) {
	return sessionless.Call(ctx, client, u, tool, args)
}

// start starts command in a new scope at f.
func startScope(ctx context.Context, f *frontend, command string) (id, scope string, err error) {
	r, err := call(ctx, f.url, "bash", map[string]any{"command": command, "run_in_background": true})
	if err != nil {
		return "", "", err
	}
	id, _ = r.Structured["task_id"].(string)
	scope, _ = r.Structured["scope"].(string)
	if r.IsError || id == "" || scope == "" {
		return "", "", fmt.Errorf("start: %q %q", r.Texts, r.RPCError)
	}
	return id, scope, nil
}

// takeover is one takeover run: a scope with a long task homed on A, A killed
// (or cut off), and the time until B serves the scope with the task running.
func (c *cluster) takeover(cut bool) (time.Duration, error) {
	natsURL := c.nats
	var px *blackhole.Proxy
	if cut {
		u, err := url.Parse(c.nats)
		if err != nil {
			return 0, err
		}
		if px, err = blackhole.New(u.Host); err != nil {
			return 0, err
		}
		defer px.Close()
		natsURL = px.URL()
	}
	a, err := c.start(natsURL)
	if err != nil {
		return 0, err
	}
	defer a.kill()
	b, err := c.start(c.nats)
	if err != nil {
		return 0, err
	}
	defer b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, scope, err := startScope(ctx, a, "exec sleep 600")
	if err != nil {
		return 0, err
	}
	began := time.Now()
	if cut {
		px.Cut()
	} else {
		a.kill()
	}
	for {
		r, err := call(ctx, b.url, "task_output", map[string]any{"scope": scope, "task_id": id})
		if err != nil {
			return 0, err
		}
		if r.RPCError == "" {
			d := time.Since(began)
			if r.IsError || !strings.HasSuffix(strings.Join(r.Texts, "\n"), "[status: running]") {
				return 0, fmt.Errorf("after the takeover: %q", r.Texts)
			}
			_, _ = call(ctx, b.url, "scope_close", map[string]any{"scope": scope})
			return d, nil
		}
		if !strings.Contains(r.RPCError, "unreachable") {
			return 0, errors.New(r.RPCError)
		}
	}
}

// forwarded is task_list's latency at a scope's home and through another
// frontend.
func (c *cluster) forwarded() (home, fwd []time.Duration, err error) {
	a, err := c.start(c.nats)
	if err != nil {
		return nil, nil, err
	}
	defer a.stop()
	b, err := c.start(c.nats)
	if err != nil {
		return nil, nil, err
	}
	defer b.stop()
	ctx := context.Background()
	_, scope, err := startScope(ctx, a, "exec sleep 600")
	if err != nil {
		return nil, nil, err
	}
	defer call(ctx, a.url, "scope_close", map[string]any{"scope": scope})
	for i := range 2 * *samples {
		f, into := a, &home
		if i%2 == 1 {
			f, into = b, &fwd
		}
		t0 := time.Now()
		r, err := call(ctx, f.url, "task_list", map[string]any{"scope": scope})
		if err != nil || r.IsError || r.RPCError != "" {
			return nil, nil, fmt.Errorf("task_list: %v %q %q", err, r.Texts, r.RPCError)
		}
		*into = append(*into, time.Since(t0))
	}
	return home, fwd, nil
}
