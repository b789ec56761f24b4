// Command taskrt-mcp serves taskrt's background-task tools (bash with
// run_in_background, task_output, task_list, task_kill, task_wait) to any MCP client, one
// owner per MCP session: a session's tasks are its own, and when a session ends,
// every process it started is gone.
//
// Install it with
//
//	go install github.com/taskrt/taskrt/tools/cmd/taskrt-mcp@latest
//
// By default it serves one session over stdin and stdout, as an MCP client that
// launches it expects. With -http ADDR it serves the streamable HTTP transport at
// http://ADDR/mcp (ADDR ":8080" binds 127.0.0.1:8080); a bearer token (-token or
// TASKRT_MCP_TOKEN) is required when ADDR is not a loopback address. With -ui it
// also serves a live, read-only page of every session and its tasks at
// http://ADDR/, behind the same token (which a browser can give as a Basic
// password).
//
// With -nats URL every bash command runs on a taskrt-worker (docs/remote.md);
// with -http as well, the process is one frontend of several behind a load
// balancer: any of them serves any sessionless scope, forwarding a request to the
// scope's home, and when a home dies, is paused or cut off, or shuts down, another
// frontend takes its scopes, whose commands run on (docs/scopes-cluster.md). Its
// frontend id is its owner node's, new at every start, printed on stderr.
//
// SIGINT or SIGTERM ends every session, kills every task, waits until their
// processes are gone and exits 0 — but a frontend's sessionless scopes, whose
// commands run on for the frontend that takes them; a second signal exits at once
// with status 1.
// Run taskrt-mcp -h for the flags.
package main
