package livepage

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// sse writes a Server-Sent Events stream: messages are gathered in a buffer and
// written with flush, each write bounded by writeTimeout.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     bytes.Buffer
	started bool
}

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// event adds a message: its event name, its id ("" for none) and v as JSON data.
func (s *sse) event(name, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil { // the page's types always marshal
		panic("livepage: " + err.Error())
	}
	s.buf.WriteString("event: " + name + "\n")
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("data: ")
	s.buf.Write(data) // JSON has no raw newline
	s.buf.WriteString("\n\n")
}

// comment adds a comment line (ignored by EventSource; it keeps the stream alive).
func (s *sse) comment(text string) {
	s.buf.WriteString(": " + strings.ReplaceAll(text, "\n", " ") + "\n\n")
}

// flush writes what was added and flushes it to the client. The first flush sends
// the headers of an event stream.
func (s *sse) flush() error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // for a proxy in front
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	return s.rc.Flush()
}
