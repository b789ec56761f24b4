//go:build linux

package livepage_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

// open opens one of the page's streams at path.
func (p *page) open(t *testing.T, path string, header ...string) *stream {
	t.Helper()
	return openStream(t, p.hc, p.hs.URL+path, header...)
}

// compress is a task's event kinds, consecutive task-output events counted once
// (output events coalesce; how many is not in the contract).
func compress(kinds []string) string {
	var out []string
	for _, k := range kinds {
		if k == "task-output" && len(out) > 0 && out[len(out)-1] == k {
			continue
		}
		out = append(out, k)
	}
	return strings.Join(out, " ")
}

// history is what the event stream said of some tasks, by task id.
type history struct {
	ids   map[string]string   // label → id
	kinds map[string][]string // the event kinds, in order
	final map[string]wireTask // the task as settled
	bytes map[string]int64    // the last output size seen
}

// followTasks reads events until n tasks settled, all of owner's; started is
// called with each task that starts.
func followTasks(t *testing.T, events *stream, owner string, n int, started func(wireTask)) history {
	t.Helper()
	h := history{ids: map[string]string{}, kinds: map[string][]string{}, final: map[string]wireTask{}, bytes: map[string]int64{}}
	for settled := 0; settled < n; {
		ev := events.NextEvent(t)
		if ev.Task == nil {
			t.Fatalf("event without a task: %+v", ev)
		}
		if ev.Agent != owner || ev.Task.Owner != owner {
			t.Errorf("event %s of %s names agent %q owner %q, want %s", ev.Kind, ev.Task.ID, ev.Agent, ev.Task.Owner, owner)
		}
		id := ev.Task.ID
		h.ids[ev.Task.Label] = id
		h.kinds[id] = append(h.kinds[id], ev.Kind)
		switch ev.Kind {
		case "task-output":
			if ev.Bytes == nil || *ev.Bytes < h.bytes[id] {
				t.Errorf("task-output of %s with bytes %v after %d", id, ev.Bytes, h.bytes[id])
			} else {
				h.bytes[id] = *ev.Bytes
			}
		case "task-started":
			started(*ev.Task)
		case "task-settled":
			h.final[id] = *ev.Task
			settled++
		}
	}
	return h
}

// startAtOnce starts the commands as bash tasks of owner, concurrently.
func (p *page) startAtOnce(t *testing.T, owner messages.AgentID, commands ...string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(commands))
	for _, cmd := range commands {
		wg.Go(func() {
			_, err := p.rt.Tasks().Start(bg, p.bash.Spec(owner, bash.Command{Command: cmd}))
			errs <- err
		})
	}
	wg.Wait()
	for range commands {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestPageEventsInOrder(t *testing.T) {
	p := newPage(t, setup{})
	events := p.open(t, livepage.EventsPath)
	snap := decode[wireSnapshot](t, events.Next(t), "snapshot")
	if len(snap.Agents) != 0 || len(snap.Tasks) != 0 {
		t.Fatalf("first snapshot = %+v, want empty", snap)
	}

	p.register(t, "a1")
	if ev := events.NextEvent(t); ev.Kind != "agent-registered" || ev.Agent != "a1" {
		t.Fatalf("first event = %+v, want agent-registered a1", ev)
	}
	path := fifo(t)
	// Three tasks at once: one held on the fifo and killed, one that prints and
	// completes, one that fails.
	held := "read l < " + path + "; echo never"
	p.startAtOnce(t, "a1", held, "echo out; echo more", "exit 3")
	h := followTasks(t, events, "a1", 3, func(task wireTask) {
		if task.Label == held {
			p.kill(t, messages.TaskID(task.ID), "a1")
		}
	})
	want := []struct {
		label, order, status, detail string
		bytes                        int64
	}{
		{held, `^task-started( task-output)? task-stopping( task-output)? task-settled$`, "killed", "signal: SIGTERM", 0},
		{"echo out; echo more", `^task-started( task-output)? task-settled$`, "completed", "exit code: 0", int64(len("out\nmore\n"))},
		{"exit 3", `^task-started( task-output)? task-settled$`, "completed", "exit code: 3", 0},
	}
	for _, w := range want {
		id := h.ids[w.label]
		if got := compress(h.kinds[id]); !regexp.MustCompile(w.order).MatchString(got) {
			t.Errorf("events of %s (%s) = %q, want %s", id, w.label, got, w.order)
		}
		// Output events coalesce (how many is not in the contract), and a kind
		// without an output stream has none: those that come count up to the
		// output's size.
		if got := h.bytes[id]; got > w.bytes {
			t.Errorf("output events of %s (%s) end at %d bytes, want at most %d", id, w.label, got, w.bytes)
		}
		if got := h.final[id]; got.Status != w.status || got.Detail != w.detail || got.Finished.IsZero() || got.Started.IsZero() {
			t.Errorf("settled %s = %+v, want %s (%s) with start and finish times", id, got, w.status, w.detail)
		}
	}

	t.Run("a new page's snapshot lists the owner and its tasks", func(t *testing.T) {
		snap := decode[wireSnapshot](t, p.open(t, livepage.EventsPath).Next(t), "snapshot")
		if len(snap.Agents) != 1 || snap.Agents[0].ID != "a1" || snap.Agents[0].Since.IsZero() {
			t.Errorf("agents = %+v, want a1 with its start", snap.Agents)
		}
		var got []string
		for _, task := range snap.Tasks {
			got = append(got, task.ID+" "+task.Status)
		}
		want := []string{h.ids[want[0].label] + " killed", h.ids[want[1].label] + " completed", h.ids[want[2].label] + " completed"}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("tasks = %q, want %q", got, want)
		}
	})

	t.Run("the owner's disposal comes after its tasks' events", func(t *testing.T) {
		p.dispose(t, "a1")
		for {
			ev := events.NextEvent(t)
			if ev.Task != nil {
				t.Fatalf("task event %s of %s after every task settled", ev.Kind, ev.Task.ID)
			}
			if ev.Kind == "agent-disposed" && ev.Agent == "a1" {
				return
			}
		}
	})
}

func TestPageSnapshotOrder(t *testing.T) {
	p := newPage(t, setup{})
	for _, id := range []messages.AgentID{"b", "a", "c"} {
		p.register(t, id)
	}
	var fakes []*fake.Task
	for _, owner := range []messages.AgentID{"", "c", "a"} {
		ft := fake.New(true)
		if _, err := p.rt.Tasks().Start(bg, ft.Spec("fake", "of "+string(owner), owner)); err != nil {
			t.Fatal(err)
		}
		fakes = append(fakes, ft)
	}
	defer func() {
		for _, ft := range fakes {
			ft.Finish(messages.Outcome{Status: messages.Completed})
		}
	}()
	snap := decode[wireSnapshot](t, p.open(t, livepage.EventsPath).Next(t), "snapshot")
	var agents, tasks []string
	for _, a := range snap.Agents {
		agents = append(agents, a.ID)
	}
	for _, task := range snap.Tasks {
		tasks = append(tasks, task.Label)
	}
	t.Run("owners come in the Source's order: the order they began", func(t *testing.T) {
		if want := []string{"b", "a", "c"}; !slices.Equal(agents, want) {
			t.Errorf("agents = %q, want %q", agents, want)
		}
	})
	t.Run("tasks come by owner, the unowned last", func(t *testing.T) {
		if want := []string{"of a", "of c", "of "}; !slices.Equal(tasks, want) {
			t.Errorf("tasks = %q, want %q", tasks, want)
		}
	})
}

// gate holds the writes of the event stream while it is closed, so that a test
// can make the page's connection fall behind.
type gate struct {
	mu      sync.Mutex // protects open
	open    chan struct{}
	blocked chan struct{} // gets a value when a write waits
}

func newGate() *gate { return &gate{blocked: make(chan struct{}, 1)} }

func (g *gate) hold() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	close(g.open)
	g.open = nil
	g.mu.Unlock()
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&gatedWriter{ResponseWriter: w, g: g}, r)
	})
}

type gatedWriter struct {
	http.ResponseWriter
	g *gate
}

func (w *gatedWriter) Write(b []byte) (int, error) {
	w.g.mu.Lock()
	open := w.g.open
	w.g.mu.Unlock()
	if open != nil {
		select {
		case w.g.blocked <- struct{}{}:
		default:
		}
		<-open
	}
	return w.ResponseWriter.Write(b)
}

func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestPageEventsOverflow(t *testing.T) {
	const buffer = 4
	g := newGate()
	p := newPage(t, setup{page: []livepage.Option{livepage.WithEventBuffer(buffer)}, wrap: g.wrap})
	events := p.open(t, livepage.EventsPath)
	decode[wireSnapshot](t, events.Next(t), "snapshot")

	tasks := p.rt.Tasks()
	start := func(label string) {
		t.Helper()
		ft := fake.New(true)
		if _, err := tasks.Start(bg, ft.Spec("fake", label, "")); err != nil {
			t.Fatal(err)
		}
	}
	// 1. The page's writer is held on the first event: the connection reads no more.
	g.hold()
	start("t1")
	<-g.blocked
	// 2. The runtime goes on: the buffer takes `buffer` events, the rest are missed
	//    (List is a barrier: every start before it has been published).
	const missed = 3
	for i := range buffer + missed {
		start("t" + strconv.Itoa(i+2))
	}
	if _, err := tasks.List(bg, ""); err != nil {
		t.Fatal(err)
	}
	g.release()
	for i := range buffer + 1 {
		if ev := events.NextEvent(t); ev.Kind != "task-started" || ev.Task.Label != "t"+strconv.Itoa(i+1) {
			t.Fatalf("event %d = %s %+v, want task-started t%d", i+1, ev.Kind, ev.Task, i+1)
		}
	}
	// 3. The next event the connection gets is the overflow; then a fresh snapshot
	//    with everything, and the event that came after the gap. Those two come in
	//    either order: the writer resynchronises at the end of the batch holding
	//    the overflow, and the event after it may or may not have reached that
	//    batch (the subscription delivers it on its own goroutine).
	start("last")
	if ev := events.NextEvent(t); ev.Kind != "overflow" || ev.Missed != missed {
		t.Errorf("after the gap: %+v, want overflow of %d", ev, missed)
	}
	var sawLast, sawSnapshot bool
	for range 2 {
		m := events.Next(t)
		switch m.Event {
		case "snapshot":
			snap := decode[wireSnapshot](t, m, "snapshot")
			if got, want := len(snap.Tasks), 1+buffer+missed+1; got != want {
				t.Errorf("resync snapshot lists %d tasks, want %d", got, want)
			}
			sawSnapshot = true
		default:
			if ev := decode[wireEvent](t, m, "event"); ev.Kind != "task-started" || ev.Task.Label != "last" {
				t.Errorf("after the overflow: %s %+v, want task-started last or the snapshot", ev.Kind, ev.Task)
			}
			sawLast = true
		}
	}
	if !sawLast || !sawSnapshot {
		t.Errorf("after the overflow: task-started last %v, snapshot %v; want both", sawLast, sawSnapshot)
	}
}

func TestPageRefusals(t *testing.T) {
	p := newPage(t, setup{})
	p.register(t, "a1")
	ft := fake.New(true)
	ft.Buffered()
	id, err := p.rt.Tasks().Start(bg, ft.Spec("bash", "held", "a1"))
	if err != nil || id != "bash-1" {
		t.Fatalf("started %q (%v), want bash-1", id, err)
	}
	defer ft.Finish(messages.Outcome{Status: messages.Completed})
	tests := []struct {
		name, method, path string
		host               string
		want               int
	}{
		{"a POST to the page is refused: the page is read-only", http.MethodPost, "/", "", http.StatusMethodNotAllowed},
		{"a POST to the event stream is refused", http.MethodPost, "/events", "", http.StatusMethodNotAllowed},
		{"a DELETE of a tail is refused", http.MethodDelete, "/tail?task=bash-1", "", http.StatusMethodNotAllowed},
		{"a PUT is refused", http.MethodPut, "/tail?task=bash-1", "", http.StatusMethodNotAllowed},
		{"an unknown path is not found", http.MethodGet, "/kill?task=bash-1", "", http.StatusNotFound},
		{"a tail without a task is a bad request", http.MethodGet, "/tail", "", http.StatusBadRequest},
		{"a tail at a negative offset is a bad request", http.MethodGet, "/tail?task=bash-1&offset=-1", "", http.StatusBadRequest},
		{"a tail at a bad offset is a bad request", http.MethodGet, "/tail?task=bash-1&offset=x", "", http.StatusBadRequest},
		{"a tail of an unknown task is not found", http.MethodGet, "/tail?task=bash-99", "", http.StatusNotFound},
		{"a tail of a malformed id is not found", http.MethodGet, "/tail?task=..%2Fx", "", http.StatusNotFound},
		{"a Host that is not loopback is refused on a loopback address (DNS rebinding)", http.MethodGet, "/", "attacker.example", http.StatusForbidden},
		{"a foreign Host cannot read the events", http.MethodGet, "/events", "attacker.example:80", http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, h, body := p.do(t, tc.method, tc.path, tc.host)
			if code != tc.want {
				t.Errorf("%s %s: %d (%s), want %d", tc.method, tc.path, code, strings.TrimSpace(body), tc.want)
			}
			if code == http.StatusMethodNotAllowed && h.Get("Allow") != http.MethodGet {
				t.Errorf("Allow = %q, want GET", h.Get("Allow"))
			}
		})
	}
	t.Run("nothing refused acted on the task", func(t *testing.T) {
		snap, err := p.rt.Tasks().Get(bg, "bash-1", "a1")
		if err != nil || snap.Status != messages.Running {
			t.Errorf("bash-1 = %+v (%v), want running", snap, err)
		}
	})
	t.Run("the page's responses forbid framing, sniffing and foreign scripts", func(t *testing.T) {
		testHeaders(t, p)
	})
	t.Run("streams end and new requests are refused once the Source shuts down", func(t *testing.T) {
		events := p.open(t, livepage.EventsPath)
		decode[wireSnapshot](t, events.Next(t), "snapshot")
		tail := p.open(t, livepage.TailPath+"?task=bash-1")
		p.src.shutDown()
		events.Ended(t)
		tail.Ended(t)
		if code, _, _ := p.do(t, http.MethodGet, "/", ""); code != http.StatusServiceUnavailable {
			t.Errorf("GET / after the shutdown: %d, want 503", code)
		}
	})
}

// do sends a request with a body to the page, with Host host when not "", and
// returns the answer.
func (p *page) do(t *testing.T, method, path, host string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.hs.URL+path, strings.NewReader(`{"task_id":"bash-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// testHeaders checks the security headers of the page and its static files.
func testHeaders(t *testing.T, p *page) {
	code, h, body := p.do(t, http.MethodGet, "/", "")
	if code != http.StatusOK || !strings.Contains(body, `<script src="page.js"`) {
		t.Fatalf("GET /: %d %q", code, body)
	}
	want := map[string]string{
		"Content-Type":                 "text/html; charset=utf-8",
		"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		"X-Content-Type-Options":       "nosniff",
		"X-Frame-Options":              "DENY",
		"Referrer-Policy":              "no-referrer",
		"Cross-Origin-Resource-Policy": "same-origin",
		"Cache-Control":                "no-cache",
		"Access-Control-Allow-Origin":  "",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for path, ct := range map[string]string{"/page.js": "text/javascript; charset=utf-8", "/page.css": "text/css; charset=utf-8"} {
		if code, h, _ := p.do(t, http.MethodGet, path, ""); code != http.StatusOK || h.Get("Content-Type") != ct {
			t.Errorf("GET %s: %d %q, want 200 %q", path, code, h.Get("Content-Type"), ct)
		}
	}
}
