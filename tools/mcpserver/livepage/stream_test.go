//go:build linux

package livepage_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

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
	Full     bool      `json:"output_full"`
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

// tailURL is the tail of task id from offset off.
func (p *page) tailURL(id messages.TaskID, off int64) string {
	return p.hs.URL + livepage.TailPath + "?task=" + string(id) + "&offset=" + strconv.FormatInt(off, 10)
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
