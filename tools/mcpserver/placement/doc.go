// Package placement gives each sessionless MCP scope (the 2026-07-28 revision's
// owner handle, see package mcpserver) one home frontend at a time, so that
// several taskrt-mcp frontends behind a load balancer serve any live scope: a
// request that reaches a frontend other than its scope's home is forwarded there
// over NATS request/reply and the home's answer is returned unchanged. The
// scope's state — its owner agent, fence, ids, caps, queue and notices — stays in
// its home's memory, kept by the same code as on one server.
//
// mcpserver.WithPlacement wires a Placement into a Server (taskrt-mcp -nats does
// so); an embedder with another request surface can use it alone: Register what
// it mints, Locate what a request names, Forward to the home, Serve what is
// forwarded to it.
//
// # Store and subjects
//
// With P the prefix (WithPrefix, default "taskrt"), everything lives in the
// JetStream KV bucket P_scopes (in memory, History 1, WithReplicas on a cluster):
//
//	key                value                                   written by
//	frontend.<id>      {frontend, epoch, duration_ms}           the frontend: Create, then Update on its last revision
//	scope.<handle>     {home, epoch, principal, lost?}          the home at mint (Create); a survivor that takes it (Update on the revision read)
//
// A frontend's lease is held and observed exactly as producers/remote's owner
// and worker leases (whose approach this package reimplements, since that code is
// unexported): its epoch is the revision of the Create that acquired it; it is
// renewed every quarter lease; a holder that could not renew for half a lease
// fences itself and acquires a new lease, with a new epoch; an observer that saw
// no renewal for a lease and a quarter ends it with a conditional Delete. Every
// decision is a compare-and-set.
//
// A scope's home is held by its record: the home's id and the epoch of the home's
// lease when it registered the scope. The home is live while that lease is —
// one renewal per frontend, not per scope, however many scopes it homes. The
// record's own revision is the scope's epoch: it changes whenever the home does.
// principal is a SHA-256 of the principal the scope is bound to, so that a scope
// of another principal reads, everywhere, as unknown.
//
// Requests go to P.scope.<id> (answered by frontend id), cancellations to
// P.scope.<id>.cancel. A forwarded request carries the caller's headers and body,
// and Taskrt-Forward-Id, Taskrt-Forward-From and Taskrt-Forward-Timeout: the
// time the caller had left, in milliseconds (a duration, since clocks need not
// agree), or WithMaxForward when it had no deadline. The home serves it under a
// context with that deadline plus 250 ms (so that the caller's deadline always
// passes first and the caller gets the deadline error, never what a call cut
// short by the home answered); when the caller gives up — its deadline, or it
// went away — the forwarder publishes the id on the cancel subject and the
// home's context ends at once. The
// answer carries Taskrt-Forward-Status and the home's headers and body, or
// Taskrt-Forward-Error when it could not be sent (larger than the NATS payload
// limit).
//
// # What Locate answers
//
//   - Unknown: no record, or one bound to another principal;
//   - Here or Elsewhere: the record's home holds the lease it names;
//   - Lost: the home's lease ended (the frontend died, hung or was cut off). The
//     first survivor to read the record takes it — an Update on the revision it
//     read, marking it lost — so of concurrent takers exactly one wins and every
//     later reader sees the lost record. A lost scope's state died with its home
//     (and its remote tasks with the home's owner lease): it is never homed anew,
//     and its record is deleted after WithLostRetention.
//
// # What does not hold yet
//
// A home's death loses its scopes: the records, tasks and undelivered notices
// live in its memory only. Rebuilding a scope on a survivor, tasks that outlive
// their frontend, notices delivered once across frontends, and cluster-wide
// lapses are issue 41's later steps (docs/scopes-cluster.md).
package placement
