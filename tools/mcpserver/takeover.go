package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// Taking a scope over (cluster.go): the record, the adoption and the restore.

// takeParallel bounds the scopes one frontend takes at once after another's
// lease ended.
const takeParallel = 8

// ScopeOf maps a task's owner to its scope's handle and epoch while this
// frontend homes it: remote.WithScopes(srv.ScopeOf) makes a scope's commands the
// scope's, so that they outlive this frontend and the scope's next home adopts
// them. ok is false for any other owner (a connection, a session) and without a
// placement. It does not block.
func (s *Server) ScopeOf(owner messages.AgentID) (scope string, epoch uint64, ok bool) {
	if s.cfg.placement == nil {
		return "", 0, false
	}
	s.mu.Lock()
	o := s.owners[owner]
	s.mu.Unlock()
	if o == nil || !o.isScope() {
		return "", 0, false
	}
	return o.handle, o.gen, true
}

// A take is a takeover of one scope in progress here.
type take struct {
	done chan struct{} // closed when it ended
	o    *owner        // then: the scope's owner, or nil
	err  error
}

// takeScope makes this frontend the home of scope and returns its owner: the
// owner homed here already, or the one rebuilt from the scope's record when its
// home's lease ended (placement.ErrHomeLive or ErrMoved when another frontend
// homes it; nil and no error when the store has no such scope). One take per
// scope at a time, on a goroutine of its own bounded by the Server's life and
// four leases, not by ctx: a caller that gives up (ctx) leaves the take to
// finish, since a take cut short would restore tasks without their commands.
func (s *Server) takeScope(ctx context.Context, scope string) (*owner, error) {
	p := s.cfg.placement
	for {
		s.mu.Lock()
		if o := s.byHandle[scope]; o != nil && s.homedHere(o) {
			s.mu.Unlock()
			return o, nil
		}
		if s.phase != open {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if old := s.ending[scope]; old != nil {
			// This frontend homed the scope under a lease it lost: its tasks
			// (their ids) go before the scope's are restored here.
			s.mu.Unlock()
			select {
			case <-old.ended:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		t := s.taking[scope]
		if t == nil {
			t = &take{done: make(chan struct{})}
			s.taking[scope] = t
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				tctx, cancel := context.WithTimeout(s.ctx, 4*p.Lease())
				defer cancel()
				t.o, t.err = s.rebuild(tctx, scope)
				s.mu.Lock()
				delete(s.taking, scope)
				s.mu.Unlock()
				close(t.done)
			}()
		}
		s.mu.Unlock()
		select {
		case <-t.done:
			return t.o, t.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// awaitTake waits for a take of scope in progress here, if any.
func (s *Server) awaitTake(ctx context.Context, scope string) {
	s.mu.Lock()
	t := s.taking[scope]
	s.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
		}
	}
}

// rebuild takes scope in the store and rebuilds its owner here:
//
//  1. Take: this frontend is the scope's home under the scope's next epoch; the
//     previous home can write nothing more;
//  2. register the scope's owner agent (a new local agent id: the model never
//     sees it);
//  3. adopt the scope's commands from every worker under the new epoch: from the
//     workers' answer on, the previous home's kills, inputs and reads are refused;
//  4. restore each recorded task under its id with its command's hooks — reads
//     resume where the model's last read ended; a task whose command no worker
//     holds (it ran in the previous home's memory) settles failed at once; a task
//     the model has not had the end of gets its completion notice when it settles;
//     a command with no record (its start was never answered) is killed;
//  5. open the scope here, its idle lease counted from now.
func (s *Server) rebuild(ctx context.Context, scope string) (*owner, error) {
	p := s.cfg.placement
	taken, found, err := p.Take(ctx, scope)
	if err != nil || !found {
		return nil, err
	}
	o := s.newOwner(messages.AgentID(fmt.Sprintf("scope-%d", s.scoped.Add(1))))
	o.handle, o.pHash, o.homeEpoch, o.gen = scope, taken.Principal, taken.Epoch, taken.Gen
	if err := s.register(ctx, o); err != nil {
		p.Abandon(scope)
		return nil, err
	}
	adopted, aerr := p.Node().Adopt(ctx, scope, taken.Gen)
	if aerr != nil {
		s.log.Warn("adopting a scope's commands", "owner", o.agent, "err", aerr)
	}
	byKey := make(map[string]int, len(adopted))
	for i, a := range adopted {
		byKey[a.Key] = i
	}
	used := make([]bool, len(adopted))
	for _, t := range taken.Tasks {
		h := lostHooks(t, taken.From)
		i, ok := byKey[t.Ref]
		if ok && t.Ref != "" {
			h, used[i] = adopted[i].Hooks, true
		}
		spec := messages.Spec{Kind: t.Kind, Label: t.Label, Owner: o.agent}
		err := s.rt.Tasks().Restore(ctx, spec, actors.Restored{ID: messages.TaskID(t.ID), Started: t.Started, Reported: t.Told}, h)
		if err != nil {
			s.log.Warn("restoring a task of a taken scope", "owner", o.agent, "task", t.ID, "err", err)
			if ok {
				used[i] = false
			}
			continue
		}
		if t.Told {
			o.told[messages.TaskID(t.ID)] = true
		}
		if t.Ext {
			s.restoreProtoTask(ctx, o, messages.TaskID(t.ID), time.Duration(t.TTLMS)*time.Millisecond)
		}
	}
	for i, a := range adopted {
		if !used[i] { // no task of the model's: nobody can read or kill it
			s.log.Warn("killing an adopted command the scope's record does not name", "owner", o.agent, "worker", a.Worker)
			s.dropAdopted(a.Hooks)
		}
	}
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		s.end(o, errHandedOff)
		return nil, ErrClosed
	}
	s.byHandle[scope] = o
	s.mu.Unlock()
	if o.hold() {
		o.release() // the idle lease starts now
	}
	s.log.Info("scope taken", "owner", o.agent, "from", taken.From, "tasks", len(taken.Tasks), "adopted", len(adopted))
	_ = s.saveScope(ctx, o, false) // its failure is logged; the next save writes it
	return o, nil
}

// restoreProtoTask makes a restored task the protocol task of the tasks
// extension it was (tasks/get by its protocol id), tracked to its end.
func (s *Server) restoreProtoTask(ctx context.Context, o *owner, rid messages.TaskID, ttl time.Duration) {
	pt := s.newProtoTask(o, rid, true, true, ttl)
	if !o.addTask(pt) {
		return
	}
	s.bgTasks.Store(pt.rid, pt)
	if snap, err := s.rt.Tasks().Get(ctx, pt.rid, o.agent); err == nil && snap.Status.Terminal() {
		s.settled(snap) // it ended before it was tracked
	}
}

// dropAdopted kills an adopted command and releases it once it ended.
func (s *Server) dropAdopted(h messages.Hooks) {
	_ = h.Cancel("its start was never answered")
	if h.Release != nil {
		// Closing, the owner node's Close settles it and releases nothing more.
		s.spawn(func() {
			<-h.Done
			h.Release()
		})
	}
}

// lostHooks are the hooks of a recorded task whose command no worker holds: it
// settles failed at once.
func lostHooks(t placement.Task, from string) messages.Hooks {
	done := make(chan messages.Outcome, 1)
	done <- messages.Outcome{Status: messages.Failed, Detail: "lost with frontend " + from + ": no worker holds its command (it ended and was dropped, or it ran in that frontend's memory)"}
	out := output.New()
	_ = out.Close()
	var once sync.Once
	return messages.Hooks{Cancel: func(string) error { return nil }, Done: done, Output: out, Release: func() { once.Do(out.Release) }}
}

// orphaned is the lease watch's report that another frontend's lease of epoch
// ended: every live frontend races to take that frontend's scopes (one wins each),
// so that their commands are adopted within the workers' orphan grace. It does
// not block.
func (s *Server) orphaned(node string, epoch uint64) {
	s.mu.Lock()
	if s.phase != open {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 4*s.cfg.placement.Lease())
		defer cancel()
		scopes, err := s.cfg.placement.Orphans(ctx, node, epoch)
		if err != nil {
			s.log.Warn("listing the scopes of an ended frontend", "frontend", node, "err", err)
		}
		rand.Shuffle(len(scopes), func(i, j int) { scopes[i], scopes[j] = scopes[j], scopes[i] })
		sem := make(chan struct{}, takeParallel)
		var wg sync.WaitGroup
		for _, scope := range scopes {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := s.takeScope(ctx, scope); err != nil && !errors.Is(err, placement.ErrHomeLive) && !errors.Is(err, placement.ErrMoved) {
					s.log.Warn("taking a scope of an ended frontend", "frontend", node, "err", err)
				}
			})
		}
		wg.Wait()
	}()
}

// saveScope writes what the scope's record keeps of its tasks (a no-op for
// other owners, and when nothing changed). sent moves the notices that went out
// on results into what the model has had: call it with sent only once those
// results are written.
func (s *Server) saveScope(ctx context.Context, o *owner, sent bool) error {
	if !s.inCluster(o) {
		return nil
	}
	// One save at a time per scope, each listing the tasks as they are when it
	// writes: an older list never overwrites a newer one.
	o.saveMu.Lock()
	defer o.saveMu.Unlock()
	s.mu.Lock()
	current := s.byHandle[o.handle] == o
	s.mu.Unlock()
	if !current {
		// An owner this frontend dropped, or replaced with a newer one of the
		// same scope: the record is not its to write.
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(s.cfg.placement.Lease()/2, time.Second))
	defer cancel()
	o.mu.Lock()
	if sent {
		for _, id := range o.sent {
			o.told[id] = true
		}
		o.sent = nil
	}
	o.mu.Unlock()
	var err error
	for try := 0; try < 3; try++ {
		if err = s.saveOnce(ctx, o); err == nil || errors.Is(err, placement.ErrMoved) || errors.Is(err, placement.ErrNoLease) || ctx.Err() != nil {
			break
		}
	}
	o.mu.Lock()
	over := o.over
	o.mu.Unlock()
	switch {
	case over:
		return nil // it ended meanwhile (closed, lapsed): its record went with it
	case errors.Is(err, placement.ErrMoved), errors.Is(err, placement.ErrNoLease):
		s.log.Warn("scope no longer homed here", "owner", o.agent, "err", err)
		s.spawn(func() { s.end(o, errScopeLost) })
	case err != nil:
		s.log.Warn("saving a scope's record", "owner", o.agent, "err", err)
	}
	return err
}

// saveOnce lists the scope's tasks and writes them.
func (s *Server) saveOnce(ctx context.Context, o *owner) error {
	snaps, err := s.rt.Tasks().List(ctx, o.agent)
	if err != nil {
		return err
	}
	tasks := make([]placement.Task, 0, len(snaps))
	o.mu.Lock()
	for _, sn := range snaps {
		if sn.Owner != o.agent {
			continue
		}
		told := o.told[sn.ID] || sn.Status.Terminal() && sn.Reported
		if told {
			o.told[sn.ID] = true
		}
		t := placement.Task{ID: string(sn.ID), Kind: sn.Kind, Label: sn.Label, Ref: sn.Ref, Started: sn.Started, Told: told}
		if pt := o.byRID[sn.ID]; pt != nil && pt.ext {
			t.Ext, t.TTLMS = true, pt.ttl.Milliseconds()
		}
		tasks = append(tasks, t)
	}
	o.mu.Unlock()
	return s.cfg.placement.Save(ctx, o.handle, tasks)
}

// recordStart makes a start in a cluster scope durable before it is answered:
// when its task cannot be written into the scope's record, the task is killed
// and the start answered with the error, so that no task runs that a takeover
// would not know.
func (s *Server) recordStart(ctx context.Context, o *owner, r tools.Result) tools.Result {
	h, ok := r.Data.(tools.Handle)
	if !ok || !s.inCluster(o) {
		return r
	}
	err := s.saveScope(ctx, o, false)
	if err == nil {
		return r
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, _, kerr := s.rt.Tasks().Kill(kctx, h.TaskID, o.agent, "its scope's record could not be written"); kerr != nil {
		s.log.Warn("killing a task whose record could not be written", "owner", o.agent, "task", h.TaskID, "err", kerr)
	}
	return tools.Result{Text: "cannot start: the cluster's store did not record the task, so it was killed (" + tools.Label(err.Error()) + "); try again", IsError: true}
}

// answered is the end of a sessionless request served here, its answer sent:
// the notices that went out on it are the model's now, in the scope's record.
func (s *Server) answered(ctx context.Context, principal string, body []byte) {
	if s.cfg.placement == nil {
		return
	}
	req := scopeOfBody(body)
	if req.handle == "" {
		return
	}
	o := s.findScope(req.handle, principal)
	if o == nil {
		return
	}
	o.mu.Lock()
	carried := len(o.sent) > 0
	o.mu.Unlock()
	switch req.tool {
	case tools.TaskOutputName, tools.TaskWaitName, tools.TaskKillName: // may have shown the model an end
	default:
		if !carried {
			return // nothing for the record: no list, no write
		}
	}
	if f := s.beforeMark.Load(); f != nil {
		(*f)()
	}
	_ = s.saveScope(ctx, o, true) // its failure is logged; the next save writes it
}

// spawn runs fn on a goroutine the Server waits for at Close; false (fn not run)
// once the Server is closing.
func (s *Server) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != open {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}
