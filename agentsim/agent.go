package agentsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// defaultMaxSteps bounds the model steps of one turn.
const defaultMaxSteps = 64

// caller executes a tool call for an agent: tools.Set satisfies it, and so does Sim.
type caller interface {
	Call(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) tools.Result
}

// Agent is the agent loop of one agent session; Sim.Agent makes one. Registering and
// disposing the agent with the runtime is the Sim's business (Sim.Register,
// Sim.Dispose); Agent only runs turns, always calling tools as its agent, so the
// agent owns the tasks it starts.
type Agent struct {
	id       messages.AgentID
	session  *Session
	model    Model
	tools    caller
	maxSteps int // per turn; <= 0 means defaultMaxSteps
	// progress, when set, receives one line per step of the turn — the model's
	// commentary ("says: …"), each tool call ("→ bash {…}") and result ("← bash …") —
	// for a sub-agent's parent to see where it is (subagent.Request.Progress).
	progress io.Writer
}

// Turn runs one turn: it appends prompt as a user entry, then asks the model for
// steps until it gives a final answer, executing each step's tool calls (concurrently
// when there are several) and appending their results in order. Notices injected
// meanwhile are in the session for the model's next step.
//
// The turn ends with the model's final answer and stop reason; with StopError when
// the model fails or the step limit (64 steps) is reached; or with StopAborted
// (detail: the context's cause) when ctx ends, with the latest commentary as partial
// output. The final assistant entry records how it ended. Turn does not touch the
// agent's tasks: background work goes on after the turn, until the agent is
// disposed.
func (a *Agent) Turn(ctx context.Context, prompt string) subagent.Result {
	a.session.append(Entry{Kind: entryUser, Text: prompt})
	limit := a.maxSteps
	if limit <= 0 {
		limit = defaultMaxSteps
	}
	var partial string
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			return a.end(subagent.Result{Stop: subagent.StopAborted, Output: partial, Detail: cause(ctx)})
		}
		if step == limit {
			return a.end(subagent.Result{Stop: subagent.StopError, Output: partial,
				Detail: fmt.Sprintf("step limit reached (%d steps)", limit)})
		}
		st, err := a.nextStep(ctx)
		switch {
		case ctx.Err() != nil:
			return a.end(subagent.Result{Stop: subagent.StopAborted, Output: partial, Detail: cause(ctx)})
		case err != nil:
			return a.end(subagent.Result{Stop: subagent.StopError, Output: partial, Detail: err.Error()})
		case len(st.Calls) == 0:
			stop := st.Stop
			if stop == "" {
				stop = subagent.StopCompleted
			}
			return a.end(subagent.Result{Stop: stop, Output: st.Text})
		}
		if st.Text != "" {
			a.session.append(Entry{Kind: entryAssistant, Text: st.Text})
			a.report("says: " + st.Text)
			partial = st.Text
		}
		for _, c := range st.Calls {
			a.session.append(Entry{Kind: entryToolCall, Tool: c.Tool, Args: c.Args})
			a.report("→ " + c.Tool + " " + string(c.Args))
		}
		for i, r := range a.execute(ctx, st.Calls) {
			a.session.append(Entry{Kind: entryToolResult, Tool: st.Calls[i].Tool, Text: r.Text, Data: r.Data, IsError: r.IsError})
			a.report("← " + st.Calls[i].Tool + " " + r.Text)
		}
	}
}

// report writes one progress line (on one line, cut as tools.Label cuts it).
func (a *Agent) report(line string) {
	if a.progress != nil {
		_, _ = io.WriteString(a.progress, tools.Label(line)+"\n")
	}
}

// nextStep asks the model, turning a panic into an error.
func (a *Agent) nextStep(ctx context.Context) (Step, error) {
	return contain.Value("model", func() (Step, error) { return a.model.Next(ctx, a.session) })
}

// execute runs the calls concurrently and returns their results in call order.
func (a *Agent) execute(ctx context.Context, calls []ToolCall) []tools.Result {
	out := make([]tools.Result, len(calls))
	if len(calls) == 1 {
		out[0] = a.tools.Call(ctx, a.id, calls[0].Tool, calls[0].Args)
		return out
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { out[i] = a.tools.Call(ctx, a.id, c.Tool, c.Args) })
	}
	wg.Wait()
	return out
}

// end appends the final assistant entry and returns r.
func (a *Agent) end(r subagent.Result) subagent.Result {
	a.session.append(Entry{Kind: entryAssistant, Text: r.Output, Final: true, Stop: r.Stop, Detail: r.Detail})
	return r
}

func cause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return ""
}
