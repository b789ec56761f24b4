package agentsim

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

// EntryKind is what a transcript entry records.
type EntryKind string

// The entry kinds.
const (
	EntryUser       EntryKind = "user"        // a user prompt, the start of a turn
	EntryAssistant  EntryKind = "assistant"   // model text: commentary, or the final answer
	EntryToolCall   EntryKind = "tool_call"   // a tool call the model made
	EntryToolResult EntryKind = "tool_result" // the result of a tool call
	EntryNotice     EntryKind = "notice"      // a completion notice the runtime injected
)

// Entry is one transcript entry.
type Entry struct {
	Seq   int              `json:"seq"` // position in its session, from 0
	Time  time.Time        `json:"time"`
	Agent messages.AgentID `json:"agent"`
	Kind  EntryKind        `json:"kind"`
	// Text is the prompt, the assistant's text, the tool result's text or the
	// notice.
	Text string `json:"text,omitempty"`
	// Tool and Args describe a tool call; Tool also names a result's tool.
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Data and IsError are a tool result's structured data and error flag.
	Data    any  `json:"data,omitempty"`
	IsError bool `json:"is_error,omitempty"`
	// Final marks the assistant entry that ended a turn; Stop is its stop reason and
	// Detail the error or abort reason, if any.
	Final  bool                `json:"final,omitempty"`
	Stop   subagent.StopReason `json:"stop,omitempty"`
	Detail string              `json:"detail,omitempty"`
}

// Session is an agent's transcript. It is safe for concurrent use: the agent loop
// appends to it while the runtime's notice listener injects into it.
type Session struct {
	id       messages.AgentID
	observer func(Entry) // called after every append, outside the lock; may be nil

	mu      sync.Mutex // protects entries, notices and changed
	entries []Entry
	notices int
	changed chan struct{} // closed (and replaced) on every append
}

// NewSession returns an empty session for agent id. observer, if not nil, is called
// with every entry appended, on the appending goroutine.
func NewSession(id messages.AgentID, observer func(Entry)) *Session {
	return &Session{id: id, observer: observer, changed: make(chan struct{})}
}

// ID is the session's agent id.
func (s *Session) ID() messages.AgentID { return s.id }

// Append adds e (its Seq, Time and Agent are filled in) and returns it as stored.
func (s *Session) Append(e Entry) Entry {
	s.mu.Lock()
	e.Seq = len(s.entries)
	e.Time = time.Now()
	e.Agent = s.id
	s.entries = append(s.entries, e)
	if e.Kind == EntryNotice {
		s.notices++
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if s.observer != nil {
		s.observer(e)
	}
	return e
}

// Inject appends a completion notice. It has the shape of messages.Injector, so
// actors.WithInjector(s.Inject) wires the session to the runtime. It never blocks
// on the agent loop.
func (s *Session) Inject(_ context.Context, text string) error {
	s.Append(Entry{Kind: EntryNotice, Text: text})
	return nil
}

// Entries returns a copy of the transcript.
func (s *Session) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

// Since returns a copy of the entries from position from on.
func (s *Session) Since(from int) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from >= len(s.entries) {
		return nil
	}
	return append([]Entry(nil), s.entries[max(from, 0):]...)
}

// Len is the number of entries.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Notices returns the texts of the notices injected so far, in order.
func (s *Session) Notices() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, s.notices)
	for _, e := range s.entries {
		if e.Kind == EntryNotice {
			out = append(out, e.Text)
		}
	}
	return out
}

// WaitNotices blocks until the session holds at least n notices in total, or ctx
// ends (returning ctx's error).
func (s *Session) WaitNotices(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		have, changed := s.notices, s.changed
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
