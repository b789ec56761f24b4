package tools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
)

// SubagentName is the subagent tool's name.
const SubagentName = "subagent"

// subagentArgs are the arguments of the subagent tool when run_in_background is
// offered.
type subagentArgs struct {
	Description     string `json:"description" jsonschema:"A short (3-7 word) description of the delegated work; it labels the task in task_list and in notices."`
	Prompt          string `json:"prompt" jsonschema:"The sub-agent's instructions: everything it needs to know, and what it should report back."`
	Model           string `json:"model,omitempty" jsonschema:"Which sub-agent model to run, by name. Omit it for the default."`
	RunInBackground bool   `json:"run_in_background,omitempty" jsonschema:"Run the sub-agent in the background: the call returns a task id at once, you are notified when it finishes, and you collect its answer with task_output. Default false: wait for the answer."`
}

// subagentFgArgs are the arguments when run_in_background is not offered: the same
// fields minus that one, so a call that sends it is rejected as an unknown field.
type subagentFgArgs struct {
	Description string `json:"description" jsonschema:"A short (3-7 word) description of the delegated work."`
	Prompt      string `json:"prompt" jsonschema:"The sub-agent's instructions: everything it needs to know, and what it should report back."`
	Model       string `json:"model,omitempty" jsonschema:"Which sub-agent model to run, by name. Omit it for the default."`
}

var (
	subagentSpec   = newArgSpec[subagentArgs](minLength("description", 1), minLength("prompt", 1))
	subagentFgSpec = newArgSpec[subagentFgArgs](minLength("description", 1), minLength("prompt", 1))
)

const subagentDescription = "Delegate a self-contained piece of work to a sub-agent: a separate agent with its own session and tools, " +
	"which works on the prompt and returns one final answer. Give it everything it needs in the prompt; it does not see your conversation."

const subagentBackgroundDescription = " With run_in_background: true the call returns a task id at once and the sub-agent keeps working while you do; " +
	"you are notified when it finishes, and task_output returns its answer (with wait: true when you are blocked on it). " +
	"Collect its answer before you give your own final answer if it matters to it; task_kill it if it stopped mattering."

// SubagentOption configures the subagent tool. Options are made by the With…
// functions below.
type SubagentOption interface{ apply(*subagentConfig) }

type subagentConfig struct {
	background bool
}

type subagentOptionFunc func(*subagentConfig)

func (f subagentOptionFunc) apply(c *subagentConfig) { f(c) }

// WithSubagentRunInBackground sets EnableRunInBackground for this tool instance (default
// true). When false, run_in_background is absent from the schema and a call that
// sends it is rejected as an unknown field: schema and capability never disagree.
func WithSubagentRunInBackground(enabled bool) SubagentOption {
	return subagentOptionFunc(func(c *subagentConfig) { c.background = enabled })
}

// SubagentTool is the subagent tool: it runs a sub-agent through a subagent.Producer, in
// the foreground (the call returns the child's final answer) or, with
// run_in_background, as a background task of the caller (the call returns the typed
// Handle at once).
type SubagentTool struct {
	rt       *actors.Runtime
	producer *subagent.Producer
	cfg      subagentConfig
}

// NewSubagent returns the subagent tool. Background calls start tasks on rt, so rt
// needs a control surface attached (NewTaskTools) for them to succeed.
func NewSubagent(rt *actors.Runtime, p *subagent.Producer, opts ...SubagentOption) *SubagentTool {
	cfg := subagentConfig{background: true}
	for _, o := range opts {
		o.apply(&cfg)
	}
	return &SubagentTool{rt: rt, producer: p, cfg: cfg}
}

// Name implements Tool.
func (t *SubagentTool) Name() string { return SubagentName }

// Description implements Tool.
func (t *SubagentTool) Description() string {
	if t.cfg.background {
		return subagentDescription + subagentBackgroundDescription
	}
	return subagentDescription
}

// Schema implements Tool.
func (t *SubagentTool) Schema() map[string]any {
	if t.cfg.background {
		return subagentSpec.schema()
	}
	return subagentFgSpec.schema()
}

// Call implements Tool. In the foreground it returns the child's final answer, or,
// when the child did not complete, a tool error holding its partial answer and
// status line ("[status: failed, max-tokens]"). In the background it returns
// Handle{Kind: "background", TaskID: "subagent-N"} as Data plus readable text; a
// start that fails (no control surface, the owner's cap, an unknown model, a caller
// whose context is already done) is a tool error and creates no task.
func (t *SubagentTool) Call(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	return contained(SubagentName, func() Result { return t.call(ctx, caller, raw) })
}

func (t *SubagentTool) call(ctx context.Context, caller messages.AgentID, raw json.RawMessage) Result {
	var a subagentArgs
	if t.cfg.background {
		if _, err := subagentSpec.decode(raw, &a); err != nil {
			return errResult(err)
		}
	} else {
		var fg subagentFgArgs
		if _, err := subagentFgSpec.decode(raw, &fg); err != nil {
			return errResult(err)
		}
		a = subagentArgs{Description: fg.Description, Prompt: fg.Prompt, Model: fg.Model}
	}
	switch {
	case strings.TrimSpace(a.Description) == "":
		return errResult(argErr("description must not be empty"))
	case strings.TrimSpace(a.Prompt) == "":
		return errResult(argErr("prompt must not be empty"))
	}
	brief := subagent.Brief{Description: a.Description, Prompt: a.Prompt, Model: a.Model}
	if a.RunInBackground {
		id, err := t.rt.Tasks().Start(ctx, t.producer.Spec(caller, brief))
		if err != nil {
			return startErrResult(err)
		}
		return startedResult(ctx, t.rt, caller, id, subagent.Kind, a.Description)
	}
	o, err := t.producer.Run(ctx, caller, brief)
	if err != nil {
		return errResult(err)
	}
	if o.Status == messages.Completed {
		return Result{Text: o.Output}
	}
	return Result{Text: joinLines(o.Output, statusLine(o.Status, inOwnWords(o.Detail))), IsError: true}
}
