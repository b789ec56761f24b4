//go:build linux

package bash

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The cgroup pool. Making a task's cgroups (mkdir in cgroup v2, and in the pids v1
// hierarchy where it counts the task's processes), opening the v2 directory for
// CLONE_INTO_CGROUP, and removing them at release were most of what cgroup mode
// added to a start. A producer therefore keeps the cgroups of its settled tasks
// without limits, empty, and hands them to its next tasks without limits:
//
//   - a cgroup holds no descriptor while its task runs or while it is kept (every
//     descriptor of this process is copied and closed by each later spawn): the
//     next task opens it again for CLONE_INTO_CGROUP;
//   - a cgroup goes back to the pool only once its task settled with nothing left
//     (nothing lived in it when the leader had exited, "populated 0" and "frozen
//     0", and its process count said the leader was all that was left: see
//     taskCgroup.reusable; where no pids controller counts, nothing is reused), its leader
//     is reaped, and it is still as a new one would be: no nested cgroup, no
//     process counted in its pids count, every limit file at its default value (a
//     task may write its own cgroup's files: one that did is removed, not reused);
//   - a cgroup that was killed through cgroup.kill is never reused (see
//     taskCgroup.reusable: Linux then kills whatever is forked into it);
//   - a task with limits never gets a pooled cgroup: its cgroups are made for it
//     and removed when it settles, so no limit can pass from one task to another;
//   - at most poolMax empty cgroups are kept; one unused for poolIdle is removed,
//     and Producer.Close (or the producer's garbage collection) removes them all.
//
// So "after Done" a task's cgroup holds nothing of the task, no process and no
// zombie, and either no longer exists or is one of at most poolMax empty cgroups
// of its producer waiting for the next task, named task-<producer>-p<k>.

const (
	poolMax  = 16              // empty cgroups a producer keeps at most
	poolIdle = 2 * time.Second // an empty cgroup unused this long is removed
)

// cgroupPool is one producer's empty task cgroups.
type cgroupPool struct {
	tree   *cgroupTree
	prefix string // names of its cgroups: "task-<producer>-p"

	mu     sync.Mutex
	idle   []*taskCgroup // empty and reusable, the most recently parked last
	next   uint64        // numbers its cgroups
	closed bool          // Close ran: nothing is parked any more
	timer  *time.Timer   // removes the cgroups idle for poolIdle; nil while none is parked
}

func newCgroupPool(t *cgroupTree, prefix string) *cgroupPool {
	return &cgroupPool{tree: t, prefix: prefix}
}

// get returns an empty cgroup for a task without limits: a parked one, else a new
// one.
func (p *cgroupPool) get(log *slog.Logger) (*taskCgroup, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if len(p.idle) == 0 {
			pools.remove(p)
		}
		p.mu.Unlock()
		fd, err := p.tree.openDir(filepath.Base(c.dir))
		if err != nil { // gone: make another
			_ = c.remove()
			return p.get(log)
		}
		c.fd, c.log, c.proven = fd, log, false
		return c, nil
	}
	p.next++
	name := p.prefix + strconv.FormatUint(p.next, 10)
	closed := p.closed
	p.mu.Unlock()
	c, err := p.tree.newTask(name, Limits{}, log)
	if err != nil {
		return nil, err
	}
	if !closed {
		c.pool = p
	}
	return c, nil
}

// put parks c, which its task released, or removes it: when the pool is closed or
// full, or when c is not as a new cgroup would be (see reusable).
func (p *cgroupPool) put(c *taskCgroup) error {
	c.closeFD() // already closed once the leader was spawned
	if !c.reusable() {
		return c.remove()
	}
	p.mu.Lock()
	if p.closed || len(p.idle) >= poolMax {
		p.mu.Unlock()
		return c.remove()
	}
	c.log, c.parked = nil, time.Now()
	p.idle = append(p.idle, c)
	if len(p.idle) == 1 {
		pools.add(p)
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(poolIdle, p.trimExpired)
	}
	p.mu.Unlock()
	return nil
}

func (p *cgroupPool) trimExpired() {
	if err := p.trim(time.Now()); err != nil {
		p.tree.log.Warn("bash: removing an unused task cgroup", "err", err)
	}
}

// trim removes the cgroups parked for poolIdle or longer at now, and re-arms the
// timer for the others.
func (p *cgroupPool) trim(now time.Time) error {
	p.mu.Lock()
	var expired []*taskCgroup
	kept := p.idle[:0]
	for _, c := range p.idle { // oldest first
		if now.Sub(c.parked) >= poolIdle {
			expired = append(expired, c)
		} else {
			kept = append(kept, c)
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.timer = nil
	if len(p.idle) > 0 {
		p.timer = time.AfterFunc(poolIdle-now.Sub(p.idle[0].parked), p.trimExpired)
	} else {
		pools.remove(p)
	}
	p.mu.Unlock()
	return removeAll(expired)
}

// close removes every parked cgroup; cgroups of running tasks are removed when
// their tasks release them. Idempotent.
func (p *cgroupPool) close() error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	pools.remove(p)
	p.mu.Unlock()
	return removeAll(idle)
}

// parkedDirs lists the directories of the parked cgroups.
func (p *cgroupPool) parkedDirs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dirs []string
	for _, c := range p.idle {
		dirs = append(dirs, c.dir)
	}
	return dirs
}

func removeAll(cs []*taskCgroup) error {
	var errs []error
	for _, c := range cs {
		if err := c.remove(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.dir, err))
		}
	}
	return errors.Join(errs...)
}

// pools holds the pools that have parked cgroups, for closeParked.
var pools poolSet

type poolSet struct {
	mu sync.Mutex // protects m
	m  map[*cgroupPool]bool
}

func (s *poolSet) add(p *cgroupPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[*cgroupPool]bool{}
	}
	s.m[p] = true
}

func (s *poolSet) remove(p *cgroupPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, p)
}

func (s *poolSet) all() []*cgroupPool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ps []*cgroupPool
	for p := range s.m {
		ps = append(ps, p)
	}
	return ps
}
