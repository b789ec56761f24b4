package livepage

import (
	"time"

	"github.com/taskrt/taskrt/messages"
)

// The JSON the page's streams carry (doc.go lists the messages). Its fields are
// the page's contract with page.js, and with anyone who reads the streams: they
// do not change.

// wireAgent is an owner as the page shows it.
type wireAgent struct {
	ID     messages.AgentID `json:"id"`
	Parent messages.AgentID `json:"parent,omitempty"`
	Since  time.Time        `json:"since,omitzero"`
	// Evicted counts the owner's settled tasks whose record retention dropped.
	Evicted int `json:"evicted,omitempty"`
}

// wireTask is a task as the page shows it.
type wireTask struct {
	ID       messages.TaskID  `json:"id"`
	Kind     string           `json:"kind"`
	Label    string           `json:"label"`
	Owner    messages.AgentID `json:"owner"`
	Status   messages.Status  `json:"status"`
	Detail   string           `json:"detail,omitempty"`
	Started  time.Time        `json:"started"`
	Finished time.Time        `json:"finished,omitzero"`
	Evicted  bool             `json:"evicted,omitempty"`
	// OutputFull: the task's work waits for its owner to read (block mode).
	OutputFull bool `json:"output_full,omitempty"`
	// Bytes is the task's output size from its state, in a snapshot (absent for a
	// kind without an output stream, and in events, which carry their own).
	Bytes *int64 `json:"bytes,omitempty"`
	// Watches is how many live task_watch watches the task has, in a snapshot
	// (Tasks.Watches; absent when none, and in events: a watch is not an event, and
	// a settled task has none).
	Watches int `json:"watches,omitempty"`
}

func toWireTask(s messages.Snapshot) *wireTask {
	return &wireTask{ID: s.ID, Kind: s.Kind, Label: s.Label, Owner: s.Owner, Status: s.Status,
		Detail: s.Detail, Started: s.Started, Finished: s.Finished, Evicted: s.Evicted, OutputFull: s.OutputFull}
}

// wireSnapshot is the state the page starts from, and resynchronises to after an
// overflow: the owners (in the order they began) and their tasks not evicted (in
// start order), then the unowned tasks.
type wireSnapshot struct {
	Now    time.Time   `json:"now"`
	Agents []wireAgent `json:"agents"`
	Tasks  []*wireTask `json:"tasks"`
}

// wireEvent is a runtime event as the page gets it.
type wireEvent struct {
	Kind   messages.EventKind `json:"kind"`
	Time   time.Time          `json:"time"`
	Agent  messages.AgentID   `json:"agent,omitempty"`
	Parent messages.AgentID   `json:"parent,omitempty"`
	Task   *wireTask          `json:"task,omitempty"`
	Bytes  *int64             `json:"bytes,omitempty"` // task-output only
	Missed int                `json:"missed,omitempty"`
}

func toWireEvent(ev messages.Event) wireEvent {
	we := wireEvent{Kind: ev.Kind, Time: ev.Time, Agent: ev.Agent, Parent: ev.Parent, Missed: ev.Missed}
	if ev.Kind == messages.EventTaskOutput {
		we.Bytes = &ev.Bytes
	}
	if ev.Task.ID != "" {
		we.Task = toWireTask(ev.Task)
	}
	return we
}

// wireOutput is one "output" message of a tail: raw bytes from Offset to Next,
// after Missed bytes that were no longer held.
type wireOutput struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Missed int64  `json:"missed,omitempty"`
	Data   []byte `json:"data"`
}

// wireEnd is the last message of a tail.
type wireEnd struct {
	// Reason is why the tail ended: one of the tail… reasons below.
	Reason string          `json:"reason"`
	Status messages.Status `json:"status,omitempty"`
	Detail string          `json:"detail,omitempty"`
	Next   int64           `json:"next"`
}

// The reasons a tail ends.
const (
	tailSettled  = "settled"   // the task settled and every byte held was sent
	tailEvicted  = "evicted"   // retention dropped the task's record and its output
	tailGone     = "gone"      // the task's record was dropped with its owner
	tailNoOutput = "no-output" // the task's kind gives no output to observe
)
