package agentsim

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

// The kinds of transcript entries: Entry.Kind, and the "kind: text" lines of a
// scenario's transcript expectations.
const (
	entryUser       = "user"        // a user prompt, the start of a turn
	entryAssistant  = "assistant"   // model text: commentary, or the final answer
	entryToolCall   = "tool_call"   // a tool call the model made
	entryToolResult = "tool_result" // the result of a tool call
	entryNotice     = "notice"      // a completion notice the runtime injected
)

// Entry is one transcript entry.
type Entry struct {
	Seq   int              `json:"seq"` // position in its session, from 0
	Time  time.Time        `json:"time"`
	Agent messages.AgentID `json:"agent"`
	// Kind is what the entry records: "user" (a prompt, the start of a turn),
	// "assistant" (model text: commentary, or the final answer), "tool_call" (a
	// tool call the model made), "tool_result" (its result) or "notice" (a
	// completion notice the runtime injected).
	Kind string `json:"kind"`
	// Text is the prompt, the assistant's text, the tool result's text or the
	// notice.
	Text string `json:"text,omitempty"`
	// Tool and Args describe a tool call; Tool also names a result's tool.
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	// Data and IsError are a tool result's structured data (a tools.Handle for a
	// background start) and error flag.
	Data    any  `json:"data,omitempty"`
	IsError bool `json:"is_error,omitempty"`
	// Final marks the assistant entry that ended a turn; Stop is its stop reason and
	// Detail the error or abort reason, if any.
	Final  bool                `json:"final,omitempty"`
	Stop   subagent.StopReason `json:"stop,omitempty"`
	Detail string              `json:"detail,omitempty"`
}

// Session is an agent's transcript. A Sim makes one for every agent it registers
// (Sim.Register, Sim.Session) and wires it to the runtime as the agent's notice
// injector. It is safe for concurrent use: the agent loop appends to it while the
// runtime's notice listener injects into it.
type Session struct {
	id       messages.AgentID
	observer func(Entry) // called after every append, outside the lock; may be nil

	mu      sync.Mutex // protects entries, notices and changed
	entries []Entry
	notices int
	changed chan struct{} // closed (and replaced) on every append
}

// newSession returns an empty session for agent id. observer, if not nil, is called
// with every entry appended, on the appending goroutine.
func newSession(id messages.AgentID, observer func(Entry)) *Session {
	return &Session{id: id, observer: observer, changed: make(chan struct{})}
}

// append adds e (its Seq, Time and Agent are filled in) and returns it as stored.
func (s *Session) append(e Entry) Entry {
	s.mu.Lock()
	e.Seq = len(s.entries)
	e.Time = time.Now()
	e.Agent = s.id
	s.entries = append(s.entries, e)
	if e.Kind == entryNotice {
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

// inject appends a completion notice. It has the shape of messages.Injector, so
// actors.WithInjector(s.inject) wires the session to the runtime. It never blocks
// on the agent loop.
func (s *Session) inject(_ context.Context, text string) error {
	s.append(Entry{Kind: entryNotice, Text: text})
	return nil
}

// Entries returns a copy of the transcript.
func (s *Session) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

// since returns a copy of the entries from position from on.
func (s *Session) since(from int) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from >= len(s.entries) {
		return nil
	}
	return append([]Entry(nil), s.entries[max(from, 0):]...)
}

// size is the number of entries.
func (s *Session) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// noticeTexts returns the texts of the notices injected so far, in order.
func (s *Session) noticeTexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, s.notices)
	for _, e := range s.entries {
		if e.Kind == entryNotice {
			out = append(out, e.Text)
		}
	}
	return out
}

// waitNotices blocks until the session holds at least n notices in total, or ctx
// ends (returning ctx's error).
func (s *Session) waitNotices(ctx context.Context, n int) error {
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
