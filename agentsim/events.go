package agentsim

import (
	"time"

	"github.com/taskrt/taskrt/messages"
)

// EventType says what an Event reports.
type EventType string

// The event types.
const (
	EventEntry           EventType = "entry"      // a transcript entry was appended
	EventAgentRegistered EventType = "registered" // an agent was registered
	EventAgentDisposed   EventType = "disposed"   // an agent's Dispose returned
	EventTaskStarted     EventType = "started"    // a tool call returned a background handle
	EventTaskSettled     EventType = "settled"    // a task reached a terminal status
)

// Event is one thing that happened in a Sim, for observers (the live renderer, the
// -json output).
type Event struct {
	Time    time.Time        `json:"-"`
	Elapsed float64          `json:"t"` // seconds since the Sim was created
	Type    EventType        `json:"type"`
	Agent   messages.AgentID `json:"agent,omitempty"`
	Parent  messages.AgentID `json:"parent,omitempty"` // EventAgentRegistered
	Entry   *Entry           `json:"entry,omitempty"`  // EventEntry
	Task    *TaskInfo        `json:"task,omitempty"`   // EventTaskStarted, EventTaskSettled
}

// TaskInfo is the JSON-friendly projection of a task snapshot.
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
