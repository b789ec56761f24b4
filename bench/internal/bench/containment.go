package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// The containment figures measure what the bash producer's containment
// costs: a short command from start to settlement in each mode next to plain
// os/exec, on an idle machine and with many idle processes on it (sweep mode scans
// /proc, whose cost grows with every process on the machine; cgroup mode reads
// nothing of /proc), and the kill storm: thousands of tasks disposed at once.

// IdleProcesses starts n idle processes on the machine: `sleep` children of one
// holder shell, so that they are processes of the machine, not children of this
// process or tasks of any producer. stop kills and reaps them all.
func IdleProcesses(ctx context.Context, n int) (stop func() error, err error) {
	if n <= 0 {
		return func() error { return nil }, nil
	}
	script := fmt.Sprintf(`trap 'kill $(jobs -p) 2>/dev/null; wait; exit 0' TERM
for i in $(seq 1 %d); do sleep 100000 & done
echo ready
wait`, n)
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", script)
	cmd.Env = append(os.Environ(), "TASKRT_BASH_TASK=") // not a task's
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("starting %d idle processes: %q, %v", n, line, err)
	}
	return func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return cmd.Wait()
	}, nil
}

// Idle is a set of idle processes for a row of the containment table: N of them,
// elsewhere on the machine (IdleProcesses) or as this process's children
// (IdleChildren).
type Idle struct {
	N        int  `json:"n"`
	Children bool `json:"host_children"`
}

func (i Idle) start(ctx context.Context) (func() error, error) {
	if i.Children {
		return IdleChildren(ctx, i.N)
	}
	return IdleProcesses(ctx, i.N)
}

// String says where the idle processes are: "2000 elsewhere", "2000 host children".
func (i Idle) String() string {
	if i.Children {
		return fmt.Sprintf("%d host children", i.N)
	}
	return fmt.Sprintf("%d elsewhere", i.N)
}

// ContainmentImpl is one column of the containment figure: the bash producer in a
// containment mode, or plain os/exec.
type ContainmentImpl string

// The containment columns.
const (
	ContainCgroup ContainmentImpl = "cgroup"
	ContainSweep  ContainmentImpl = "sweep"
	ContainExec   ContainmentImpl = "os/exec"
)

// ContainmentTrue measures the mean wall time of one `/bin/true` run, runs times in
// a row: through the bash producer (Start, then Done; no runtime) in a containment
// mode, or with os/exec running `/bin/bash -c /bin/true` and collecting its output.
func ContainmentTrue(ctx context.Context, impl ContainmentImpl, runs int, timer Timer) (time.Duration, error) {
	timer = timerOr(timer)
	var one func() error
	switch impl {
	case ContainExec:
		one = func() error {
			out, err := exec.CommandContext(ctx, "/bin/bash", "-c", "/bin/true").CombinedOutput()
			if err == nil && len(out) > 0 {
				err = fmt.Errorf("unexpected output %q", out)
			}
			return err
		}
	case ContainCgroup, ContainSweep:
		dir, err := os.MkdirTemp("", "taskrt-bench-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		mode := bash.CgroupContainment
		if impl == ContainSweep {
			mode = bash.SweepContainment
		}
		p := bash.New(bash.WithOutput(output.WithSpillDir(dir)), bash.WithContainment(mode))
		defer func() { _ = p.Close() }()
		one = func() error {
			h, err := p.Start(bash.Command{Command: "/bin/true"})
			if err != nil {
				return err
			}
			defer h.Release()
			if o := <-h.Done; o.Detail != "exit code: 0" {
				return fmt.Errorf("outcome %+v", o)
			}
			return nil
		}
		if err := one(); err != nil { // warm up; fails at once without cgroups
			return 0, err
		}
	default:
		return 0, fmt.Errorf("unknown containment impl %q", impl)
	}
	timer.ResetTimer()
	t0 := time.Now()
	for range runs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := one(); err != nil {
			return 0, err
		}
	}
	timer.StopTimer()
	return time.Since(t0) / time.Duration(max(runs, 1)), nil
}

// ContainmentRow is one line of the containment table: the per-run time of each
// column with idle processes on the machine.
type ContainmentRow struct {
	Idle     int                               `json:"idle_processes"`
	Children bool                              `json:"host_children"`     // the idle processes are children of this process
	Machine  int                               `json:"machine_processes"` // processes on the machine during the row
	PerRun   map[ContainmentImpl]time.Duration `json:"per_run"`
	Unusable map[ContainmentImpl]string        `json:"unusable,omitempty"` // why a column could not be measured
}

// ContainmentTable measures ContainmentTrue for every column at each idle count
// (processes elsewhere on the machine), rounds times each (the median is kept), the
// columns interleaved.
func ContainmentTable(ctx context.Context, idles []int, runs, rounds int) ([]ContainmentRow, error) {
	var at []Idle
	for _, n := range idles {
		at = append(at, Idle{N: n})
	}
	return ContainmentTableAt(ctx, at, runs, rounds)
}

// ContainmentTableAt is ContainmentTable for idle sets that may be children of
// this process.
func ContainmentTableAt(ctx context.Context, idles []Idle, runs, rounds int) ([]ContainmentRow, error) {
	return containmentTable(ctx, idles, []ContainmentImpl{ContainCgroup, ContainSweep, ContainExec}, runs, rounds)
}

func containmentTable(ctx context.Context, idles []Idle, impls []ContainmentImpl, runs, rounds int) ([]ContainmentRow, error) {
	var rows []ContainmentRow
	for _, idle := range idles {
		stop, err := idle.start(ctx)
		if err != nil {
			return rows, err
		}
		row := ContainmentRow{Idle: idle.N, Children: idle.Children, Machine: machineProcesses(), PerRun: map[ContainmentImpl]time.Duration{}, Unusable: map[ContainmentImpl]string{}}
		samples := map[ContainmentImpl][]time.Duration{}
		for range max(rounds, 1) {
			for _, impl := range impls {
				if _, bad := row.Unusable[impl]; bad {
					continue
				}
				d, err := ContainmentTrue(ctx, impl, runs, nil)
				if errors.Is(err, bash.ErrCgroupUnavailable) {
					row.Unusable[impl] = err.Error()
					continue
				}
				if err != nil {
					_ = stop()
					return rows, fmt.Errorf("%s with %s idle processes: %w", impl, idle, err)
				}
				samples[impl] = append(samples[impl], d)
			}
		}
		for impl, s := range samples {
			row.PerRun[impl] = medianDuration(s)
		}
		rows = append(rows, row)
		if err := stop(); err != nil {
			return rows, fmt.Errorf("stopping the idle processes: %w", err)
		}
	}
	return rows, nil
}

func medianDuration(s []time.Duration) time.Duration {
	c := append([]time.Duration(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c[len(c)/2]
}

// machineProcesses counts the processes on the machine.
func machineProcesses() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

// KillStormConfig sizes the kill storm.
type KillStormConfig struct {
	Tasks  int // bash tasks in all (default 2,000)
	Owners int // agents owning them, Tasks/Owners each (default 200)
	Mode   bash.Containment
	Grace  time.Duration // the producer's grace period (default bash.DefaultGrace)
	Log    func(format string, args ...any)
}

// KillStormResult is what the kill storm measured.
type KillStormResult struct {
	Mode      string        `json:"mode"`
	Tasks     int           `json:"tasks"`
	Owners    int           `json:"owners"`
	Grace     time.Duration `json:"grace"`
	Started   time.Duration `json:"started"`   // starting every task and waiting for its processes
	Processes int           `json:"processes"` // the tasks' processes when the storm began
	Settle    time.Duration `json:"settle"`    // from the first Dispose to the last one's return
	Killed    int           `json:"killed"`
	Completed int           `json:"completed"`
	Failed    int           `json:"failed"`
	Abandoned int           `json:"abandoned"` // failed with "abandoned: did not settle …"
	Survivors int           `json:"survivors"` // processes of the tasks alive after the storm
	Zombies   int           `json:"zombies"`   // zombie children of this process after the storm
}

// KillStorm starts cfg.Tasks bash tasks over cfg.Owners agents through the runtime
// (half of them `trap ” TERM; setsid sleep N & sleep N`, which ignore SIGTERM and
// leave a process outside their session, half a plain `sleep N`), waits until every
// process is in place, then disposes every owner at once and measures how long the
// disposals take to return, how the tasks ended, and what is left.
func KillStorm(ctx context.Context, cfg KillStormConfig) (res KillStormResult, err error) {
	if cfg.Tasks <= 0 {
		cfg.Tasks = 2_000
	}
	if cfg.Owners <= 0 {
		cfg.Owners = 200
	}
	if cfg.Grace <= 0 {
		cfg.Grace = bash.DefaultGrace
	}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	perOwner := (cfg.Tasks + cfg.Owners - 1) / cfg.Owners
	dir, err := os.MkdirTemp("", "taskrt-killstorm-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	p := bash.New(bash.WithOutput(output.WithSpillDir(dir)), bash.WithContainment(cfg.Mode), bash.WithGrace(cfg.Grace))
	defer func() { _ = p.Close() }()
	res = KillStormResult{Mode: p.Containment().String(), Tasks: cfg.Tasks, Owners: cfg.Owners, Grace: cfg.Grace}
	rt, err := actors.NewRuntime(actors.WithOwnerLimit(perOwner))
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, rt.Close(context.WithoutCancel(ctx))) }()
	defer rt.Tasks().AttachSurface("killstorm")()
	var (
		mu       sync.Mutex
		statuses = map[messages.Status]int{}
		abandon  int
		counted  int
		all      = make(chan struct{}) // closed once every task's settlement was counted
	)
	defer rt.Tasks().OnDone(func(s messages.Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		statuses[s.Status]++
		if strings.HasPrefix(s.Detail, "abandoned") {
			abandon++
		}
		if counted++; counted == cfg.Tasks {
			close(all)
		}
	})()

	sleep := fmt.Sprintf("sleep 100000.%d", os.Getpid()) // identifies the storm's processes
	owners := make([]messages.AgentID, cfg.Owners)
	for i := range owners {
		owners[i] = messages.AgentID(fmt.Sprintf("storm-%d", i))
		if err := rt.Agents().Register(ctx, owners[i]); err != nil {
			return res, err
		}
	}
	t0 := time.Now()
	var started atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Owners)
	for o, owner := range owners {
		wg.Go(func() {
			for i := range perOwner {
				n := o*perOwner + i
				if n >= cfg.Tasks {
					return
				}
				command := sleep
				if n%2 == 0 {
					command = "trap '' TERM; setsid " + sleep + " & " + sleep
				}
				if _, err := rt.Tasks().Start(ctx, p.Spec(owner, bash.Command{Command: command})); err != nil {
					errs <- fmt.Errorf("starting task %d: %w", n, err)
					return
				}
				started.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	want := cfg.Tasks + (cfg.Tasks+1)/2*2 // every task's sleep, plus the trap tasks' shell and setsid sleep
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if res.Processes = p.Live(); res.Processes >= want {
			break
		}
		logf("waiting for the tasks' processes: %d of %d", res.Processes, want)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Started = time.Since(t0)
	logf("%d tasks running with %d processes after %s; disposing %d owners at once", started.Load(), res.Processes, res.Started.Round(time.Millisecond), cfg.Owners)

	t0 = time.Now()
	for _, owner := range owners {
		wg.Go(func() {
			if err := rt.Agents().Dispose(ctx, owner); err != nil {
				logf("dispose %s: %v", owner, err)
			}
		})
	}
	wg.Wait()
	res.Settle = time.Since(t0)

	// Every task settled before its owner's disposal returned, but the listener
	// counts the settlements on its own time: wait for it (the runtime's Close would
	// silence it).
	select {
	case <-all:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	mu.Lock()
	res.Killed, res.Completed, res.Failed, res.Abandoned = statuses[messages.Killed], statuses[messages.Completed], statuses[messages.Failed], abandon
	mu.Unlock()
	res.Survivors = len(processesRunningCmd(strings.Fields(sleep)))
	res.Zombies = zombieChildren()
	if res.Survivors > 0 {
		killCmd(strings.Fields(sleep))
	}
	return res, nil
}

// processesRunningCmd lists the live processes whose command line is args.
func processesRunningCmd(args []string) []int {
	want := strings.Join(args, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killCmd kills the processes running exactly args (survivors of a failed storm).
func killCmd(args []string) {
	for _, pid := range processesRunningCmd(args) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// zombieChildren counts the zombie children of this process.
func zombieChildren() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) > 1 && f[0] == "Z" && f[1] == self {
			n++
		}
	}
	return n
}
