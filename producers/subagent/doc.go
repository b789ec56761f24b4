// Package subagent is the taskrt producer that runs background sub-agents: a child
// agent, with its own agent id and session, working on a prompt its parent gave it.
//
// The producer knows nothing about models, sessions or the actor runtime. It gets
// what it needs — register a child agent, run it, dispose it — through the one-method
// Launcher interface, which the embedder (package agentsim here, a real agent loop
// elsewhere) implements. It imports only package messages.
//
// # The task it produces
//
// A sub-agent task is a final-output-only kind ("subagent"): it has no ReadOutput, and
// its Outcome.Output is the child's final answer (or, when it was aborted, whatever
// partial answer the child had). Its label is the delegation's description.
//
//	Launch ──▶ running ──Run.Wait returns──▶ Run.Dispose returns ──▶ Done
//	              │
//	              └─Cancel(reason) ─▶ Run.Cancel(reason): the run ends as "aborted"
//
// Done delivers only after the run's result is in AND the child agent has been
// disposed, so every background task the child started is gone before the parent's
// task settles: quiescence composes through any depth of sub-agents. The child's
// stop reason maps to the task's status:
//
//	completed                          → completed
//	aborted                            → killed   (detail "aborted: <reason>")
//	error, max-tokens, refusal, other  → failed   (detail: the reason)
//
// # When not to use it
//
// It is not an agent loop and not a model client: it delegates the run to a
// Launcher. It does not stream the child's progress; the child's own session is the
// detailed trace.
package subagent
