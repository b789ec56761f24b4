package tools

import (
	"context"
	"encoding/json"

	"github.com/taskrt/taskrt/messages"
)

// Tool is one model-facing tool: a name, a description, an input JSON Schema, and a
// call. Any agent framework can adapt it: hand Name, Description and Schema to the
// model, and route the model's call (the caller's agent id and the raw JSON
// arguments) to Call.
type Tool interface {
	// Name is the tool's name as the model sees it ("task_output").
	Name() string
	// Description is the tool's model-facing description.
	Description() string
	// Schema is the input JSON Schema as a plain JSON object.
	Schema() map[string]any
	// Call executes the tool for caller with the model's raw JSON arguments. It never
	// panics; bad arguments and failures are Results with IsError set and a one-line
	// reason in Text.
	Call(ctx context.Context, caller messages.AgentID, args json.RawMessage) Result
}

// Result is what a tool call returns to the model.
type Result struct {
	// Text is the readable result (or the one-line error reason).
	Text string `json:"text"`
	// Data is optional structured output, such as a background Handle.
	Data any `json:"data,omitempty"`
	// IsError marks a tool error.
	IsError bool `json:"is_error"`
}

// Handle is the typed result of a call that started a background task. Programs
// read TaskID from it instead of parsing Text.
type Handle struct {
	Kind   string          `json:"kind"` // always "background"
	TaskID messages.TaskID `json:"task_id"`
}
