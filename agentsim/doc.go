// Package agentsim simulates agent sessions on a taskrt runtime, driven by scripted
// models instead of real ones. It is how a user sees the runtime work (the agentsim
// command plays a demo) and how end-to-end tests drive it.
//
// The pieces:
//
//   - Session: an agent's transcript (user, assistant, tool call, tool result and
//     notice entries). Its Inject method is the messages.Injector the runtime calls
//     to deliver completion notices; it is safe for concurrent use.
//   - Model: what decides an agent's next step — a tool call (or several, run
//     concurrently) or a final answer with a stop reason. Scripted is a Model driven
//     by data (see Script).
//   - Agent: the agent loop. Each Turn appends the user's prompt, asks the model for
//     steps, executes tool calls through package tools as the agent, appends the
//     results, lets the model see notices injected meanwhile on its next step, and
//     stops on a final answer or on cancellation.
//   - Sim: one runtime with the task tools, the bash and subagent tools and their
//     producers, the registered scripted models, and the sessions of its agents. Sim
//     is also the sub-agent Launcher: a background sub-agent is a child Agent with
//     its own id ("a1/sub-1"), session and scripted model.
//   - Launcher: the sub-agent run adapter behind Sim's, exported so that other
//     harnesses (the stress and soak commands) launch children the same way: a
//     RegisterFunc registers a child and says what its run does; the Launcher owns
//     the run goroutines, cancellation and disposal.
//   - Scenario (Play) and script (RunScript): the two data formats, a whole
//     simulated session as one JSON document, and a JSON-lines stream of tool calls
//     with one JSON result per line. README.md documents both.
//
// An agent's own actor is the owner of its tasks: every tool call is made with the
// agent's id as the caller, so the owner fence and owner cleanup apply exactly as in
// a real harness.
//
// When not to use it: agentsim is not an agent framework. Its models are scripts, its
// loop has no token accounting or context management, and it exists to exercise the
// runtime, not to host real models.
package agentsim
