package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// The model-based test: random sequences of start, emit, settle, read, kill, wait,
// get, list, register and dispose by random callers (owners, strangers, the no-agent
// caller), checked step by step against a small reference model of the contract:
// ids, statuses, visibility, read deltas, reported flags, notice counts, live counts.
//
// -rapid.checks sets the number of sequences (default 100; make stress runs 10,000).

type modelTask struct {
	id      messages.TaskID
	kind    string
	owner   messages.AgentID
	stream  bool
	status  messages.Status
	detail  string
	report  bool
	evicted bool   // a tombstone: retention dropped its record
	pending string // stream output not yet read
	final   string // final-kind output once terminal
	f       *modelFake
}

// modelFake settles only when the model says so, or on teardown.
type modelFake struct {
	done chan messages.Outcome
	once sync.Once
	mu   sync.Mutex
	buf  string
}

func (f *modelFake) finish(o messages.Outcome) { f.once.Do(func() { f.done <- o }) }

type runtimeModel struct {
	rt       *actors.Runtime
	keep     int                                    // retention: settled records kept per owner
	tombs    int                                    // tombstones kept per owner
	retained map[messages.AgentID][]messages.TaskID // per owner, oldest settled first
	tombQ    map[messages.AgentID][]messages.TaskID // per owner, oldest evicted first
	parent   map[messages.AgentID]messages.AgentID  // registered agents' parents ("" = top level)
	agents   map[messages.AgentID]bool
	tasks    map[messages.TaskID]*modelTask
	order    []messages.TaskID
	counters map[string]int
	gotNote  chan messages.Snapshot
	steps    *int
}

var modelAgents = []messages.AgentID{"a1", "a2", "a3"}
var modelCallers = []messages.AgentID{"a1", "a2", "a3", "", "stranger"}

// visibleTo is the owner fence of the reference model: unowned tasks are open; an
// owned task is visible to its owner and the owner's ancestors.
func (m *runtimeModel) visibleTo(owner, caller messages.AgentID) bool {
	if owner == "" || owner == caller {
		return true
	}
	for a := m.parent[owner]; a != "" && caller != ""; a = m.parent[a] {
		if a == caller {
			return true
		}
	}
	return false
}

// subtree is a and its registered descendants.
func (m *runtimeModel) subtree(a messages.AgentID) map[messages.AgentID]bool {
	out := map[messages.AgentID]bool{a: true}
	for changed := true; changed; {
		changed = false
		for c, p := range m.parent {
			if out[p] && !out[c] && m.agents[c] {
				out[c], changed = true, true
			}
		}
	}
	return out
}

func (m *runtimeModel) pickID(t *rapid.T) messages.TaskID {
	if len(m.order) == 0 || rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
		return messages.TaskID("bash-" + strconv.Itoa(900+rapid.IntRange(0, 5).Draw(t, "n")))
	}
	return rapid.SampledFrom(m.order).Draw(t, "id")
}

func (m *runtimeModel) liveTask(id messages.TaskID) *modelTask {
	mt, ok := m.tasks[id]
	if !ok {
		return nil
	}
	return mt
}

// settled waits for the runtime to report the settlement of id through OnDone.
func (m *runtimeModel) settled(t *rapid.T, id messages.TaskID) messages.Snapshot {
	select {
	case s := <-m.gotNote:
		if s.ID != id {
			t.Fatalf("settlement of %s, want %s", s.ID, id)
		}
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("no settlement for %s", id)
	}
	return messages.Snapshot{}
}

func (m *runtimeModel) wantNotFound(t *rapid.T, op string, err error, id messages.TaskID) {
	if !errors.Is(err, messages.ErrTaskNotFound) || err.Error() != "task not found: "+string(id) {
		t.Fatalf("%s %s: got %v, want exactly the not-found error", op, id, err)
	}
}

func (m *runtimeModel) actions() map[string]func(*rapid.T) {
	ctx := context.Background()
	return map[string]func(*rapid.T){
		"register": func(t *rapid.T) {
			a := rapid.SampledFrom(modelAgents).Draw(t, "agent")
			p := rapid.SampledFrom(append([]messages.AgentID{"", ""}, modelAgents...)).Draw(t, "parent")
			var opts []actors.AgentOption
			if p != "" {
				opts = append(opts, actors.WithParent(p))
			}
			err := m.rt.Agents().Register(ctx, a, opts...)
			switch {
			case m.agents[a]:
				if !errors.Is(err, messages.ErrAgentExists) {
					t.Fatalf("register %s twice: %v", a, err)
				}
			case p != "" && !m.agents[p]:
				if !errors.Is(err, messages.ErrOwnerUnknown) {
					t.Fatalf("register %s under unregistered %s: %v", a, p, err)
				}
			case err != nil:
				t.Fatalf("register %s: %v", a, err)
			default:
				m.agents[a], m.parent[a] = true, p
			}
		},
		"start": func(t *rapid.T) {
			kind := rapid.SampledFrom([]string{"bash", "subagent"}).Draw(t, "kind")
			owner := rapid.SampledFrom([]messages.AgentID{"a1", "a2", "a3", ""}).Draw(t, "owner")
			stream := kind == "bash"
			f := &modelFake{done: make(chan messages.Outcome, 1)}
			h := messages.Hooks{
				Done: f.done,
				Cancel: func(reason string) error {
					if reason == "owner disposed" || reason == "runtime closed" {
						f.finish(messages.Outcome{Status: messages.Killed, Detail: reason})
					}
					return nil
				},
			}
			if stream {
				h.ReadOutput = func() string {
					f.mu.Lock()
					defer f.mu.Unlock()
					s := f.buf
					f.buf = ""
					return s
				}
			}
			ran := false
			id, err := m.rt.Tasks().Start(ctx, messages.Spec{Kind: kind, Label: kind + " label", Owner: owner,
				Run: func() (messages.Hooks, error) { ran = true; return h, nil }})
			if owner != "" && !m.agents[owner] {
				if !errors.Is(err, messages.ErrOwnerUnknown) || ran {
					t.Fatalf("start for unregistered %s: err %v, ran %v", owner, err, ran)
				}
				return
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			m.counters[kind]++
			want := messages.TaskID(fmt.Sprintf("%s-%d", kind, m.counters[kind]))
			if id != want {
				t.Fatalf("id %s, want %s", id, want)
			}
			m.tasks[id] = &modelTask{id: id, kind: kind, owner: owner, stream: stream, status: messages.Running, f: f}
			m.order = append(m.order, id)
		},
		"emit": func(t *rapid.T) {
			id := m.pickID(t)
			mt := m.liveTask(id)
			if mt == nil || !mt.stream || mt.status.Terminal() {
				t.Skip("no running stream task")
			}
			text := rapid.StringMatching(`[a-z]{1,8}\n`).Draw(t, "text")
			mt.f.mu.Lock()
			mt.f.buf += text
			mt.f.mu.Unlock()
			mt.pending += text
		},
		"settle": func(t *rapid.T) {
			id := m.pickID(t)
			mt := m.liveTask(id)
			if mt == nil || mt.status.Terminal() {
				t.Skip("no live task")
			}
			st := rapid.SampledFrom([]messages.Status{messages.Completed, messages.Killed, messages.Failed}).Draw(t, "status")
			detail := rapid.SampledFrom([]string{"exit code: 0", "signal: SIGTERM", "max-tokens"}).Draw(t, "detail")
			mt.f.finish(messages.Outcome{Status: st, Detail: detail, Output: "final of " + string(id)})
			s := m.settled(t, id)
			mt.status, mt.detail = st, detail
			if !mt.stream {
				mt.final = "final of " + string(id)
			}
			if s.Status != st || s.Detail != detail || s.Reported != mt.report {
				t.Fatalf("settlement snapshot %+v, want %s/%s reported=%v", s, st, detail, mt.report)
			}
			m.retain(mt)
		},
		"read": func(t *rapid.T) {
			id, caller := m.pickID(t), rapid.SampledFrom(modelCallers).Draw(t, "caller")
			r, err := m.rt.Tasks().Read(ctx, id, caller)
			mt := m.liveTask(id)
			if mt == nil || !m.visibleTo(mt.owner, caller) {
				m.wantNotFound(t, "read", err, id)
				return
			}
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			want := ""
			switch {
			case mt.evicted: // a tombstone: no output
			case mt.stream:
				want, mt.pending = mt.pending, ""
			case mt.status.Terminal():
				want = mt.final
			}
			if mt.status.Terminal() {
				mt.report = true
			}
			if r.Output != want || r.Snapshot.Evicted != mt.evicted {
				t.Fatalf("read %s: output %q evicted=%v, want %q evicted=%v", id, r.Output, r.Snapshot.Evicted, want, mt.evicted)
			}
		},
		"kill": func(t *rapid.T) {
			id, caller := m.pickID(t), rapid.SampledFrom(modelCallers).Draw(t, "caller")
			res, _, err := m.rt.Tasks().Kill(ctx, id, caller, "model kill")
			mt := m.liveTask(id)
			if mt == nil || !m.visibleTo(mt.owner, caller) {
				m.wantNotFound(t, "kill", err, id)
				return
			}
			if err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
			want := messages.KillRequested
			if mt.status.Terminal() {
				// The model saw the terminal status in the reply: the task is reported.
				want, mt.report = messages.KillAlreadyTerminal, true
			} else {
				mt.status, mt.report = messages.Stopping, true
			}
			if res != want {
				t.Fatalf("kill %s: %s, want %s", id, res, want)
			}
		},
		"wait": func(t *rapid.T) {
			id, caller := m.pickID(t), rapid.SampledFrom(modelCallers).Draw(t, "caller")
			s, err := m.rt.Tasks().Wait(ctx, id, caller, time.Millisecond)
			mt := m.liveTask(id)
			if mt == nil || !m.visibleTo(mt.owner, caller) {
				m.wantNotFound(t, "wait", err, id)
				return
			}
			if err != nil {
				t.Fatalf("wait %s: %v", id, err)
			}
			if mt.status.Terminal() {
				mt.report = true
			}
			if s.Status != mt.status {
				t.Fatalf("wait %s: status %s, want %s", id, s.Status, mt.status)
			}
		},
		"get": func(t *rapid.T) {
			id, caller := m.pickID(t), rapid.SampledFrom(modelCallers).Draw(t, "caller")
			s, err := m.rt.Tasks().Get(ctx, id, caller)
			mt := m.liveTask(id)
			if mt == nil || !m.visibleTo(mt.owner, caller) {
				m.wantNotFound(t, "get", err, id)
				return
			}
			if err != nil || s.Status != mt.status || s.Reported != mt.report || s.Owner != mt.owner || s.Evicted != mt.evicted {
				t.Fatalf("get %s: %+v %v, want %s reported=%v evicted=%v", id, s, err, mt.status, mt.report, mt.evicted)
			}
		},
		"dispose": func(t *rapid.T) {
			a := rapid.SampledFrom(modelAgents).Draw(t, "agent")
			err := m.rt.Agents().Dispose(ctx, a)
			if !m.agents[a] {
				if !errors.Is(err, messages.ErrOwnerUnknown) {
					t.Fatalf("dispose unknown %s: %v", a, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("dispose %s: %v", a, err)
			}
			// Disposing an agent disposes its descendants.
			gone := m.subtree(a)
			for g := range gone {
				delete(m.agents, g)
				delete(m.parent, g)
				delete(m.retained, g)
				delete(m.tombQ, g)
			}
			var keep []messages.TaskID
			live := map[messages.TaskID]bool{}
			for _, id := range m.order {
				mt := m.tasks[id]
				if !gone[mt.owner] || mt.owner == "" {
					keep = append(keep, id)
					continue
				}
				if !mt.status.Terminal() {
					live[id] = true
				}
				delete(m.tasks, id)
			}
			m.order = keep
			// Teardown settles the live tasks concurrently: in any order, each once,
			// each reported (no notice to a dying owner).
			for range len(live) {
				select {
				case s := <-m.gotNote:
					if !live[s.ID] || !s.Reported {
						t.Fatalf("teardown settlement %+v: unexpected or unreported", s)
					}
					delete(live, s.ID)
				case <-time.After(30 * time.Second):
					t.Fatalf("teardown settlements missing: %v", live)
				}
			}
		},
		"": func(t *rapid.T) { m.check(t) },
	}
}

// retain applies the retention rule to a task that just settled: per owner, the
// keep most recently settled tasks keep their records; older ones become tombstones
// (no output), and past the tombstone bound the oldest is forgotten.
func (m *runtimeModel) retain(mt *modelTask) {
	m.retained[mt.owner] = append(m.retained[mt.owner], mt.id)
	for len(m.retained[mt.owner]) > m.keep {
		old := m.tasks[m.retained[mt.owner][0]]
		m.retained[mt.owner] = m.retained[mt.owner][1:]
		old.evicted, old.pending, old.final = true, "", ""
		m.tombQ[mt.owner] = append(m.tombQ[mt.owner], old.id)
		for len(m.tombQ[mt.owner]) > m.tombs {
			gone := m.tombQ[mt.owner][0]
			m.tombQ[mt.owner] = m.tombQ[mt.owner][1:]
			delete(m.tasks, gone)
			m.order = slices.DeleteFunc(m.order, func(id messages.TaskID) bool { return id == gone })
		}
	}
}

// check compares every caller's List and the live counts with the model.
func (m *runtimeModel) check(t *rapid.T) {
	*m.steps++
	for _, caller := range modelCallers {
		list, err := m.rt.Tasks().List(context.Background(), caller)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		var want []*modelTask
		for _, id := range m.order {
			if mt := m.tasks[id]; m.visibleTo(mt.owner, caller) {
				want = append(want, mt)
			}
		}
		if len(list) != len(want) {
			t.Fatalf("list for %q: %d tasks, want %d", caller, len(list), len(want))
		}
		for i, s := range list {
			w := want[i]
			if s.ID != w.id || s.Status != w.status || s.Reported != w.report || s.Owner != w.owner || s.Evicted != w.evicted {
				t.Fatalf("list for %q [%d]: %+v, want %s %s reported=%v evicted=%v", caller, i, s, w.id, w.status, w.report, w.evicted)
			}
		}
	}
	running, tombstones := 0, 0
	for _, mt := range m.tasks {
		if !mt.status.Terminal() {
			running++
		}
		if mt.evicted {
			tombstones++
		}
	}
	st := m.rt.Stats()
	if st.Tasks != len(m.tasks)-tombstones || st.Running != running || st.Agents != len(m.agents) ||
		st.Tombstones != tombstones || st.Retained != len(m.tasks)-tombstones-running {
		t.Fatalf("stats %+v, want records %d running %d tombstones %d agents %d", st, len(m.tasks)-tombstones, running, tombstones, len(m.agents))
	}
}

func TestModelBased(t *testing.T) {
	steps, sequences := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		sequences++
		keep := rapid.SampledFrom([]int{0, 1, 2, actors.DefaultRetention}).Draw(t, "retention")
		tombs := rapid.SampledFrom([]int{0, 1, 3, actors.DefaultTombstones}).Draw(t, "tombstones")
		opts := []actors.Option{actors.WithoutOwnerLimit(), actors.WithRetention(keep), actors.WithTombstones(tombs)}
		if keep == 0 {
			opts = append(opts, actors.WithNoRetention())
		}
		if tombs == 0 {
			opts = append(opts, actors.WithNoTombstones())
		}
		rt, err := actors.NewRuntime(opts...)
		if err != nil {
			t.Fatal(err)
		}
		rt.Tasks().AttachSurface("model")
		m := &runtimeModel{rt: rt, keep: keep, tombs: tombs,
			retained: map[messages.AgentID][]messages.TaskID{}, tombQ: map[messages.AgentID][]messages.TaskID{},
			parent: map[messages.AgentID]messages.AgentID{},
			agents: map[messages.AgentID]bool{}, tasks: map[messages.TaskID]*modelTask{},
			counters: map[string]int{}, gotNote: make(chan messages.Snapshot, 1024), steps: &steps}
		stop := rt.Tasks().OnDone(func(s messages.Snapshot) { m.gotNote <- s })
		defer func() {
			stop()
			if err := rt.Close(context.Background()); err != nil {
				t.Fatalf("close: %v", err)
			}
			if st := rt.Stats(); st != (actors.Stats{}) {
				t.Fatalf("after close: %+v", st)
			}
		}()
		t.Repeat(m.actions())
	})
	t.Logf("model-based: %d sequences, %d checked steps", sequences, steps)
}
