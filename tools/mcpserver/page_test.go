//go:build linux

package mcpserver_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/fake"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

// pageServer serves srv's MCP handler at /mcp and its live page at /, each behind
// its token guard when token is set; wrap, when not nil, wraps the page handler.
func pageServer(t *testing.T, srv *mcpserver.Server, token string, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var mcpH, pageH http.Handler = srv.HTTPHandler(), srv.PageHandler()
	if wrap != nil {
		pageH = wrap(pageH)
	}
	if token != "" {
		mcpH = mcpserver.RequireToken(token, mcpH)
		pageH = mcpserver.RequireBrowserToken(token, pageH)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcpH)
	mux.Handle(mcpserver.PagePath, pageH)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// ---- the page's wire format, as a browser reads it ----

type wireTask struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Label    string    `json:"label"`
	Owner    string    `json:"owner"`
	Status   string    `json:"status"`
	Detail   string    `json:"detail"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Evicted  bool      `json:"evicted"`
	Watches  int       `json:"watches"`
}

type wireSnapshot struct {
	Now    time.Time `json:"now"`
	Agents []struct {
		ID      string    `json:"id"`
		Since   time.Time `json:"since"`
		Evicted int       `json:"evicted"`
	} `json:"agents"`
	Tasks []wireTask `json:"tasks"`
}

type wireEvent struct {
	Kind   string    `json:"kind"`
	Agent  string    `json:"agent"`
	Task   *wireTask `json:"task"`
	Bytes  *int64    `json:"bytes"`
	Missed int       `json:"missed"`
}

type wireOutput struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Missed int64  `json:"missed"`
	Data   []byte `json:"data"`
}

type wireEnd struct {
	Reason string `json:"reason"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Next   int64  `json:"next"`
}

// ---- an SSE client ----

// sseMsg is one Server-Sent Events message.
type sseMsg struct{ event, id, data string }

// stream is an open SSE response read on a goroutine of the test.
type stream struct {
	resp *http.Response
	msgs chan sseMsg   // closed at the end of the stream
	quit chan struct{} // closed by the cleanup
	done chan struct{} // closed when the reader returned
}

// openStream GETs url with hc and fails the test unless it answers 200 with an
// event stream. The response is closed at the end of the test.
func openStream(t *testing.T, hc *http.Client, url string, header ...string) *stream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s (%s)", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{resp: resp, msgs: make(chan sseMsg), quit: make(chan struct{}), done: make(chan struct{})}
	go s.read()
	t.Cleanup(func() {
		close(s.quit)
		resp.Body.Close()
		<-s.done
	})
	return s
}

func (s *stream) read() {
	defer close(s.done)
	defer close(s.msgs)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(nil, 4<<20)
	var m sseMsg
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if m.event == "" && m.data == "" {
				continue // a comment's end
			}
			select {
			case s.msgs <- m:
			case <-s.quit:
				return
			}
			m = sseMsg{}
		case strings.HasPrefix(line, "event: "):
			m.event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			m.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			m.data += line[len("data: "):]
		}
	}
}

// next returns the next message; it fails the test when the stream ends first.
func (s *stream) next(t *testing.T) sseMsg {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(time.Minute):
		t.Fatal("no message within a minute")
		return sseMsg{}
	}
}

// ended waits for the stream to end (the server closed it).
func (s *stream) ended(t *testing.T) {
	t.Helper()
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return
			}
			t.Errorf("message after the end: %+v", m)
		case <-time.After(time.Minute):
			t.Fatal("the stream did not end within a minute")
		}
	}
}

// decode reads m as event name with JSON data into v.
func decode[T any](t *testing.T, m sseMsg, name string) T {
	t.Helper()
	var v T
	if m.event != name {
		t.Fatalf("message %q (%s), want %q", m.event, m.data, name)
	}
	if err := json.Unmarshal([]byte(m.data), &v); err != nil {
		t.Fatalf("%v in %s", err, m.data)
	}
	return v
}

// nextEvent skips nothing: it returns the next message as a runtime event.
func (s *stream) nextEvent(t *testing.T) wireEvent {
	t.Helper()
	return decode[wireEvent](t, s.next(t), "event")
}

// ---- the tests ----

// kinds sequence: a task's event kinds, consecutive task-output events counted
// once (output events coalesce; how many is not in the contract).
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

func TestPageEventsInOrder(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "", nil)
	events := openStream(t, httpClient(t, ""), hs.URL+mcpserver.EventsPath)
	snap := decode[wireSnapshot](t, events.next(t), "snapshot")
	if len(snap.Agents) != 0 || len(snap.Tasks) != 0 {
		t.Fatalf("first snapshot = %+v, want empty", snap)
	}

	c := connectHTTP(t, hs, "")
	if ev := events.nextEvent(t); ev.Kind != "agent-registered" || ev.Agent != "mcp-1" {
		t.Fatalf("first event = %+v, want agent-registered mcp-1", ev)
	}
	path := fifo(t)
	// Three tasks at once: one held on the fifo and killed, one that prints and
	// completes, one that fails.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, cmd := range []string{"read l < " + path + "; echo never", "echo out; echo more", "exit 3"} {
		wg.Go(func() {
			_, err := c.cs.CallTool(bg, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd, "run_in_background": true}})
			errs <- err
		})
	}
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]string{} // label → id
	seq := map[string][]string{}
	final := map[string]wireTask{}
	bytes := map[string]int64{} // the last output size seen
	for settled := 0; settled < 3; {
		ev := events.nextEvent(t)
		if ev.Task == nil {
			t.Fatalf("event without a task: %+v", ev)
		}
		if ev.Agent != "mcp-1" || ev.Task.Owner != "mcp-1" {
			t.Errorf("event %s of %s names agent %q owner %q, want mcp-1", ev.Kind, ev.Task.ID, ev.Agent, ev.Task.Owner)
		}
		ids[ev.Task.Label] = ev.Task.ID
		seq[ev.Task.ID] = append(seq[ev.Task.ID], ev.Kind)
		if ev.Kind == "task-output" {
			if ev.Bytes == nil || *ev.Bytes < bytes[ev.Task.ID] {
				t.Errorf("task-output of %s with bytes %v after %d", ev.Task.ID, ev.Bytes, bytes[ev.Task.ID])
			} else {
				bytes[ev.Task.ID] = *ev.Bytes
			}
		}
		switch {
		case ev.Kind == "task-started" && strings.HasPrefix(ev.Task.Label, "read l"):
			c.call(t, "task_kill", map[string]any{"task_id": ev.Task.ID})
		case ev.Kind == "task-settled":
			final[ev.Task.ID] = *ev.Task
			settled++
		}
	}
	want := []struct {
		label, order, status, detail string
		bytes                        int64
	}{
		{"read l < " + path + "; echo never", `^task-started( task-output)? task-stopping( task-output)? task-settled$`, "killed", "signal: SIGTERM", 0},
		{"echo out; echo more", `^task-started( task-output)? task-settled$`, "completed", "exit code: 0", int64(len("out\nmore\n"))},
		{"exit 3", `^task-started( task-output)? task-settled$`, "completed", "exit code: 3", 0},
	}
	for _, w := range want {
		id := ids[w.label]
		if got := compress(seq[id]); !regexp.MustCompile(w.order).MatchString(got) {
			t.Errorf("events of %s (%s) = %q, want %s", id, w.label, got, w.order)
		}
		// Output events coalesce (how many is not in the contract), and a kind
		// without an output stream has none: those that come count up to the
		// output's size.
		if got := bytes[id]; got > w.bytes {
			t.Errorf("output events of %s (%s) end at %d bytes, want at most %d", id, w.label, got, w.bytes)
		}
		if got := final[id]; got.Status != w.status || got.Detail != w.detail || got.Finished.IsZero() || got.Started.IsZero() {
			t.Errorf("settled %s = %+v, want %s (%s) with start and finish times", id, got, w.status, w.detail)
		}
	}

	t.Run("a new page's snapshot lists the owner and its tasks", func(t *testing.T) {
		again := openStream(t, httpClient(t, ""), hs.URL+mcpserver.EventsPath)
		snap := decode[wireSnapshot](t, again.next(t), "snapshot")
		if len(snap.Agents) != 1 || snap.Agents[0].ID != "mcp-1" || snap.Agents[0].Since.IsZero() {
			t.Errorf("agents = %+v, want mcp-1 with its start", snap.Agents)
		}
		var got []string
		for _, task := range snap.Tasks {
			got = append(got, task.ID+" "+task.Status)
		}
		want := []string{ids[want[0].label] + " killed", ids[want[1].label] + " completed", ids[want[2].label] + " completed"}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("tasks = %q, want %q", got, want)
		}
	})

	t.Run("the owner's disposal comes after its tasks' events", func(t *testing.T) {
		if err := c.cs.Close(); err != nil {
			t.Fatal(err)
		}
		for {
			ev := events.nextEvent(t)
			if ev.Task != nil {
				t.Fatalf("task event %s of %s after every task settled", ev.Kind, ev.Task.ID)
			}
			if ev.Kind == "agent-disposed" && ev.Agent == "mcp-1" {
				return
			}
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
	srv := newServer(t, mcpserver.WithPageEventBuffer(buffer))
	g := newGate()
	hs := pageServer(t, srv, "", g.wrap)
	events := openStream(t, httpClient(t, ""), hs.URL+mcpserver.EventsPath)
	decode[wireSnapshot](t, events.next(t), "snapshot")

	tasks := srv.Runtime().Tasks()
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
		if ev := events.nextEvent(t); ev.Kind != "task-started" || ev.Task.Label != "t"+strconv.Itoa(i+1) {
			t.Fatalf("event %d = %s %+v, want task-started t%d", i+1, ev.Kind, ev.Task, i+1)
		}
	}
	// 3. The next event the connection gets is the overflow; then a fresh snapshot
	//    with everything, and the event that came after the gap. Those two come in
	//    either order: the writer resynchronises at the end of the batch holding
	//    the overflow, and the event after it may or may not have reached that
	//    batch (the subscription delivers it on its own goroutine).
	start("last")
	if ev := events.nextEvent(t); ev.Kind != "overflow" || ev.Missed != missed {
		t.Errorf("after the gap: %+v, want overflow of %d", ev, missed)
	}
	var sawLast, sawSnapshot bool
	for range 2 {
		m := events.next(t)
		switch m.event {
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

// tailURL is the tail of task id from offset off.
func tailURL(hs *httptest.Server, id messages.TaskID, off int64) string {
	return hs.URL + mcpserver.TailPath + "?task=" + string(id) + "&offset=" + strconv.FormatInt(off, 10)
}

// readTail reads output messages until they carry want (as text), returning the
// last offset.
func readTail(t *testing.T, s *stream, off int64, want string) int64 {
	t.Helper()
	var got strings.Builder
	for got.String() != want {
		o := decode[wireOutput](t, s.next(t), "output")
		if o.Offset != off || o.Missed != 0 || o.Next != o.Offset+int64(len(o.Data)) {
			t.Fatalf("output %+v after offset %d", o, off)
		}
		got.Write(o.Data)
		off = o.Next
		if !strings.HasPrefix(want, got.String()) {
			t.Fatalf("tail = %q, want %q", got.String(), want)
		}
	}
	return off
}

func TestPageTail(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "", nil)
	hc := httpClient(t, "")
	c := connectHTTP(t, hs, "")
	c.call(t, "task_list", map[string]any{})
	tasks := srv.Runtime().Tasks()
	ft := fake.New(true)
	ft.Buffered()
	id, err := tasks.Start(bg, ft.Spec("fake", "a fake stream", "mcp-1"))
	if err != nil {
		t.Fatal(err)
	}
	ft.Emit("one\n")

	tail := openStream(t, hc, tailURL(hs, id, 0))
	off := readTail(t, tail, 0, "one\n")
	ft.Emit("two\n")
	off = readTail(t, tail, off, "two\n")

	t.Run("the model's task_output still returns everything", func(t *testing.T) {
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": string(id)}))
		if len(got) != 1 || !strings.Contains(got[0], "one\ntwo\n") {
			t.Errorf("task_output = %q, want the whole output one\\ntwo\\n", got)
		}
	})
	t.Run("the model's reads do not move the tail", func(t *testing.T) {
		ft.Emit("three\n")
		readTail(t, tail, off, "three\n")
	})
	t.Run("an offset starts the tail there", func(t *testing.T) {
		s := openStream(t, hc, tailURL(hs, id, 4))
		readTail(t, s, 4, "two\nthree\n")
	})
	t.Run("a reconnecting EventSource resumes at its Last-Event-ID", func(t *testing.T) {
		s := openStream(t, hc, tailURL(hs, id, 0), "Last-Event-ID", "8")
		readTail(t, s, 8, "three\n")
	})
	t.Run("a new page's snapshot marks a watched task with its live watches", func(t *testing.T) {
		other := fake.New(true)
		other.Buffered()
		otherID, err := tasks.Start(bg, other.Spec("fake", "not watched", "mcp-1"))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Finish(messages.Outcome{Status: messages.Completed})
		watches := func() map[string]int {
			t.Helper()
			s := openStream(t, hc, hs.URL+mcpserver.EventsPath)
			got := map[string]int{}
			for _, task := range decode[wireSnapshot](t, s.next(t), "snapshot").Tasks {
				got[task.ID] = task.Watches
			}
			return got
		}
		want := map[string]int{string(id): 0, string(otherID): 0}
		if got := watches(); !maps.Equal(got, want) {
			t.Errorf("watches before task_watch = %v, want %v", got, want)
		}
		for n := 1; n <= 2; n++ {
			c.call(t, "task_watch", map[string]any{"task_id": string(id), "pattern": "ERROR"})
			want[string(id)] = n
			if got := watches(); !maps.Equal(got, want) {
				t.Errorf("watches after %d task_watch calls = %v, want %v", n, got, want)
			}
		}
	})
	t.Run("a settled task's tail ends with its status once its output was sent", func(t *testing.T) {
		ft.Emit("four\n")
		ft.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		readTail(t, tail, off+6, "four\n")
		end := decode[wireEnd](t, tail.next(t), "end")
		if want := (wireEnd{Reason: "settled", Status: "completed", Detail: "exit code: 0", Next: 19}); end != want {
			t.Errorf("end = %+v, want %+v", end, want)
		}
		tail.ended(t)
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": string(id)}))
		if len(got) == 0 || !strings.Contains(got[0], "three\nfour\n") {
			t.Errorf("task_output after the tail ended = %q, want the rest, three\\nfour\\n", got)
		}
	})
	t.Run("bytes no longer held are counted as missed", func(t *testing.T) {
		ft := fake.New(true)
		ft.Buffered(output.WithMemory(4, 4096), output.WithoutSpill())
		id, err := tasks.Start(bg, ft.Spec("fake", "a long stream", "mcp-1"))
		if err != nil {
			t.Fatal(err)
		}
		tailBytes := strings.Repeat("t", 4096)
		ft.Emit("headMIDDLE" + tailBytes)
		ft.Finish(messages.Outcome{Status: messages.Completed})
		s := openStream(t, hc, tailURL(hs, id, 0))
		var got []wireOutput
		for {
			m := s.next(t)
			if m.event == "end" {
				break
			}
			got = append(got, decode[wireOutput](t, m, "output"))
		}
		want := []wireOutput{{Offset: 0, Next: 4, Data: []byte("head")}, {Offset: 4, Next: 4106, Missed: 6, Data: []byte(tailBytes)}}
		if len(got) != len(want) {
			t.Fatalf("outputs = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].Offset != want[i].Offset || got[i].Next != want[i].Next || got[i].Missed != want[i].Missed || string(got[i].Data) != string(want[i].Data) {
				t.Errorf("output %d = offset %d next %d missed %d (%d bytes), want %d %d %d (%d bytes)", i,
					got[i].Offset, got[i].Next, got[i].Missed, len(got[i].Data), want[i].Offset, want[i].Next, want[i].Missed, len(want[i].Data))
			}
		}
	})
	t.Run("a task without an output stream ends at once, saying so", func(t *testing.T) {
		ft := fake.New(false)
		id, err := tasks.Start(bg, ft.Spec("final", "a final answer", "mcp-1"))
		if err != nil {
			t.Fatal(err)
		}
		s := openStream(t, hc, tailURL(hs, id, 0))
		if end := decode[wireEnd](t, s.next(t), "end"); end.Reason != "no-output" || end.Status != "running" {
			t.Errorf("end = %+v, want no-output while running", end)
		}
		s.ended(t)
		ft.Finish(messages.Outcome{Status: messages.Completed, Output: "answer"})
	})
	t.Run("data is the raw bytes, base64 in JSON", func(t *testing.T) {
		ft := fake.New(true)
		ft.Buffered()
		id, err := tasks.Start(bg, ft.Spec("fake", "binary", "mcp-1"))
		if err != nil {
			t.Fatal(err)
		}
		ft.Emit("\xff\x00<b>é\n")
		s := openStream(t, hc, tailURL(hs, id, 0))
		m := s.next(t)
		if want := base64.StdEncoding.EncodeToString([]byte("\xff\x00<b>é\n")); !strings.Contains(m.data, `"data":"`+want+`"`) || m.id != "8" {
			t.Errorf("message %+v, want data %s and id 8", m, want)
		}
		ft.Finish(messages.Outcome{Status: messages.Completed})
	})
}

func TestPageTailOfBash(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "", nil)
	c := connectHTTP(t, hs, "")
	// One fifo per line: a fifo written and closed twice could meet one open.
	first, second, hold := fifo(t), fifo(t), fifo(t)
	res := c.call(t, "bash", map[string]any{"run_in_background": true,
		"command": "read -r l < " + first + `; echo "$l"; read -r l < ` + second + `; echo "$l"; read -r l < ` + hold})
	var h struct {
		ID messages.TaskID `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil || h.ID == "" {
		t.Fatalf("bash result %q: %v", structured(t, res), err)
	}
	tail := openStream(t, httpClient(t, ""), tailURL(hs, h.ID, 0))
	release(t, first, "alpha")
	off := readTail(t, tail, 0, "alpha\n")
	release(t, second, "beta")
	off = readTail(t, tail, off, "beta\n")
	c.call(t, "task_kill", map[string]any{"task_id": string(h.ID)})
	end := decode[wireEnd](t, tail.next(t), "end")
	if end.Reason != "settled" || end.Status != "killed" || end.Next != off {
		t.Errorf("end = %+v, want settled, killed, at %d", end, off)
	}
	got := texts(t, c.call(t, "task_output", map[string]any{"task_id": string(h.ID)}))
	if len(got) == 0 || !strings.Contains(got[0], "alpha\nbeta\n") || !strings.Contains(got[0], "killed") {
		t.Errorf("task_output = %q, want the whole output alpha\\nbeta\\n and the killed status", got)
	}
}

func TestPageRefusals(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "", nil)
	hc := httpClient(t, "")
	c := connectHTTP(t, hs, "")
	path := fifo(t)
	c.call(t, "bash", map[string]any{"command": "read l < " + path, "run_in_background": true})
	do := func(method, url string, edit ...func(*http.Request)) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(`{"task_id":"bash-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range edit {
			e(req)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
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
			code, h, body := do(tc.method, hs.URL+tc.path, func(r *http.Request) {
				if tc.host != "" {
					r.Host = tc.host
				}
			})
			if code != tc.want {
				t.Errorf("%s %s: %d (%s), want %d", tc.method, tc.path, code, strings.TrimSpace(body), tc.want)
			}
			if code == http.StatusMethodNotAllowed && h.Get("Allow") != http.MethodGet {
				t.Errorf("Allow = %q, want GET", h.Get("Allow"))
			}
		})
	}
	t.Run("nothing refused acted on the task", func(t *testing.T) {
		got := texts(t, c.call(t, "task_list", map[string]any{}))
		if len(got) != 1 || !strings.Contains(got[0], "bash-1") || !strings.Contains(got[0], "running") {
			t.Errorf("task_list = %q, want bash-1 running", got)
		}
	})
	t.Run("the page's responses forbid framing, sniffing and foreign scripts", func(t *testing.T) {
		code, h, body := do(http.MethodGet, hs.URL+"/")
		if code != http.StatusOK || !strings.Contains(body, `<script src="page.js"`) {
			t.Fatalf("GET /: %d %q", code, body)
		}
		want := map[string]string{
			"Content-Type":                 "text/html; charset=utf-8",
			"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			"X-Content-Type-Options":       "nosniff",
			"X-Frame-Options":              "DENY",
			"Cross-Origin-Resource-Policy": "same-origin",
			"Access-Control-Allow-Origin":  "",
		}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		for path, ct := range map[string]string{"/page.js": "text/javascript; charset=utf-8", "/page.css": "text/css; charset=utf-8"} {
			if code, h, _ := do(http.MethodGet, hs.URL+path); code != http.StatusOK || h.Get("Content-Type") != ct {
				t.Errorf("GET %s: %d %q, want 200 %q", path, code, h.Get("Content-Type"), ct)
			}
		}
	})
	t.Run("streams end and new requests are refused once the server closes", func(t *testing.T) {
		events := openStream(t, hc, hs.URL+mcpserver.EventsPath)
		decode[wireSnapshot](t, events.next(t), "snapshot")
		tail := openStream(t, hc, hs.URL+mcpserver.TailPath+"?task=bash-1")
		if err := srv.Close(bg); err != nil {
			t.Fatal(err)
		}
		for {
			m, ok := <-events.msgs
			if !ok {
				break
			}
			if m.event == "snapshot" {
				t.Errorf("a snapshot after the close: %s", m.data)
			}
		}
		for range tail.msgs { // the kill's end, if the stream saw it before it closed
		}
		if code, _, _ := do(http.MethodGet, hs.URL+"/"); code != http.StatusServiceUnavailable {
			t.Errorf("GET / after Close: %d, want 503", code)
		}
	})
}

func TestPageToken(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, testToken, nil)
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, auth string
		want       int
	}{
		{"a missing token is refused, asking the browser for it", "", http.StatusUnauthorized},
		{"a wrong bearer token is refused", "Bearer nope", http.StatusUnauthorized},
		{"a wrong Basic password is refused", basic("operator", "nope"), http.StatusUnauthorized},
		{"the token as a Basic user name is refused", basic(testToken, ""), http.StatusUnauthorized},
		{"a prefix of the token is refused", basic("operator", testToken[:4]), http.StatusUnauthorized},
		{"the bearer token is accepted", "Bearer " + testToken, http.StatusOK},
		{"the token as the Basic password is accepted, whatever the user name", basic("anyone", testToken), http.StatusOK},
	}
	for _, tc := range tests {
		for _, path := range []string{"/", "/events", "/tail?task=bash-1"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				resp, err := httpClient(t, "").Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := tc.want
				if want == http.StatusOK && strings.HasPrefix(path, "/tail") {
					want = http.StatusNotFound // authorised; no such task
				}
				if resp.StatusCode != want {
					t.Errorf("status %d, want %d", resp.StatusCode, want)
				}
				if want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Basic realm="taskrt-mcp", charset="UTF-8"` {
					t.Errorf("WWW-Authenticate = %q, want a Basic challenge", resp.Header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	t.Run("the MCP endpoint still takes the bearer token only", func(t *testing.T) {
		r := newRaw(t, hs, "")
		code, _, err := r.post(bg, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			func(req *http.Request) { req.Header.Set("Authorization", basic("operator", testToken)) })
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("Basic on /mcp: %d (%v), want 401", code, err)
		}
	})
}

func TestPageNeverReports(t *testing.T) {
	srv := newServer(t)
	hs := pageServer(t, srv, "", nil)
	hc := httpClient(t, "")
	c, _ := serve(t, srv)
	c.setLogLevel(t)
	events := openStream(t, hc, hs.URL+mcpserver.EventsPath)
	decode[wireSnapshot](t, events.next(t), "snapshot")
	// The command waits for the test, so that its notice cannot ride on the start's
	// own result.
	gate := fifo(t)
	res := c.call(t, "bash", map[string]any{"command": "read l < " + gate + "; echo done-output", "run_in_background": true})
	var h struct {
		ID messages.TaskID `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(structured(t, res)), &h); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, res); len(got) != 1 {
		t.Fatalf("the start's result = %q, want its text only", got)
	}
	release(t, gate, "go")
	// The page watches the task to its end: events, then its whole tail.
	for {
		if ev := events.nextEvent(t); ev.Kind == "task-settled" && ev.Task.ID == string(h.ID) {
			break
		}
	}
	tail := openStream(t, hc, tailURL(hs, h.ID, 0))
	readTail(t, tail, 0, "done-output\n")
	if end := decode[wireEnd](t, tail.next(t), "end"); end.Reason != "settled" || end.Status != "completed" {
		t.Fatalf("end = %+v", end)
	}
	// The notice is pending once it went out as a log message.
	if l := c.nextLog(t); !strings.Contains(fmt.Sprint(l.Data), string(h.ID)) {
		t.Fatalf("log message %v, want the notice of %s", l.Data, h.ID)
	}
	t.Run("the notice still reaches the model's next result", func(t *testing.T) {
		got := texts(t, c.call(t, "task_list", map[string]any{}))
		if len(got) != 2 || !strings.HasPrefix(got[1], "background task "+string(h.ID)+" ") {
			t.Errorf("task_list = %q, want the list and %s's notice", got, h.ID)
		}
	})
	t.Run("the model's task_output returns the whole output", func(t *testing.T) {
		got := texts(t, c.call(t, "task_output", map[string]any{"task_id": string(h.ID)}))
		if len(got) != 1 || !strings.HasPrefix(got[0], "done-output\n") {
			t.Errorf("task_output = %q, want done-output and the status", got)
		}
	})
}
