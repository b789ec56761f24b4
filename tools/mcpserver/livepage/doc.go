// Package livepage is the live page: an operator's read-only view of every owner
// of a taskrt runtime, its tasks and a live tail of one task's output, in a
// browser. It is plain HTML, CSS and JavaScript embedded in the binary (static/,
// no build step), fed over Server-Sent Events by the runtime's event stream
// (Runtime.Subscribe), snapshots (Tasks.List, Tasks.Get, Tasks.Watches) and
// observer reads (Tasks.Peek).
//
// It exists apart from package mcpserver, which mounts it (Server.PageHandler,
// taskrt-mcp -ui), because it needs nothing of MCP: only the runtime, and from its
// embedder (Source) what only the embedder knows — which owners there are, in the
// order they began, and when it shuts down.
//
// # Read-only, and never consuming
//
// Every route answers GET only; nothing on the page can start, kill or write to
// a task. Everything it reads, it reads without consuming: events and snapshots
// change nothing, and observer reads never move the cursor a model's task_output
// reads with, nor mark a task's end as reported. It is the embedder's view, not
// a model's: it sees every owner's tasks, reading each as its owner.
//
// # The wire protocol
//
// Routes, relative to where the Handler is mounted:
//
//   - GET Path: the page (index.html; page.js and page.css beside it);
//   - GET EventsPath: a "snapshot" event ({"now","agents","tasks"}), then one
//     "event" event per runtime event ({"kind","time","agent","parent","task",
//     "bytes","missed"}), in the runtime's order. A connection that falls behind
//     (WithEventBuffer) gets an "event" of kind "overflow" saying how many events
//     it missed, followed by a fresh "snapshot";
//   - GET TailPath?task=ID&offset=N: "output" events ({"offset","next","missed",
//     "data"}, data base64, the event id the next offset; a reconnecting
//     EventSource's Last-Event-ID wins over offset), then one "end" event
//     ({"reason","status","detail","next"}); the stream closes after it.
//
// Idle streams carry a comment every 15 s, so that a browser (or a proxy) that
// went away is noticed; a browser that stops reading for 30 s is dropped (it
// reconnects and resynchronises).
//
// # When not to use it
//
// It is no API: a program that follows tasks subscribes to the runtime itself
// (Runtime.Subscribe) and reads with Tasks.Peek. Off loopback it needs a guard in
// front (mcpserver.RequireBrowserToken): it refuses only DNS rebinding on its own.
package livepage
