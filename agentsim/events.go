package agentsim

import (
	"time"

	"github.com/taskrt/taskrt/messages"
)

// The event types (Event.Type).
const (
	eventEntry      = "entry"      // a transcript entry was appended
	eventRegistered = "registered" // an agent was registered
	eventDisposed   = "disposed"   // an agent's Dispose returned
	eventStarted    = "started"    // a tool call returned a background handle
	eventSettled    = "settled"    // a task reached a terminal status
)

// Event is one thing that happened in a Sim, for an observer (WithObserver): the
// agentsim command's live transcript and its -json output, one event per line.
type Event struct {
	Time    time.Time `json:"-"`
	Elapsed float64   `json:"t"` // seconds since the Sim was created
	// Type is what happened: "entry" (a transcript entry was appended: Entry),
	// "registered" (an agent was registered: Agent, and Parent for a child),
	// "disposed" (an agent's disposal returned), "started" (a tool call returned a
	// background handle: Task) or "settled" (a task reached a terminal status: Task).
	Type   string           `json:"type"`
	Agent  messages.AgentID `json:"agent,omitempty"`
	Parent messages.AgentID `json:"parent,omitempty"` // "registered"
	Entry  *Entry           `json:"entry,omitempty"`  // "entry"
	Task   *TaskInfo        `json:"task,omitempty"`   // "started", "settled"
}

// TaskInfo is the JSON-friendly projection of a task snapshot: in events, and in a
// Report's list of settled tasks.
type TaskInfo struct {
	ID       messages.TaskID  `json:"id"`
	Kind     string           `json:"kind"`
	Label    string           `json:"label,omitempty"`
	Owner    messages.AgentID `json:"owner,omitempty"`
	Status   messages.Status  `json:"status"`
	Detail   string           `json:"detail,omitempty"`
	Reported bool             `json:"reported,omitempty"`
}

func taskInfo(s messages.Snapshot) TaskInfo {
	return TaskInfo{ID: s.ID, Kind: s.Kind, Label: s.Label, Owner: s.Owner, Status: s.Status, Detail: s.Detail, Reported: s.Reported}
}
