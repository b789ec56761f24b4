//go:build linux

package mcpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/remote"
	"github.com/taskrt/taskrt/tools/mcpserver"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// clusterLease is the frontends' lease in these tests.
const clusterLease = 2 * time.Second

// frontend is one in-process frontend: a Server with its own runtime, NATS
// connection and placement, served over HTTP.
type frontend struct {
	srv *mcpserver.Server
	p   *placement.Placement
	nc  *nats.Conn
	hs  *httptest.Server
}

// natsServer starts an embedded NATS server with JetStream for the test.
func natsServer(t testing.TB) *remote.Server {
	t.Helper()
	ns, err := remote.StartServer(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}

// newFrontend starts a frontend on ns, its HTTP handler wrapped by wrap (nil:
// none), its commands local. The test's end closes the Server, then the
// placement, then the owner node and the connection.
func newFrontend(t testing.TB, ns *remote.Server, wrap func(http.Handler) http.Handler, opts ...mcpserver.Option) *frontend {
	t.Helper()
	return joinAsFrontend(t, ns, wrap, false, opts...)
}

// newRemoteFrontend starts a frontend on ns whose commands run on the workers
// and belong to their scopes, as taskrt-mcp -http -nats does.
func newRemoteFrontend(t testing.TB, ns *remote.Server) *frontend {
	t.Helper()
	return joinAsFrontend(t, ns, nil, true)
}

func joinAsFrontend(t testing.TB, ns *remote.Server, wrap func(http.Handler) http.Handler, remoteBash bool, opts ...mcpserver.Option) *frontend {
	t.Helper()
	nc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var srvOf atomic.Pointer[mcpserver.Server]
	node, err := remote.New(nc, remote.WithLease(clusterLease), remote.WithScopes(func(owner messages.AgentID) (string, uint64, bool) {
		if s := srvOf.Load(); s != nil {
			return s.ScopeOf(owner)
		}
		return "", 0, false
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(bg) })
	p, err := placement.New(nc, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(bg) })
	opts = append([]mcpserver.Option{mcpserver.WithPlacement(p), mcpserver.WithRuntimeOptions(actors.WithIDs(p.NextID))}, opts...)
	if remoteBash {
		opts = append(opts, mcpserver.WithBashRunner(node))
	}
	srv := newServer(t, opts...)
	srvOf.Store(srv)
	var h http.Handler = srv.HTTPHandler()
	if wrap != nil {
		h = wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, h)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &frontend{srv: srv, p: p, nc: nc, hs: hs}
}

// workerOn starts an in-process worker on ns for the test.
func workerOn(t *testing.T, ns *remote.Server, name string) *remote.Worker {
	t.Helper()
	nc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := remote.NewWorker(nc, remote.WithName(name), remote.WithLease(clusterLease), remote.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(bg) })
	return w
}

// sessionlessAt is a sessionless client of the frontend at hs, with token (""
// for none).
func sessionlessAt(t *testing.T, hs *httptest.Server, token string) *rpc {
	return &rpc{t: t, http: newRaw(t, hs, token), sessionless: mcpserver.SessionlessVersion}
}

// roundRobin hands out its clients in turn.
type roundRobin struct {
	cs []*rpc
	n  int
}

func (r *roundRobin) next() *rpc {
	c := r.cs[r.n%len(r.cs)]
	r.n++
	return c
}

// playScope runs one scope's life through the clients in turn — start, read,
// list, wait, a notice, kill, close — and returns every answer's text, the scope
// handle replaced by <scope>.
func playScope(t *testing.T, rr *roundRobin, mark string) []string {
	t.Helper()
	var out []string
	var scope string
	gate := filepath.Join(os.TempDir(), "gate-"+strings.ToLower(rand.Text()[:8]))
	if err := os.Mkdir(gate, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(gate) })
	note := func(r scoped) scoped {
		text := strings.Join(r.texts, "\n")
		if scope != "" {
			text = strings.ReplaceAll(text, scope, "<scope>")
		}
		text = strings.ReplaceAll(text, mark, "<mark>")
		text = strings.ReplaceAll(text, gate, "<gate>")
		out = append(out, fmt.Sprintf("%v %s", r.isError, text))
		return r
	}
	// A quick task waits for its gate, opened once its start was answered: its
	// notice can never ride on its own start's result.
	open := func(name string) {
		if err := os.WriteFile(filepath.Join(gate, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gated := func(name, script string) string {
		return fmt.Sprintf("until [ -e %s ]; do sleep 0.01; done; %s", filepath.Join(gate, name), script)
	}
	id, scope := rr.next().startScoped(marked(mark, "echo hello; sleep 600"), "")
	out = append(out, "started "+id)
	note(rr.next().scopedTool("task_output", map[string]any{"task_id": id, "scope": scope, "wait": true, "until": "hello", "timeout_ms": 30000}))
	note(rr.next().scopedTool("task_list", map[string]any{"scope": scope}))
	note(rr.next().scopedTool("bash", map[string]any{"command": gated("2", "echo second"), "run_in_background": true, "scope": scope}))
	open("2")
	note(rr.next().scopedTool("task_wait", map[string]any{"task_ids": []string{"bash-2"}, "scope": scope, "timeout_ms": 30000}))
	note(rr.next().scopedTool("task_output", map[string]any{"task_id": "bash-2", "scope": scope}))
	// A task that ends unread: its notice rides on a later result naming the
	// scope, whichever frontend the call reached.
	note(rr.next().scopedTool("bash", map[string]any{"command": gated("3", "exit 3"), "run_in_background": true, "scope": scope}))
	open("3")
	deadline := time.Now().Add(time.Minute)
	for {
		r := rr.next().scopedTool("task_list", map[string]any{"scope": scope})
		if len(r.texts) > 1 {
			note(r)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notice of bash-3 within a minute: %q", r.texts)
		}
	}
	note(rr.next().scopedTool("task_kill", map[string]any{"task_id": id, "scope": scope}))
	note(rr.next().scopedTool("task_wait", map[string]any{"task_ids": []string{id}, "scope": scope, "timeout_ms": 30000}))
	note(rr.next().scopedTool("task_output", map[string]any{"task_id": id, "scope": scope}))
	note(rr.next().scopedTool("task_list", map[string]any{"scope": scope}))
	note(rr.next().scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope}))
	note(rr.next().scopedTool("task_list", map[string]any{"scope": scope}))
	note(rr.next().scopedTool("task_output", map[string]any{"task_id": id, "scope": scope}))
	return out
}

// TestClusterServesAScopeFromEveryFrontend: a scope minted on frontend A, its
// calls sent in turn to A, B and C, gets the answers that one server alone
// gives, word for word.
func TestClusterServesAScopeFromEveryFrontend(t *testing.T) {
	alone := newServer(t)
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, alone.HTTPHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	mark := newMark(t)
	want := playScope(t, &roundRobin{cs: []*rpc{sessionlessAt(t, hs, "")}}, mark)
	assertNoMarked(t, mark)

	ns := natsServer(t)
	fa, fb, fc := newFrontend(t, ns, nil), newFrontend(t, ns, nil), newFrontend(t, ns, nil)
	rr := &roundRobin{cs: []*rpc{sessionlessAt(t, fa.hs, ""), sessionlessAt(t, fb.hs, ""), sessionlessAt(t, fc.hs, "")}}
	mark = newMark(t)
	got := playScope(t, rr, mark)
	assertNoMarked(t, mark)
	if !slices.Equal(got, want) {
		t.Errorf("round robin over three frontends:\n%s\nwant (one server):\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
	}
	for _, f := range []*frontend{fb, fc} {
		if st := f.srv.Runtime().Stats(); st.Agents != 0 {
			t.Errorf("a frontend that only forwarded holds agents: %+v", st)
		}
	}
}

// TestClusterRefusesAForeignScopeAlike: another principal's scope, and a scope
// nobody minted, read the same on every frontend as on the home; the owner's
// own calls reach it from every frontend.
func TestClusterRefusesAForeignScopeAlike(t *testing.T) {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != "alice" && token != "bob" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	wrap := auth.RequireBearerToken(verify, nil)
	ns := natsServer(t)
	fs := []*frontend{newFrontend(t, ns, wrap), newFrontend(t, ns, wrap), newFrontend(t, ns, wrap)}
	mark := newMark(t)
	id, scope := sessionlessAt(t, fs[0].hs, "alice").startScoped(marked(mark, "sleep 600"), "")
	awaitMarked(t, mark, 1)
	home := sessionlessAt(t, fs[0].hs, "bob")
	unknown := home.scopedTool("task_output", map[string]any{"task_id": id, "scope": "AAAAAAAAAAAAAAAAAAAAAAAAAA"})
	foreign := home.scopedTool("task_output", map[string]any{"task_id": id, "scope": scope})
	if !slices.Equal(foreign.texts, unknown.texts) {
		t.Fatalf("bob with alice's scope on the home = %q, want %q", foreign.texts, unknown.texts)
	}
	closeRefused := home.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
	carried := home.scopedTool("task_output", map[string]any{"task_id": id + "." + scope})
	if !carried.isError || !strings.HasPrefix(carried.texts[0], "task not found: ") {
		t.Fatalf("bob with alice's scope in the task id on the home = %q", carried.texts)
	}
	for i, f := range fs {
		bob, alice := sessionlessAt(t, f.hs, "bob"), sessionlessAt(t, f.hs, "alice")
		if got := bob.scopedTool("task_output", map[string]any{"task_id": id, "scope": scope}); !slices.Equal(got.texts, unknown.texts) {
			t.Errorf("frontend %d: bob's task_output = %q, want %q", i, got.texts, unknown.texts)
		}
		if got := bob.scopedTool("task_output", map[string]any{"task_id": id + "." + scope}); !slices.Equal(got.texts, carried.texts) {
			t.Errorf("frontend %d: bob's task_output by the carried id = %q, want %q", i, got.texts, carried.texts)
		}
		if got := bob.scopedTool("task_list", map[string]any{"scope": scope}); !slices.Equal(got.texts, []string{"(no background tasks)"}) {
			t.Errorf("frontend %d: bob lists %q", i, got.texts)
		}
		if got := bob.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope}); !slices.Equal(got.texts, closeRefused.texts) || !got.isError {
			t.Errorf("frontend %d: bob's scope_close = %q, want %q", i, got.texts, closeRefused.texts)
		}
		if got := bob.scopedTool("bash", map[string]any{"command": "true", "run_in_background": true, "scope": scope}); !got.isError || !strings.HasPrefix(got.texts[0], "scope not found: ") {
			t.Errorf("frontend %d: bob started in alice's scope: %q", i, got.texts)
		}
		if got := alice.scopedTool("task_list", map[string]any{"scope": scope}); !slices.Equal(got.texts, []string{id + " [bash] running — " + marked(mark, "sleep 600")}) {
			t.Errorf("frontend %d: alice lists %q", i, got.texts)
		}
	}
	sessionlessAt(t, fs[2].hs, "alice").scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
	assertNoMarked(t, mark)
}

// TestClusterForwardedCallEndsAtItsDeadline: a call forwarded with a deadline
// (here a frontend whose requests carry 300 ms) that the home cannot meet is
// answered with the deadline error when it passes; nothing is left running on
// either side, and the next call is served.
func TestClusterForwardedCallEndsAtItsDeadline(t *testing.T) {
	ns := natsServer(t)
	short := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
			defer cancel()
			h.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	fa, fb := newFrontend(t, ns, nil), newFrontend(t, ns, short)
	mark := newMark(t)
	id, scope := sessionlessAt(t, fa.hs, "").startScoped(marked(mark, "sleep 600"), "")
	b := sessionlessAt(t, fb.hs, "")
	began := time.Now()
	r := b.call("tools/call", fmt.Sprintf(`{"name":"task_output","arguments":{"task_id":%q,"scope":%q,"wait":true,"timeout_ms":60000}}`, id, scope))
	took := time.Since(began)
	if r.Error == nil || !strings.Contains(r.Error.Message, "deadline") || !strings.Contains(r.Error.Message, fa.p.ID()) {
		t.Fatalf("a forwarded call past its deadline = %s, want the deadline error naming the home", r.raw)
	}
	if took > 20*time.Second {
		t.Errorf("the deadline error came after %s (the call's deadline was 300ms, its wait 60s)", took)
	}
	// The next call (quick) is served through the same frontend.
	if got := b.scopedTool("task_list", map[string]any{"scope": scope}); !slices.Equal(got.texts, []string{id + " [bash] running — " + marked(mark, "sleep 600")}) {
		t.Errorf("after the deadline, task_list = %q", got.texts)
	}
	sessionlessAt(t, fa.hs, "").scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
	assertNoMarked(t, mark)
}

// TestClusterTakeoverAfterCut: when a home frontend is cut off from NATS (its
// lease lapses), a survivor takes its scope — never a new, empty scope: the task
// keeps its id; this one ran in the home's memory (a local command), so it reads
// failed, lost with that home, and its notice comes once; the scope takes new
// starts, numbered on; the cut-off home, fenced, killed its own command and
// answers nothing for the scope.
func TestClusterTakeoverAfterCut(t *testing.T) {
	ns := natsServer(t)
	fa, fb, fc := newFrontend(t, ns, nil), newFrontend(t, ns, nil), newFrontend(t, ns, nil)
	mark := newMark(t)
	id, scope := sessionlessAt(t, fa.hs, "").startScoped(marked(mark, "sleep 600"), "")
	home := fa.p.ID()
	fa.nc.Close() // A is cut off: it fences itself at half its lease, and its lease lapses
	b, c := sessionlessAt(t, fb.hs, ""), sessionlessAt(t, fc.hs, "")
	cut := time.Now()
	var got toolResult
	for {
		// Until A's lease lapses, A is its home and unreachable: a JSON-RPC error.
		r := b.call("tools/call", fmt.Sprintf(`{"name":"task_output","arguments":{"task_id":%q,"scope":%q}}`, id, scope))
		if r.Error == nil {
			if err := json.Unmarshal(r.Result, &got); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !strings.Contains(r.Error.Message, "unreachable") {
			t.Fatalf("before the lapse: %s, want the home unreachable", r.raw)
		}
		if time.Since(cut) > time.Minute {
			t.Fatalf("not taken within a minute: %s", r.raw)
		}
	}
	if took := time.Since(cut); took > clusterLease+2*time.Second {
		t.Errorf("the scope was served again %s after the cut, want within the lease + 2s", took)
	}
	if len(got.Content) == 0 || !strings.Contains(got.Content[0].Text, "[status: failed") || !strings.Contains(got.Content[0].Text, "lost with frontend "+home) {
		t.Errorf("task_output after the takeover = %+v, want %s failed, lost with %s", got, id, home)
	}
	list := c.scopedTool("task_list", map[string]any{"scope": scope})
	if list.isError || len(list.texts) == 0 || !strings.HasPrefix(list.texts[0], id+" [bash] failed") {
		t.Errorf("task_list at C after the takeover = %q, want %s failed", list.texts, id)
	}
	next := c.scopedTool("bash", map[string]any{"command": "echo again", "run_in_background": true, "scope": scope})
	if next.isError || !strings.HasPrefix(next.texts[0], "started background task bash-2") {
		t.Errorf("a start in the taken scope = %q, want bash-2", next.texts)
	}
	// A, fenced, dropped the scope: its local command is killed.
	awaitGoneMarked(t, mark)
	c.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
}

// awaitGoneMarked polls until no process carries mark.
func awaitGoneMarked(t *testing.T, mark string) {
	t.Helper()
	pollProcs(t, func() bool { return len(markedPIDs(mark)) == 0 }, "processes marked %s to be gone", mark)
}

// TestClusterRoutesTasksExtension: a start answered as a task of the tasks
// extension on A is polled (tasks/get) on B and read (task_output by its
// protocol id) on C, as on A alone.
func TestClusterRoutesTasksExtension(t *testing.T) {
	ns := natsServer(t)
	fa, fb, fc := newFrontend(t, ns, nil), newFrontend(t, ns, nil), newFrontend(t, ns, nil)
	a, b, c := sessionlessAt(t, fa.hs, ""), sessionlessAt(t, fb.hs, ""), sessionlessAt(t, fc.hs, "")
	for _, cl := range []*rpc{a, b, c} {
		cl.caps = tasksExtCaps
	}
	created := a.extStart("echo built")
	done := b.awaitExtDone(created.TaskID)
	if done.Status != "completed" || done.Result == nil || !slices.Equal(done.Result.texts(), []string{"built\n[status: completed, exit code: 0]"}) {
		t.Errorf("tasks/get at B = %+v", done)
	}
	if home := a.awaitExtDone(created.TaskID); home.Status != done.Status || !slices.Equal(home.Result.texts(), done.Result.texts()) {
		t.Errorf("tasks/get at the home = %+v, at B %+v: want the same", home, done)
	}
	if st := fb.srv.Runtime().Stats(); st.Agents != 0 {
		t.Errorf("B holds agents: %+v", st)
	}
	if got := c.scopedTool("task_output", map[string]any{"task_id": created.TaskID}); !slices.Equal(got.texts, []string{"[status: completed, exit code: 0]"}) {
		t.Errorf("task_output at C by the protocol id = %q", got.texts)
	}
	r := c.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, "bash-9."+created.Meta.Scope))
	if r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("tasks/get of an unknown task of the scope at C = %s, want -32602", r.raw)
	}
	a.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": created.Meta.Scope})
}

// TestClusterTakeoverKeepsProtocolTasks: a scope's tasks of the tasks extension,
// their commands on a worker, survive their home's cut: at a survivor, tasks/get
// by the same protocol id answers the ended one's end and the running one's
// status, and tasks/cancel ends the running one.
func TestClusterTakeoverKeepsProtocolTasks(t *testing.T) {
	ns := natsServer(t)
	workerOn(t, ns, "w1")
	fa, fb := newRemoteFrontend(t, ns), newRemoteFrontend(t, ns)
	a, b := sessionlessAt(t, fa.hs, ""), sessionlessAt(t, fb.hs, "")
	a.caps, b.caps = tasksExtCaps, tasksExtCaps
	ended := a.extStart("echo built")
	want := a.awaitExtDone(ended.TaskID)
	if want.Status != "completed" || want.Result == nil {
		t.Fatalf("tasks/get at the home = %+v", want)
	}
	mark := newMark(t)
	running := b.extStart(marked(mark, "sleep 600")) // at B: a scope of its own, homed on B
	long := a.call("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":%q,"run_in_background":true,"scope":%q}}`, marked(mark, "sleep 600"), ended.Meta.Scope))
	var created extTask
	if err := json.Unmarshal(long.Result, &created); err != nil || created.Status != "working" {
		t.Fatalf("a second start in the scope = %s", long.raw)
	}
	awaitMarked(t, mark, 2)
	fa.nc.Close() // A is cut off: B takes its scope
	cut := time.Now()
	var got extTask
	for {
		r := b.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, ended.TaskID))
		if r.Error == nil {
			if err := json.Unmarshal(r.Result, &got); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !strings.Contains(r.Error.Message, "unreachable") || time.Since(cut) > time.Minute {
			t.Fatalf("tasks/get at B after the cut: %s", r.raw)
		}
	}
	// The output its first answer carried was read then (the read cursor moved
	// with it): the new home answers the end, not the output again.
	if got.Status != "completed" || got.Result == nil || !slices.Equal(got.Result.texts(), []string{"[status: completed, exit code: 0]"}) {
		t.Errorf("tasks/get of the ended task at B after the takeover = %+v %q, want it completed", got, got.Result.texts())
	}
	var still extTask
	b.ok("tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &still)
	if still.Status != "working" {
		t.Errorf("tasks/get of the running task at B = %+v, want working", still)
	}
	var cancelled extTask
	b.ok("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, created.TaskID), &cancelled)
	if done := b.awaitExtDone(created.TaskID); done.Status != "cancelled" {
		t.Errorf("after tasks/cancel at B: %+v", done)
	}
	b.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": ended.Meta.Scope})
	b.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": running.Meta.Scope})
	awaitGoneMarked(t, mark)
}

// TestClusterNoticeWindow: what holds for notices across a home's death, where.
// A notice goes out on a result, then is marked delivered in the scope's record.
// A home that dies between the two (held there by the test) has the new home
// deliver that notice once more — the one repeat the design allows — and never
// again; a notice marked before the death is not repeated.
func TestClusterNoticeWindow(t *testing.T) {
	ns := natsServer(t)
	workerOn(t, ns, "w1")
	fa, fb := newRemoteFrontend(t, ns), newRemoteFrontend(t, ns)
	a, b := sessionlessAt(t, fa.hs, ""), sessionlessAt(t, fb.hs, "")
	gate := t.TempDir()
	gated := func(name string) string {
		return fmt.Sprintf("until [ -e %s ]; do sleep 0.01; done; echo %s", filepath.Join(gate, name), name)
	}
	open := func(name string) {
		if err := os.WriteFile(filepath.Join(gate, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	marked, scope := a.startScoped(gated("marked"), "")
	held := a.scopedTool("bash", map[string]any{"command": gated("held"), "run_in_background": true, "scope": scope})
	heldID, _ := held.structured["task_id"].(string)
	awaitNotice := func(c *rpc, id string) []string {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if r := c.scopedTool("task_list", map[string]any{"scope": scope}); len(r.texts) > 1 {
				return r.texts[1:]
			}
		}
		t.Fatalf("no notice of %s within a minute", id)
		return nil
	}
	open("marked")
	if got := awaitNotice(a, marked); len(got) != 1 || !strings.Contains(got[0], marked+" (bash:") {
		t.Fatalf("the notices at the home = %q, want %s's", got, marked)
	}
	awaitTold(t, ns, scope, marked) // that notice's mark is in the record
	// From here the home sends its answers and never marks their notices.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mcpserver.BeforeMark(fa.srv, func() { <-release })
	open("held")
	if got := awaitNotice(a, heldID); len(got) != 1 || !strings.Contains(got[0], heldID+" (bash:") {
		t.Fatalf("the notices at the home = %q, want %s's", got, heldID)
	}
	fa.nc.Close() // the home dies with the notice sent and not marked
	var again []string
	for deadline := time.Now().Add(time.Minute); len(again) == 0 && time.Now().Before(deadline); {
		r := b.call("tools/call", fmt.Sprintf(`{"name":"task_list","arguments":{"scope":%q}}`, scope))
		var got toolResult
		if r.Error == nil && json.Unmarshal(r.Result, &got) == nil {
			for _, c := range got.Content[1:] {
				again = append(again, c.Text)
			}
		}
	}
	if len(again) != 1 || !strings.Contains(again[0], heldID+" (bash:") {
		t.Errorf("the notices at the new home = %q, want %s's once more (sent, not marked), not %s's (marked)", again, heldID, marked)
	}
	for range 3 {
		if r := b.scopedTool("task_list", map[string]any{"scope": scope}); len(r.texts) != 1 {
			t.Errorf("a later result carries %q, want no notice", r.texts[1:])
		}
	}
	b.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
}

// awaitTold waits until the record of scope in the store says that the model
// has had task id's end.
func awaitTold(t *testing.T, ns *remote.Server, scope, id string) {
	t.Helper()
	nc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, "taskrt_scopes")
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "scope."+scope)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue // the end of the initial values
			}
			var rec struct {
				Tasks []struct {
					ID   string `json:"id"`
					Told bool   `json:"told"`
				} `json:"tasks"`
			}
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				t.Fatal(err)
			}
			for _, tk := range rec.Tasks {
				if tk.ID == id && tk.Told {
					return
				}
			}
		case <-ctx.Done():
			t.Fatalf("the record of the scope never said %s was told", id)
		}
	}
}
