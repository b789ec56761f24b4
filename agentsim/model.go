package agentsim

import (
	"context"
	"encoding/json"

	"github.com/taskrt/taskrt/producers/subagent"
)

// Model decides an agent's next step from its session. Register one with a Sim by
// name (WithModel); scripted models, which are data, come from ParseModels.
type Model interface {
	// Next returns the next step. The session holds everything so far: the prompt,
	// earlier steps, tool results, and notices injected since the previous step.
	// Next may block (a real model's latency, a script waiting for a notice) but
	// must return promptly with ctx's error once ctx is done. Any other error ends
	// the turn with stop reason "error" and the error as detail.
	Next(ctx context.Context, s *Session) (Step, error)
}

// Step is one model step: tool calls, or a final answer.
type Step struct {
	// Calls are the tool calls of this step, executed concurrently; their results
	// are appended in this order. Empty means Text is the final answer.
	Calls []ToolCall
	// Text is the final answer, or commentary that comes with the calls.
	Text string
	// Stop is the final answer's stop reason; "" means completed. Ignored with
	// calls.
	Stop subagent.StopReason
}

// ToolCall is one tool call: the tool's name and its raw JSON arguments.
type ToolCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// modelFunc adapts a function to Model.
type modelFunc func(ctx context.Context, s *Session) (Step, error)

func (f modelFunc) Next(ctx context.Context, s *Session) (Step, error) { return f(ctx, s) }
