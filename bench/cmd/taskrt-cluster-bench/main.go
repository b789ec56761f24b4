// Command taskrt-cluster-bench measures remote tasks (producers/remote, over an
// embedded NATS server on loopback) next to the same on a local bash producer,
// and the failover times of worker nodes, and prints one table (progress goes to
// stderr).
//
// Usage:
//
//	taskrt-cluster-bench [-runs 10] [-samples 1000] [-floods 3] [-lease 1s]
//
// Figures, each remote next to local with their ratio: the wake-up of a routed
// ReadUntil (input sent → the echoed line read) and of a Wait (eof sent → the
// settled task returned), p50 and p99; start → settle throughput of `true`, and
// its sequential latency; output throughput of a flood (the median of -floods
// runs each). Then remote output on its own: what NATS alone carries on this
// machine (the ceiling of a remote flood), a flood in block mode read as it
// fills, and 50 floods at once through a taskrt-worker process, with that
// process's peak RSS (VmHWM). Then failover, p50 and
// max over -runs: a worker process SIGKILLed → its tasks "worker lost"; an owner
// node process SIGKILLed → its last process gone on the workers; a worker, and an
// owner node, cut off behind a blackhole proxy → self-fence, with the fence
// margin (how long before anyone else acted on the lapse the fenced node had
// stopped its work), which must be above zero in every run.
//
// It builds taskrt-worker (with its guard) into a temporary directory to run the
// worker processes; the owner node process is this program re-executed.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/blackhole"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/producers/remote"
)

// ownerEnv makes this program an owner node process: "URL LEASE N".
const ownerEnv = "TASKRT_CLUSTER_BENCH_OWNER"

var (
	runs    = flag.Int("runs", 10, "runs of each failover figure")
	samples = flag.Int("samples", 1000, "samples of each latency figure (the p99 is the tenth worst of 1000)")
	lease   = flag.Duration("lease", time.Second, "lease of every node")
	floods  = flag.Int("floods", 3, "runs of each flood figure (the median is shown)")
)

func main() {
	if spec := os.Getenv(ownerEnv); spec != "" {
		os.Exit(ownerNode(spec))
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "taskrt-cluster-bench:", err)
		os.Exit(1)
	}
}

type row struct {
	figure, unit string
	local, rem   float64 // rem only when local is 0
	note         string
}

func run() error {
	dir, err := os.MkdirTemp("", "taskrt-cluster-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "taskrt-cluster-bench: %d CPUs, lease %s; building taskrt-worker …\n", runtime.NumCPU(), *lease)
	workerBin := filepath.Join(dir, "taskrt-worker")
	if out, err := exec.Command("go", "build", "-o", workerBin, "github.com/taskrt/taskrt/producers/remote/cmd/taskrt-worker").CombinedOutput(); err != nil {
		return fmt.Errorf("building taskrt-worker: %v\n%s", err, out)
	}
	srv, err := remote.StartServer(filepath.Join(dir, "nats"), 0)
	if err != nil {
		return err
	}
	defer srv.Close()
	srvURL := srv.URL()

	var rows []row
	// 1. Latency and throughput: a runtime on a local bash producer, and one on a
	// remote producer with one worker in this process.
	local := bash.New()
	lrt, err := newRuntime()
	if err != nil {
		return err
	}
	defer lrt.Close(context.Background())
	wnc, err := remote.Connect(srvURL)
	if err != nil {
		return err
	}
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("bench"), remote.WithLease(*lease), remote.WithMaxTasks(64), remote.WithDir(dir))
	if err != nil {
		return err
	}
	defer w.Close(context.Background())
	onc, err := remote.Connect(srvURL)
	if err != nil {
		return err
	}
	defer onc.Close()
	rp, err := remote.New(onc, remote.WithLease(*lease))
	if err != nil {
		return err
	}
	defer rp.Close(context.Background())
	rrt, err := newRuntime()
	if err != nil {
		return err
	}
	defer rrt.Close(context.Background())
	type side struct {
		rt   *actors.Runtime
		spec func(bash.Command) messages.Spec
	}
	sides := []side{{lrt, func(c bash.Command) messages.Spec { return local.Spec("", c) }}, {rrt, func(c bash.Command) messages.Spec { return rp.Spec("", c) }}}
	pair := func(figure, unit, note string, f func(side) (float64, error)) error {
		fmt.Fprintf(os.Stderr, "%-44s … ", figure)
		var v [2]float64
		for i, s := range sides {
			x, err := f(s)
			if err != nil {
				return fmt.Errorf("%s: %w", figure, err)
			}
			v[i] = x
		}
		fmt.Fprintf(os.Stderr, "local %.3g, remote %.3g %s\n", v[0], v[1], unit)
		rows = append(rows, row{figure, unit, v[0], v[1], note})
		return nil
	}
	var readLat, waitLat [2][]time.Duration
	for i, s := range sides {
		if readLat[i], err = readWakeups(s.rt, s.spec, *samples); err != nil {
			return err
		}
		if waitLat[i], err = waitWakeups(s.rt, s.spec, *samples/4); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		d    [2][]time.Duration
	}{{"ReadUntil wake-up (input → line read)", readLat}, {"Wait wake-up (eof → settled)", waitLat}} {
		for _, q := range []float64{0.5, 0.99} {
			rows = append(rows, row{fmt.Sprintf("%s p%.0f", f.name, q*100), "ms", ms(pct(f.d[0], q)), ms(pct(f.d[1], q)), ""})
		}
	}
	if err := pair("start → settle, 200 `true`, 16 at a time", "tasks/s", "", func(s side) (float64, error) { return throughput(s.rt, s.spec, 200, 16) }); err != nil {
		return err
	}
	if err := pair("/bin/true start → settled, sequential p50", "ms", "", func(s side) (float64, error) {
		d, err := sequential(s.rt, s.spec, 50)
		return ms(pct(d, 0.5)), err
	}); err != nil {
		return err
	}
	if err := pair(fmt.Sprintf("flood output (64 MiB), median of %d", *floods), "MB/s", "", func(s side) (float64, error) {
		return median(*floods, func() (float64, error) { return flood(s.rt, s.spec, 64<<20) })
	}); err != nil {
		return err
	}
	_ = w.Close(context.Background())
	_ = rp.Close(context.Background())

	// 2. Remote output on its own.
	var orows []row
	one := func(figure, unit, note string, f func() (float64, error)) error {
		fmt.Fprintf(os.Stderr, "%-44s … ", figure)
		v, err := f()
		if err != nil {
			return fmt.Errorf("%s: %w", figure, err)
		}
		fmt.Fprintf(os.Stderr, "%.3g %s\n", v, unit)
		orows = append(orows, row{figure: figure, unit: unit, rem: v, note: note})
		return nil
	}
	if err := one(fmt.Sprintf("NATS alone: 1 MiB messages, median of %d", *floods), "MB/s", "the ceiling of a remote flood here", func() (float64, error) {
		return median(*floods, func() (float64, error) { return natsAlone(srvURL, 256<<20) })
	}); err != nil {
		return err
	}
	if err := one("block mode flood (64 MiB) read as it fills", "MB/s", "reads of 256 KiB, both sides", func() (float64, error) {
		return blockFlood(srvURL, dir, 64<<20)
	}); err != nil {
		return err
	}
	var peak, idle float64
	if err := one("50 floods of 16 MiB at once through a worker", "MB/s", "", func() (float64, error) {
		v, p, i, err := manyFloods(srvURL, workerBin, dir, 50, 16<<20)
		peak, idle = p, i
		return v, err
	}); err != nil {
		return err
	}
	orows = append(orows, row{figure: "  the worker process's peak RSS (VmHWM)", unit: "MiB", rem: peak, note: fmt.Sprintf("%.3g MiB idle; the default output budget", idle)})

	// 3. Failover.
	fail := []struct {
		name string
		f    func(i int) (d, margin time.Duration, err error)
	}{
		{"worker SIGKILL → worker lost", func(i int) (time.Duration, time.Duration, error) { return workerKill(srvURL, workerBin, dir, i) }},
		{"owner SIGKILL → its last remote process gone", func(i int) (time.Duration, time.Duration, error) { return ownerKill(srvURL, dir, i) }},
		{"worker partition → self-fence (processes gone)", func(i int) (time.Duration, time.Duration, error) { return partition(srvURL, dir, i, false) }},
		{"owner partition → self-fence (tasks failed)", func(i int) (time.Duration, time.Duration, error) { return partition(srvURL, dir, i, true) }},
	}
	type frow struct {
		name string
		d, m []time.Duration
	}
	var frows []frow
	for _, f := range fail {
		fmt.Fprintf(os.Stderr, "%-44s … ", f.name)
		fr := frow{name: f.name}
		for i := range *runs {
			d, m, err := f.f(i)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", f.name, i, err)
			}
			fr.d, fr.m = append(fr.d, d), append(fr.m, m)
		}
		fmt.Fprintf(os.Stderr, "p50 %s\n", pct(fr.d, 0.5).Round(time.Millisecond))
		frows = append(frows, fr)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "taskrt-cluster-bench: one embedded NATS server on loopback, lease %s, %d CPUs (machine shared with other sessions)\n\n", *lease, runtime.NumCPU())
	fmt.Fprintln(tw, "figure\tlocal\tremote\tremote/local\tunit")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.3g\t%.3g\t%.2f\t%s\n", r.figure, r.local, r.rem, r.rem/r.local, r.unit)
	}
	fmt.Fprintln(tw, "\nremote output\tvalue\tunit\tnote")
	for _, r := range orows {
		fmt.Fprintf(tw, "%s\t%.3g\t%s\t%s\n", r.figure, r.rem, r.unit, r.note)
	}
	fmt.Fprintf(tw, "\nfailover (%d runs)\tp50\tmax\tfence margin min\tfence margin p50\n", *runs)
	ok := true
	for _, f := range frows {
		minMargin := slices.Min(f.m)
		if minMargin <= 0 {
			ok = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.name, pct(f.d, 0.5).Round(time.Millisecond), slices.Max(f.d).Round(time.Millisecond), minMargin.Round(time.Millisecond), pct(f.m, 0.5).Round(time.Millisecond))
	}
	_ = tw.Flush()
	if !ok {
		return errors.New("a fence margin was not above zero")
	}
	return nil
}

func newRuntime() (*actors.Runtime, error) {
	rt, err := actors.NewRuntime(actors.WithoutOwnerLimit())
	if err != nil {
		return nil, err
	}
	rt.Tasks().AttachSurface("bench")
	return rt, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

const limit = 30 * time.Second

// readWakeups: a line written to the task's stdin, echoed, read back with ReadUntil.
func readWakeups(rt *actors.Runtime, spec func(bash.Command) messages.Spec, n int) ([]time.Duration, error) {
	ctx := context.Background()
	id, err := rt.Tasks().Start(ctx, spec(bash.Command{Command: `while read -r l; do echo "$l"; done`, Stdin: bash.StdinPipe}))
	if err != nil {
		return nil, err
	}
	var ds []time.Duration
	for i := range n {
		t0 := time.Now()
		if err := rt.Tasks().Input(ctx, id, "", fmt.Appendf(nil, "ping-%d\n", i), false); err != nil {
			return nil, err
		}
		r, err := rt.Tasks().ReadUntil(ctx, id, "", fmt.Sprintf("ping-%d\n", i), limit)
		if err != nil || r.Reason != messages.UntilMatched {
			return nil, fmt.Errorf("read wake-up: %v %v", err, r.Reason)
		}
		ds = append(ds, time.Since(t0))
	}
	_, _, _ = rt.Tasks().Kill(ctx, id, "", "")
	_, err = rt.Tasks().Wait(ctx, id, "", limit)
	return ds, err
}

// waitWakeups: eof sent to a task that exits on it; Wait returns it settled.
func waitWakeups(rt *actors.Runtime, spec func(bash.Command) messages.Spec, n int) ([]time.Duration, error) {
	ctx := context.Background()
	var ds []time.Duration
	for range n {
		id, err := rt.Tasks().Start(ctx, spec(bash.Command{Command: `cat >/dev/null`, Stdin: bash.StdinPipe}))
		if err != nil {
			return nil, err
		}
		if _, err := rt.Tasks().Peek(ctx, id, "", 0, 1); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := rt.Tasks().Input(ctx, id, "", nil, true); err != nil {
			return nil, err
		}
		s, err := rt.Tasks().Wait(ctx, id, "", limit)
		if err != nil || !s.Status.Terminal() {
			return nil, fmt.Errorf("wait wake-up: %v %s", err, s.Status)
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

func throughput(rt *actors.Runtime, spec func(bash.Command) messages.Spec, n, par int) (float64, error) {
	ctx := context.Background()
	t0 := time.Now()
	sem := make(chan struct{}, par)
	errs := make(chan error, n)
	for range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			id, err := rt.Tasks().Start(ctx, spec(bash.Command{Command: "true"}))
			if err == nil {
				_, err = rt.Tasks().Wait(ctx, id, "", limit)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

func sequential(rt *actors.Runtime, spec func(bash.Command) messages.Spec, n int) ([]time.Duration, error) {
	ctx := context.Background()
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		id, err := rt.Tasks().Start(ctx, spec(bash.Command{Command: "/bin/true"}))
		if err != nil {
			return nil, err
		}
		if _, err := rt.Tasks().Wait(ctx, id, "", limit); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

func flood(rt *actors.Runtime, spec func(bash.Command) messages.Spec, n int) (float64, error) {
	ctx := context.Background()
	t0 := time.Now()
	id, err := rt.Tasks().Start(ctx, spec(bash.Command{Command: fmt.Sprintf("head -c %d /dev/zero", n)}))
	if err != nil {
		return 0, err
	}
	if _, err := rt.Tasks().Wait(ctx, id, "", limit); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	pk, err := rt.Tasks().Peek(ctx, id, "", 0, 1)
	if err != nil {
		return 0, err
	}
	if pk.Written != int64(n) {
		return 0, fmt.Errorf("flood: %d of %d bytes", pk.Written, n)
	}
	return float64(n) / (1 << 20) / d.Seconds(), nil
}

func median(n int, f func() (float64, error)) (float64, error) {
	var vs []float64
	for range max(1, n) {
		v, err := f()
		if err != nil {
			return 0, err
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs[len(vs)/2], nil
}

// natsAlone: n bytes in 1 MiB messages from one connection to a subscriber on
// another, through the server: what a remote flood cannot beat on this machine.
func natsAlone(srvURL string, n int) (float64, error) {
	pub, err := remote.Connect(srvURL)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	sub, err := remote.Connect(srvURL)
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	const size = 1<<20 - 1024 // under the server's max_payload with room for the protocol
	done := make(chan struct{})
	got := 0
	s, err := sub.Subscribe("bench.nats-alone", func(m *nats.Msg) {
		if got += len(m.Data); got >= n {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer s.Unsubscribe()
	_ = s.SetPendingLimits(-1, -1)
	if err := sub.Flush(); err != nil {
		return 0, err
	}
	buf := make([]byte, size)
	t0 := time.Now()
	for sent := 0; sent < n; sent += size {
		if err := pub.Publish("bench.nats-alone", buf); err != nil {
			return 0, err
		}
	}
	select {
	case <-done:
	case <-time.After(limit):
		return 0, errors.New("nats alone: not everything arrived")
	}
	return float64(n) / (1 << 20) / time.Since(t0).Seconds(), nil
}

// outputLease is the lease of the nodes of the output figures: long, so that a
// loaded machine fences none of them while they stream.
const outputLease = 10 * time.Second

// blockFlood: a block-mode flood through a worker in this process, read as it
// fills (a Wait returns at full, a Read takes what is unread); every byte must
// arrive, with no marker.
func blockFlood(srvURL, dir string, n int) (float64, error) {
	reads := []output.Option{output.WithMaxRead(256 << 10), output.WithMemory(32<<10, 256<<10)}
	wnc, err := remote.Connect(srvURL)
	if err != nil {
		return 0, err
	}
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("bench-block"), remote.WithLease(outputLease), remote.WithDir(dir), remote.WithBashOptions(bash.WithOutput(reads...)))
	if err != nil {
		return 0, err
	}
	defer w.Close(context.Background())
	onc, err := remote.Connect(srvURL)
	if err != nil {
		return 0, err
	}
	defer onc.Close()
	p, err := remote.New(onc, remote.WithLease(outputLease), remote.WithOutput(reads...))
	if err != nil {
		return 0, err
	}
	defer p.Close(context.Background())
	rt, err := newRuntime()
	if err != nil {
		return 0, err
	}
	defer rt.Close(context.Background())
	ctx := context.Background()
	t0 := time.Now()
	id, err := rt.Tasks().Start(ctx, p.Spec("", bash.Command{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", n), BlockOutput: true}))
	if err != nil {
		return 0, err
	}
	read := 0
	for {
		if _, err := rt.Tasks().Wait(ctx, id, "", limit); err != nil { // full, or settled
			return 0, err
		}
		r, err := rt.Tasks().Read(ctx, id, "")
		if err != nil {
			return 0, err
		}
		read += len(r.Output)
		if r.Snapshot.Status.Terminal() && r.Output == "" {
			break
		}
	}
	if read != n {
		return 0, fmt.Errorf("block flood: read %d of %d bytes", read, n)
	}
	return float64(n) / (1 << 20) / time.Since(t0).Seconds(), nil
}

// manyFloods: k floods of n bytes at once from this process's owner node
// through a taskrt-worker process; the throughput over all, and the worker
// process's peak RSS (VmHWM) and RSS before the floods, in MiB.
func manyFloods(srvURL, bin, dir string, k, n int) (mbps, peak, idle float64, err error) {
	cmd := exec.Command(bin, "-nats", srvURL, "-name", "bench-rss", "-lease", outputLease.String(), "-dir", dir, "-max-tasks", fmt.Sprint(k))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if sc := bufio.NewScanner(out); !sc.Scan() {
		return 0, 0, 0, errors.New("no ready line")
	}
	if idle, err = vmKiB(cmd.Process.Pid, "VmRSS"); err != nil {
		return 0, 0, 0, err
	}
	nc, err := remote.Connect(srvURL)
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	p, err := remote.New(nc, remote.WithLease(outputLease))
	if err != nil {
		return 0, 0, 0, err
	}
	defer p.Close(context.Background())
	t0 := time.Now()
	var hooks []messages.Hooks
	for range k {
		h, err := p.Start(bash.Command{Command: fmt.Sprintf("head -c %d /dev/zero", n)})
		if err != nil {
			return 0, 0, 0, err
		}
		hooks = append(hooks, h)
	}
	for _, h := range hooks {
		o := <-h.Done
		if o.Status != messages.Completed || h.Output.Written() != int64(n) {
			return 0, 0, 0, fmt.Errorf("flood: %v, %d of %d bytes", o, h.Output.Written(), n)
		}
		h.Release()
	}
	mbps = float64(k*n) / (1 << 20) / time.Since(t0).Seconds()
	if peak, err = vmKiB(cmd.Process.Pid, "VmHWM"); err != nil {
		return 0, 0, 0, err
	}
	return mbps, peak / 1024, idle / 1024, nil
}

// vmKiB reads a field of /proc/PID/status, in KiB.
func vmKiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			var v float64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &v)
			return v, err
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// workerKill: three commands on a worker process, the process SIGKILLed; d is
// until the owner has settled all three "worker lost", margin how long before
// that the worker's guard had killed what it left (its stdout closes then).
func workerKill(srvURL, bin, dir string, i int) (time.Duration, time.Duration, error) {
	name := fmt.Sprintf("k%d", i)
	cmd := exec.Command(bin, "-nats", srvURL, "-name", name, "-lease", lease.String(), "-dir", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return 0, 0, errors.New("no ready line")
	}
	nc, err := remote.Connect(srvURL)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	p, err := remote.New(nc, remote.WithLease(*lease))
	if err != nil {
		return 0, 0, err
	}
	defer p.Close(context.Background())
	mark := fmt.Sprintf("TASKRT_CLUSTER_BENCH_RUN=%d-%d", os.Getpid(), i)
	var hooks []messages.Hooks
	for range 3 {
		h, err := p.Start(bash.Command{Command: "echo up; exec sleep 60", Env: []string{mark}})
		if err != nil {
			return 0, 0, err
		}
		grown(h)
		hooks = append(hooks, h)
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	guardDone := make(chan time.Time, 1)
	go func() {
		for marked(mark) {
			time.Sleep(2 * time.Millisecond) // a figure, not a test: when the guard's kill lands
		}
		guardDone <- time.Now()
	}()
	for _, h := range hooks {
		if o := <-h.Done; o.Detail != "worker lost: "+name {
			return 0, 0, fmt.Errorf("outcome %v", o)
		}
		h.Release()
	}
	lost := time.Now()
	select {
	case g := <-guardDone:
		return lost.Sub(killed), lost.Sub(g), nil
	default:
		<-guardDone
		return lost.Sub(killed), -1, nil // declared lost while the dead worker's processes still ran
	}
}

// marked reports whether a process on this machine carries mark in its
// environment.
func marked(mark string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains("\x00"+string(env), "\x00"+mark+"\x00") {
			return true
		}
	}
	return false
}

func grown(h messages.Hooks) {
	grew := make(chan struct{}, 1)
	h.Output.OnGrow(func() {
		select {
		case grew <- struct{}{}:
		default:
		}
	})
	for h.Output.Written() == 0 {
		<-grew
	}
}

// ownerNode is an owner node process: it starts n commands and waits for SIGKILL.
func ownerNode(spec string) int {
	f := strings.Fields(spec)
	d, _ := time.ParseDuration(f[1])
	var n int
	fmt.Sscan(f[2], &n)
	nc, err := remote.Connect(f[0])
	if err != nil {
		return 1
	}
	p, err := remote.New(nc, remote.WithLease(d))
	if err != nil {
		return 1
	}
	for range n {
		h, err := p.Start(bash.Command{Command: "echo up; exec sleep 60"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		grown(h)
	}
	fmt.Println("started")
	select {}
}

// ownerKill: an owner node process with four commands on two workers here,
// SIGKILLed; d is until both workers hold nothing (their processes gone), margin
// from the kill (the node stopped) to the first worker acting on the lapse.
func ownerKill(srvURL, dir string, i int) (time.Duration, time.Duration, error) {
	var ws []*remote.Worker
	for _, name := range []string{"ow1", "ow2"} {
		nc, err := remote.Connect(srvURL)
		if err != nil {
			return 0, 0, err
		}
		defer nc.Close()
		w, err := remote.NewWorker(nc, remote.WithName(fmt.Sprintf("%s-%d", name, i)), remote.WithLease(*lease), remote.WithMaxTasks(2), remote.WithDir(dir))
		if err != nil {
			return 0, 0, err
		}
		defer w.Close(context.Background())
		ws = append(ws, w)
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s 4", ownerEnv, srvURL, *lease))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "started" {
		return 0, 0, errors.New("the owner node did not start its commands")
	}
	first := make(chan time.Time, 2)
	for _, w := range ws {
		go func() {
			for w.Processes() == 2 {
				time.Sleep(2 * time.Millisecond) // a figure, not a test: when the first kill lands
			}
			first <- time.Now()
		}()
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	for _, w := range ws {
		<-w.Drained()
	}
	gone := time.Since(killed)
	acted := min((<-first).Sub(killed), (<-first).Sub(killed))
	return gone, acted, nil
}

// partition: a node behind a blackhole proxy, cut off. A worker: d is until its
// processes are gone, margin until the owner then declared it lost. An owner
// node: d is until its tasks failed, margin until the workers then killed them.
func partition(srvURL, dir string, i int, ownerSide bool) (time.Duration, time.Duration, error) {
	u, err := url.Parse(srvURL)
	if err != nil {
		return 0, 0, err
	}
	px, err := blackhole.New(u.Host)
	if err != nil {
		return 0, 0, err
	}
	defer px.Close()
	direct, err := remote.Connect(srvURL)
	if err != nil {
		return 0, 0, err
	}
	defer direct.Close()
	behind, err := remote.Connect(px.URL())
	if err != nil {
		return 0, 0, err
	}
	defer behind.Close()
	wnc, onc := behind, direct
	if ownerSide {
		wnc, onc = direct, behind
	}
	w, err := remote.NewWorker(wnc, remote.WithName(fmt.Sprintf("pw-%t-%d", ownerSide, i)), remote.WithLease(*lease), remote.WithDir(dir))
	if err != nil {
		return 0, 0, err
	}
	defer w.Close(context.Background())
	p, err := remote.New(onc, remote.WithLease(*lease))
	if err != nil {
		return 0, 0, err
	}
	defer p.Close(context.Background())
	var hooks []messages.Hooks
	for range 3 {
		h, err := p.Start(bash.Command{Command: "echo up; exec sleep 60"})
		if err != nil {
			return 0, 0, err
		}
		grown(h)
		hooks = append(hooks, h)
	}
	procsGone := make(chan time.Time, 1)
	go func() {
		for w.Processes() > 0 {
			time.Sleep(2 * time.Millisecond) // a figure, not a test
		}
		procsGone <- time.Now()
	}()
	cut := time.Now()
	px.Cut()
	for _, h := range hooks {
		o := <-h.Done
		want := "worker lost: "
		if ownerSide {
			want = "owner lease lost: "
		}
		if !strings.HasPrefix(o.Detail, want) {
			return 0, 0, fmt.Errorf("outcome %v", o)
		}
		h.Release()
	}
	settled := time.Now()
	if ownerSide {
		gone := <-procsGone
		return settled.Sub(cut), gone.Sub(settled), nil
	}
	select {
	case gone := <-procsGone:
		return gone.Sub(cut), settled.Sub(gone), nil
	default:
		return settled.Sub(cut), -1, nil
	}
}
