// Package mcpserver serves taskrt's background-task tools over the Model Context
// Protocol, so that any MCP client — a desktop assistant, an IDE agent, an agent
// written with the Python or TypeScript SDKs — gets background shell commands with
// taskrt's guarantees. The command tools/cmd/taskrt-mcp runs it.
//
// # Tools
//
// The tools are package tools' own, unchanged: bash (foreground, or with
// run_in_background: true a background task) and every tool of tools.TaskTools
// (task_output, task_list, task_kill, task_wait), with the same names,
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
// MCP specification asks. The server's instructions are tools.PromptSection.
//
// # One owner per session
//
// Each MCP session is an owner agent ("mcp-1", "mcp-2", …) of the Server's
// runtime, registered when the client initializes and disposed when the session
// ends: stdio EOF, an HTTP DELETE, the HTTP idle timeout, or Close. Disposal kills
// every task of the session and waits until its processes are gone; a call still
// running is cancelled first, so a foreground command dies with its session too, and
// with its HTTP request when the client disconnects mid-call. Sessions never see
// each other's tasks: another session's task id reads exactly like an unknown one.
//
// # The sessionless revision
//
// Requests of the sessionless revision 2026-07-28 (they name it in their own
// _meta) are served beside sessions, in their own era: their owner is a scope, a
// server-minted handle a background start returns (in its text and as
// structuredContent.scope) and every task tool takes as the argument scope. A
// scope has an idle lease (WithSessionTimeout); when it lapses, or the tool
// scope_close ends it, its owner is disposed as a session's is. A request never
// reaches the other era's owners. See sessionless.go. A newer revision is refused
// with -32022, whose data lists the revisions served, so that a client falls back.
//
// # Protocol-level tasks
//
// A session at 2025-11-25 over stdio or streamable HTTP is also offered MCP's own
// tasks (SEP-1686): capabilities.tasks, execution.taskSupport "optional" on bash,
// and tasks/get, tasks/result, tasks/cancel and tasks/list. A task-augmented bash
// call becomes a taskrt task of the session's owner (bash-N) whose work is the
// foreground call itself; its MCP task id is random and maps to the runtime's id
// (given in _meta["taskrt/task_id"]). See tasks.go for the rules, and
// docs/mcp-revisions.md.
//
// # Notices
//
// An MCP client does not add text to its model's context on its own, so a
// completion notice is delivered on two paths. It is appended to the session's next
// tool result, whichever tool that is, exactly once, in every part of the result a
// client may show the model: as an extra text content item, and, on a result with
// structuredContent, in its "notices" too — unless the model saw the task's end in
// the meantime (it read or waited on its terminal state, or killed it), in which
// case it is dropped. A result the client cancelled (notifications/cancelled)
// carries none: the client drops it, so the notices wait for the next result. And it is sent at
// once as a notifications/message log message (logger "taskrt", level info), a
// courtesy for clients that set a log level and show logs. Notices still pending
// when a session ends end with it.
//
// # Progress
//
// A foreground bash call made with a progress token gets a notifications/progress
// message per second of running (ProgressInterval), progress counting the seconds,
// with the command's latest output line as its message.
//
// # The live page
//
// PageHandler serves an operator's page (taskrt-mcp -http ADDR -ui mounts it at
// "/"): every session's owner with its tasks, their status and age, and a live
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
