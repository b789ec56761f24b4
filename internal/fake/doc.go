// Package fake is a producer whose work is driven by its caller: it streams what the
// caller emits, settles with the outcome the caller gives (or, when cancelled, as
// killed by SIGTERM), and can be told to fail, panic or hold its Cancel. It starts no
// process and no goroutine.
//
// It exists for this module's tests — of the runtime, the tools, the MCP server and
// the adapters: every rule of the producer contract (messages.Hooks) can be
// exercised with it deterministically. An embedder's own tests drive real work
// instead (a bash command, an agentsim sub-agent).
package fake
