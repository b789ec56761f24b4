// Package pagetest is a browser's view of the live page for tests: its wire
// format as a browser decodes it, and a Server-Sent Events client that reads a
// stream on a goroutine of the test.
package pagetest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ---- the page's wire format, as a browser reads it ----

// Task is a task as the page sends it.
type Task struct {
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
	Full     bool      `json:"output_full"`
}

// Snapshot is the page's first message and its resynchronisation.
type Snapshot struct {
	Now    time.Time `json:"now"`
	Agents []struct {
		ID      string    `json:"id"`
		Since   time.Time `json:"since"`
		Evicted int       `json:"evicted"`
	} `json:"agents"`
	Tasks []Task `json:"tasks"`
}

// Event is a runtime event as the page sends it.
type Event struct {
	Kind   string `json:"kind"`
	Agent  string `json:"agent"`
	Task   *Task  `json:"task"`
	Bytes  *int64 `json:"bytes"`
	Missed int    `json:"missed"`
}

// Output is one message of a task's tail.
type Output struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Missed int64  `json:"missed"`
	Data   []byte `json:"data"`
}

// End is the last message of a tail.
type End struct {
	Reason string `json:"reason"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Next   int64  `json:"next"`
}

// ---- an SSE client ----

// Msg is one Server-Sent Events message.
type Msg struct{ Event, ID, Data string }

// Stream is an open SSE response read on a goroutine of the test.
type Stream struct {
	resp *http.Response
	msgs chan Msg      // closed at the end of the stream
	quit chan struct{} // closed by the cleanup
	done chan struct{} // closed when the reader returned
}

// Open GETs url with hc and fails the test unless it answers 200 with an
// event stream. The response is closed at the end of the test.
func Open(t *testing.T, hc *http.Client, url string, header ...string) *Stream {
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
	s := &Stream{resp: resp, msgs: make(chan Msg), quit: make(chan struct{}), done: make(chan struct{})}
	go s.read()
	t.Cleanup(func() {
		close(s.quit)
		resp.Body.Close()
		<-s.done
	})
	return s
}

func (s *Stream) read() {
	defer close(s.done)
	defer close(s.msgs)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(nil, 4<<20)
	var m Msg
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if m.Event == "" && m.Data == "" {
				continue // a comment's end
			}
			select {
			case s.msgs <- m:
			case <-s.quit:
				return
			}
			m = Msg{}
		case strings.HasPrefix(line, "event: "):
			m.Event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			m.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			m.Data += line[len("data: "):]
		}
	}
}

// Next returns the next message; it fails the test when the stream ends first.
func (s *Stream) Next(t *testing.T) Msg {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(time.Minute):
		t.Fatal("no message within a minute")
		return Msg{}
	}
}

// Ended waits for the stream to end (the server closed it).
func (s *Stream) Ended(t *testing.T) {
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

// Rest returns the messages left until the stream ends (the server closed it); it
// fails the test when the stream is still open a minute on.
func (s *Stream) Rest(t *testing.T) []Msg {
	t.Helper()
	var rest []Msg
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return rest
			}
			rest = append(rest, m)
		case <-time.After(time.Minute):
			t.Fatal("the stream did not end within a minute")
			return rest
		}
	}
}

// Decode reads m as event name with JSON data into v.
func Decode[T any](t *testing.T, m Msg, name string) T {
	t.Helper()
	var v T
	if m.Event != name {
		t.Fatalf("message %q (%s), want %q", m.Event, m.Data, name)
	}
	if err := json.Unmarshal([]byte(m.Data), &v); err != nil {
		t.Fatalf("%v in %s", err, m.Data)
	}
	return v
}

// NextEvent skips nothing: it returns the next message as a runtime event.
func (s *Stream) NextEvent(t *testing.T) Event {
	t.Helper()
	return Decode[Event](t, s.Next(t), "event")
}

// ReadTail reads output messages until they carry want (as text), returning the
// last offset.
func ReadTail(t *testing.T, s *Stream, off int64, want string) int64 {
	t.Helper()
	var got strings.Builder
	for got.String() != want {
		o := Decode[Output](t, s.Next(t), "output")
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
