package agentsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/taskrt/taskrt/producers/remote"
)

// workerLease is the lease of the owner node and the workers of a scenario with
// workers: short, so that a stopped worker is declared lost within about 2.5 s.
const workerLease = 2 * time.Second

// workerSpec is one worker of a scenario that runs its bash commands on workers
// (the scenario's "workers"). Gates let the models place work deterministically: a worker
// that starts on a gate takes no work before it, and one that is full takes none.
type workerSpec struct {
	Name     string `json:"name"`
	MaxTasks int    `json:"max_tasks,omitempty"` // 0: remote.DefaultMaxTasks
	// StartOn: start the worker when this gate opens ("" = before the agents run);
	// Ready is opened once it takes work.
	StartOn string `json:"start_on,omitempty"`
	Ready   string `json:"ready,omitempty"`
	// StopOn: when this gate opens, the worker is stopped mid-run — cut off from
	// NATS, as a crashed or partitioned machine is: it kills its commands itself,
	// and once its lease lapses the owner settles them "failed, worker lost: NAME".
	StopOn string `json:"stop_on,omitempty"`
}

func validateWorkers(ws []workerSpec) error {
	seen := map[string]bool{}
	for i, w := range ws {
		switch {
		case w.Name == "":
			return fmt.Errorf("worker %d has no name", i+1)
		case seen[w.Name]:
			return fmt.Errorf("worker %s is listed twice", w.Name)
		case w.MaxTasks < 0:
			return fmt.Errorf("worker %s: max_tasks must not be negative", w.Name)
		}
		seen[w.Name] = true
	}
	return nil
}

// workerNodes is a scenario's NATS deployment: an embedded server, the Sim's owner
// node, and the workers. A nil *workerNodes is a scenario without workers.
type workerNodes struct {
	dir   string
	srv   *remote.Server
	onc   *nats.Conn
	owner *remote.Producer

	ctx      context.Context // the play's: ends every wait on a gate
	wg       sync.WaitGroup  // the goroutines that wait on gates
	mu       sync.Mutex      // protects workers and failures
	workers  []*workerNode
	failures []string
}

type workerNode struct {
	w  *remote.Worker
	nc *nats.Conn
}

func startNodes() (*workerNodes, error) {
	dir, err := os.MkdirTemp("", "agentsim-nats-")
	if err != nil {
		return nil, err
	}
	n := &workerNodes{dir: dir}
	if n.srv, err = remote.StartServer(dir, 0); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if n.onc, err = remote.Connect(n.srv.URL()); err == nil {
		n.owner, err = remote.New(n.onc, remote.WithLease(workerLease))
	}
	if err != nil {
		n.close(context.Background())
		return nil, err
	}
	return n, nil
}

// play starts the workers (at once, or on their gates) and stops them on theirs,
// until ctx ends.
func (n *workerNodes) play(ctx context.Context, sim *Sim, specs []workerSpec) {
	if n == nil {
		return
	}
	n.ctx = ctx
	for _, spec := range specs {
		if spec.StartOn == "" {
			n.start(spec, sim)
			continue
		}
		n.wg.Go(func() {
			if sim.gates.wait(ctx, spec.StartOn) == nil {
				n.start(spec, sim)
			}
		})
	}
}

func (n *workerNodes) start(spec workerSpec, sim *Sim) {
	fail := func(err error) {
		n.mu.Lock()
		n.failures = append(n.failures, fmt.Sprintf("worker %s: %v", spec.Name, err))
		n.mu.Unlock()
	}
	nc, err := remote.Connect(n.srv.URL())
	if err != nil {
		fail(err)
		return
	}
	w, err := remote.NewWorker(nc, remote.WithName(spec.Name), remote.WithLease(workerLease), remote.WithMaxTasks(spec.MaxTasks))
	if err != nil {
		nc.Close()
		fail(err)
		return
	}
	n.mu.Lock()
	n.workers = append(n.workers, &workerNode{w: w, nc: nc})
	n.mu.Unlock()
	if spec.Ready != "" {
		sim.gates.open(spec.Ready)
	}
	if spec.StopOn != "" {
		n.wg.Go(func() {
			if sim.gates.wait(n.ctx, spec.StopOn) == nil {
				nc.Close() // cut off: the worker fences itself, its lease lapses
			}
		})
	}
}

// close ends the deployment after the Sim closed and the play's context ended:
// the gate waits, the owner node, every worker
// (each must hold no command and no process by then), the server. It returns what
// was wrong and how many processes the workers still had.
func (n *workerNodes) close(ctx context.Context) (failures []string, processes int) {
	if n == nil {
		return nil, 0
	}
	n.wg.Wait()
	if n.owner != nil {
		if err := n.owner.Close(ctx); err != nil {
			failures = append(failures, "owner node: "+err.Error())
		}
	}
	if n.onc != nil {
		n.onc.Close()
	}
	n.mu.Lock()
	workers := n.workers
	n.mu.Unlock()
	for _, wn := range workers {
		if err := wn.w.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
			failures = append(failures, fmt.Sprintf("worker %s: %v", wn.w.Name(), err))
		}
		processes += wn.w.Processes()
		wn.nc.Close()
	}
	if n.srv != nil {
		n.srv.Close()
	}
	_ = os.RemoveAll(n.dir)
	n.mu.Lock()
	failures = append(failures, n.failures...)
	n.mu.Unlock()
	return failures, processes
}
