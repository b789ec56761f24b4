// Package agentsim simulates agent sessions on a taskrt runtime, driven by scripted
// models instead of real ones. It is how a user sees the runtime work (the agentsim
// command plays a demo) and how end-to-end tests drive it.
//
// The pieces:
//
//   - Sim: one runtime with the task tools, the bash and subagent tools and their
//     producers, the registered models, and the sessions of its agents. New builds
//     it from Options; Register and Dispose manage its agents, Call makes a tool
//     call as one of them, and Close disposes whatever is left and returns
//     ErrNotQuiescent when anything outlived its owner. A background sub-agent is a
//     child agent with its own id ("a1/sub-1"), session and model instance.
//   - Session: an agent's transcript of Entries (user, assistant, tool call, tool
//     result and notice). The Sim makes it the agent's notice injector, so the
//     runtime's completion notices land in it; it is safe for concurrent use.
//   - Model: what decides an agent's next Step — a tool call (or several, run
//     concurrently) or a final answer with a stop reason. Scripted models are data
//     (ParseModels); a Go Model is registered with WithModel.
//   - Agent: the agent loop (Sim.Agent). Each Turn appends the user's prompt, asks
//     the model for steps, executes tool calls as the agent, appends the results,
//     lets the model see notices injected meanwhile on its next step, and stops on
//     a final answer or on cancellation.
//   - Scenario (ParseScenario, Play) and script (RunScript): the two data formats, a
//     whole simulated session as one JSON document with its expected outcome, and a
//     JSON-lines stream of tool calls with one JSON result per line. README.md
//     documents both; the agentsim command plays them.
//   - Launcher: the sub-agent run adapter behind the Sim's sub-agents, for other
//     harnesses (the stress and soak commands) to launch children the same way: a
//     register function registers a child and says what its run does (a Child);
//     the Launcher owns the run goroutines, cancellation and disposal.
//
// An agent's own actor is the owner of its tasks: every tool call is made with the
// agent's id as the caller, so the owner fence and owner cleanup apply exactly as in
// a real harness.
//
// When not to use it: agentsim is not an agent framework. Its models are scripts, its
// loop has no token accounting or context management, and it exists to exercise the
// runtime, not to host real models.
package agentsim
