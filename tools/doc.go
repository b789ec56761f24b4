// Package tools is taskrt's model-facing surface: the task control tools
// (task_output, task_list, task_kill), the producer tools with run_in_background
// (bash, subagent), the completion-notice path into the owning agent's session, and
// the system-prompt section that teaches the background-task habit.
//
// Every string a model sees is part of a contract with the prompts written against
// it; golden tests pin them.
//
// # Wiring
//
// Options are checked when a tool is made: NewBash fails on a working directory
// that does not exist or an environment entry that is not KEY=VALUE, rather than
// every call failing later.
//
// An embedder creates an actors.Runtime, then NewTaskTools(rt): that attaches the
// runtime's control surface (without one, every background start fails with
// "background tasks unavailable: no control surface is attached (load the task
// tools)") and adds the notice injector as an OnDone listener. Producer tools such
// as NewBash start their background work on the same runtime, owned by the calling
// agent. Hand each Tool's Name, Description and Schema to the model, route its calls
// to Call (a Set dispatches by name), and put PromptSection into the system prompt.
// Close the task tools before the runtime.
//
// # The tools
//
//	task_output(task_id, wait?, timeout_ms?)  new output (stream kinds) or the final
//	                                          output (final kinds, once terminal), then
//	                                          "[status: <status>]" or
//	                                          "[status: <status>, <detail>]"
//	task_list()                               "<id> [<kind>] <status> — <label>" per
//	                                          line, or "(no background tasks)"
//	task_kill(task_id, reason?)               "requested cancellation of task <id>", or
//	                                          the terminal status line
//	bash(command, timeout_ms?, run_in_background?)
//	                                          foreground: the output, then the status
//	                                          line; timeout_ms defaults to 120 s, at
//	                                          most 600 s. Background: the task id at
//	                                          once; timeout_ms, when given, kills the
//	                                          task once it passes ("timed out after N
//	                                          ms" in its status)
//
// A task_output wait defaults to 30 s and is capped at 600 s (WithWaitTimeout,
// WithMaxWait); a larger timeout_ms is clamped and the response says so on the line
// before the status line; a wait that times out is a success reporting
// "[status: running]". An unknown id and another agent's task are both
// "task not found: <id>", in every tool.
//
// # Notices
//
// When an owned task settles and the model has not already seen its end (it killed
// the task, or a read or wait returned the terminal state, including a wait pending at
// settlement), the owner's session receives exactly one
//
//	background task <id> (<kind>: <label>) finished [status: …]. Read its output with task_output.
//
// through Agents.Inject, which drops it for an agent that is being or has been
// disposed. TaskTools.Notices counts what was delivered and suppressed.
//
// # Waking an idle loop
//
// An agent loop of its own (on a provider SDK: see the adapters under
// tools/adapters) registers its agent with actors.WithInjector(inbox.Inject), where
// inbox is an Inbox: notices queue there, Ready signals that one is waiting, and the
// loop either puts them into the request it makes anyway (Drain) or, idle, wakes
// for an automatic turn (Wake) — at most WithMaxAutoTurns turns in a row without
// user input, so a storm of notices cannot spin it.
//
// # Interrupts
//
// A call whose context ends while it runs (a user's interrupt, a cancelled MCP
// request, a deadline) answers in the tools' own words, never with a Go error
// string: a wait says "(wait interrupted before the task finished)" and gives the
// task's current status line (its terminal status line if it ended), consuming
// nothing; a foreground command says "(the call was interrupted; the command and
// its process group were killed)" before its status line; task_input, whose write
// an interrupt ends only after a grace of a second (a write the task may have read
// is never reported as perhaps not sent), says "(input sent; the wait for the task's
// reply was interrupted)"; any other call, and a write still blocked after the
// grace, is a tool error naming the interruption ("the call was interrupted", "the
// call's deadline passed").
//
// # Arguments
//
// Input schemas are generated from the argument structs (outputArgs, listArgs,
// killArgs, bashArgs) with github.com/google/jsonschema-go and forbid additional
// properties. Calls are decoded strictly against the same structs: invalid JSON,
// non-objects, unknown fields, nulls, wrong types, missing required fields, empty
// ids or commands and non-positive timeouts are tool errors with a one-line reason,
// and nothing is started.
//
// # When not to use it
//
// Embedders with their own model-facing surface (a UI, a different tool protocol)
// can drive actors.Tasks directly; they must then attach their own surface
// (Tasks.AttachSurface) and deliver their own notices. Use one TaskTools per
// runtime: two would inject every notice twice.
package tools
