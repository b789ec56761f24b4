package agentsim

import (
	"encoding/json"

	"github.com/taskrt/taskrt/producers/subagent"
)

// builtinModels returns the scripted models every Sim knows, so that scripts and
// scenarios can start sub-agents without defining models of their own. A scenario's
// model of the same name replaces a built-in one.
//
//	echo        answers with its prompt (the default sub-agent model)
//	bash        runs its prompt as a background bash command, waits for it, and
//	            answers with the command's output and status line
//	error       fails: stop reason error, detail "simulated model failure"
//	max-tokens  answers "(truncated)" with stop reason max-tokens
//	refusal     answers "I can't help with that." with stop reason refusal
//	hang        never answers; it ends only when its run is cancelled
func builtinModels() map[string]modelScript {
	answer := func(s string) *string { return &s }
	return map[string]modelScript{
		"echo": {Steps: []scriptStep{{Answer: answer("${prompt}")}}},
		"bash": {Steps: []scriptStep{
			{Call: &scriptCall{Tool: "bash", Save: "job",
				Args: json.RawMessage(`{"command":"${prompt}","run_in_background":true}`)}},
			{Call: &scriptCall{Tool: "task_output",
				Args: json.RawMessage(`{"task_id":"${job}","wait":true,"timeout_ms":600000}`)}},
			{Answer: answer("${result}")},
		}},
		"error":      {Steps: []scriptStep{{Fail: "simulated model failure"}}},
		"max-tokens": {Steps: []scriptStep{{Answer: answer("(truncated)"), Stop: subagent.StopMaxTokens}}},
		"refusal":    {Steps: []scriptStep{{Answer: answer("I can't help with that."), Stop: subagent.StopRefusal}}},
		"hang":       {Steps: []scriptStep{{Await: neverGate, Answer: answer("")}}},
	}
}
