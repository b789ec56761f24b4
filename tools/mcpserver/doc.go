// Package mcpserver serves taskrt's background-task tools over the Model Context
// Protocol, so that any MCP client — a desktop assistant, an IDE agent, an agent
// written with the Python or TypeScript SDKs — gets background shell commands with
// taskrt's guarantees. The command tools/cmd/taskrt-mcp runs it.
//
// # Tools
//
// The tools are package tools' own, unchanged: bash (foreground, or with
// run_in_background: true a background task) and every tool of tools.TaskTools
// (task_output, task_list, task_kill, task_wait, task_input, task_watch), with the same names,
// descriptions, input schemas and result strings.
// A result that carries a tools.Handle (a background start) returns it as
// structuredContent beside the text, with the text and the notices appended to the
// result in it too:
//
//	{"kind":"background","task_id":"bash-2",
//	 "message":"started background task bash-2 (bash: make test). You will be notified when it finishes; read its output with task_output.",
//	 "notices":["background task bash-1 (bash: echo quick) finished [status: completed, exit code: 0]. Read its output with task_output."]}
//
// Programs read kind and task_id; message and notices are for the model, because
// some clients (Claude Code and Codex among them) show the model structuredContent
// instead of content whenever a result has it. "notices" is absent when there are
// none. No tool declares an outputSchema: it would oblige every result of the tool
// to carry structuredContent, which those clients would then show in place of the
// text of plain results too.
// Bad arguments and failures are tool errors (isError: true) with the tool's
// one-line reason; an unknown tool name is a JSON-RPC invalid-params error, as the
// MCP specification asks.
//
// # Owners
//
// Every task belongs to an owner agent of the Server's runtime, and owners never
// see each other's tasks: another owner's task id reads exactly like an unknown
// one. Who the owner of a call is:
//
//   - on a connection served by Serve or Connect (stdio: one client per process),
//     the connection itself ("mcp-1", "mcp-2", …), registered when it is made:
//     every call that names no scope acts as it, whatever revision the client
//     speaks, so a model carries no handle;
//   - over streamable HTTP, the session (revisions up to 2025-11-25), registered
//     at initialize;
//   - a sessionless (2026-07-28) request over HTTP, where nothing else tells two
//     clients apart, names a scope ("scope-1", …): a handle a background start
//     mints and returns (in its text and as structuredContent.scope), passed as
//     the argument scope, with an idle lease (WithSessionTimeout); scope_close
//     ends it at once. See sessionless.go.
//
// When an owner ends — stdio EOF, an HTTP DELETE, the idle timeout, a lapsed or
// closed scope, Close — its agent is disposed: every task killed and awaited
// until its processes are gone; a call still running is cancelled first, so a
// foreground command dies with its owner too, and with its HTTP request when the
// client disconnects mid-call. A newer revision than 2026-07-28 is refused with
// -32022, whose data lists the revisions served, so that a client falls back.
//
// # Protocol tasks
//
// A client that can track MCP tasks gets taskrt tasks as MCP tasks (tasks.go):
//
//   - 2025-11-25 sessions over stdio or streamable HTTP are offered MCP's own
//     tasks (SEP-1686): capabilities.tasks, execution.taskSupport "optional" on
//     bash, and tasks/get, tasks/result, tasks/cancel and tasks/list; a
//     task-augmented bash call becomes a taskrt task of the session's owner
//     (bash-N) — its work the foreground call, or with run_in_background the
//     background task.
//   - a sessionless client that declares the tasks extension
//     (io.modelcontextprotocol/tasks, SEP-2663) gets every background start
//     answered as a task at once, and a foreground bash still running after
//     WithTaskAfter moved to the background and answered as one. A harness that
//     tracks such tasks (Claude Code) offers its own stop (tasks/cancel kills),
//     and wakes an idle session with the result when one ends; taskrt's own
//     notice for that task is never sent, and the result is what task_output
//     returns then, so nothing reaches the model twice.
//
// The protocol id is the runtime id itself on a connection ("bash-3": the model
// names it to every task tool), and "bash-3.<secret>" over HTTP (130 random
// bits; a scope's handle), which the task tools take as well.
//
// # Notices
//
// An MCP client does not add text to its model's context on its own, so a
// completion notice is delivered on two paths. It is appended to the owner's next
// tool result, whichever tool that is, exactly once, in every part of the result a
// client may show the model: as an extra text content item, and, on a result with
// structuredContent, in its "notices" too — unless the model saw the task's end in
// the meantime (it read or waited on its terminal state, or killed it), in which
// case it is dropped. A result the client cancelled (notifications/cancelled)
// carries none: the client drops it, so the notices wait for the next result. And it is sent at
// once as a notifications/message log message (logger "taskrt", level info), a
// courtesy for clients that set a log level and show logs. Notices still pending
// when an owner ends end with it. The server's instructions (tools.PromptSection,
// and a paragraph on this) tell the model to call task_list before it ends its
// turn while tasks run: a harness without protocol tasks cannot be woken.
//
// # Progress
//
// A foreground bash call made with a progress token gets a notifications/progress
// message per second of running (progressInterval), progress counting the seconds,
// with the command's latest output line as its message.
//
// # The live page
//
// PageHandler serves an operator's page (taskrt-mcp -http ADDR -ui mounts it at
// "/"; package livepage holds it, over the runtime and the owners the Server
// lists): every owner with its tasks, their status and age, and a live
// tail of a selected task's output, fed over Server-Sent Events by the runtime's
// event stream (Runtime.Subscribe) and observer reads (Tasks.Peek). It sees every
// session — that is the embedder's decision, not a model's — but it is read-only:
// no route acts on a task, and nothing it reads consumes a model's output, so a
// model's next task_output returns everything since its own last read. The HTML,
// CSS and JavaScript are embedded; there is no build step. Mount it behind
// RequireBrowserToken off loopback: it takes the same token as RequireToken, also
// as an HTTP Basic password, which a browser can prompt for.
//
// # When not to use it
//
// An agent harness written in Go with its own loop does not need MCP: use package
// tools directly, with an injector that puts notices into the model's context.
package mcpserver
