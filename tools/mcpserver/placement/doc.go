// Package placement gives each sessionless MCP scope (the 2026-07-28 revision's
// owner handle, see package mcpserver) one home frontend at a time, and keeps in
// the store what another frontend needs to take the scope over when that home's
// lease ends: several taskrt-mcp frontends behind a load balancer then serve any
// scope, and a frontend's death, pause or shutdown loses none.
//
// mcpserver.WithPlacement wires a Placement into a Server (taskrt-mcp -nats does
// so); an embedder with another request surface can use it alone: Register what
// it mints, Save its tasks, Locate what a request names, Forward to the home,
// Serve what is forwarded to it, Take an orphaned scope (then adopt its commands
// with remote.Producer.Adopt under Taken.Gen and restore its tasks with
// actors.Tasks.Restore), and Orphans to find the scopes of a home whose lease
// ended (remote.Producer.OnOwnerEnded).
//
// # Identity and lease
//
// A Placement is built on the frontend's owner node (a remote.Producer): its id
// is the node's, and its lease is the node's owner lease. One lease per process
// fences both its scopes and its remote commands; a frontend is Valid while the
// node's last renewal was sent less than half a lease ago, on the monotonic
// clock, so a process resumed from a pause past its lease reads invalid before
// any of its goroutines runs.
//
// # Store and subjects
//
// With P the prefix (WithPrefix, default "taskrt"), everything lives in the
// JetStream KV bucket P_scopes (file storage, History 1, WithReplicas on a
// cluster):
//
//	key              value                                                written by
//	scope.<handle>   {home, epoch, gen, principal, tasks: [{id, kind,        the home: Create at mint, then Update on the
//	                  label, ref, started, told}]}                          revision it wrote last; a taker: Update on the revision read
//	ids.<kind>       the last task number of kind                          NextID: Create, then Update on the revision read
//
// home and epoch name the home frontend and its lease epoch; the home is live
// while that lease is (one renewal per frontend, not per scope). gen is the
// scope's epoch: 1 at Register, one more at each Take; the workers fence a
// scope's commands by it (remote.WithScopes), so a stale home's kills, inputs and
// reads are refused once the taker adopted them. principal is a SHA-256 of the
// principal the scope is bound to, so that a scope of another principal reads,
// everywhere, as unknown. Every write is a compare-and-set: once another
// frontend took a scope, the stale home's writes fail (ErrMoved).
//
// Requests go to P.scope.<id> (answered by frontend id), cancellations to
// P.scope.<id>.cancel, and the forwarder's word that an answer reached its
// caller (Response.Delivered, which runs the home's Response.Sent) to
// P.scope.<id>.ack. A forwarded request carries the caller's headers and body,
// and Taskrt-Forward-Id, Taskrt-Forward-From and Taskrt-Forward-Timeout: the
// time the caller had left, in milliseconds (a duration, since clocks need not
// agree), or WithMaxForward when it had no deadline. The home serves it under a
// context with that deadline plus 250 ms (so that the caller's deadline always
// passes first); when the caller gives up the forwarder publishes the id on the
// cancel subject and the home's context ends at once; when the home's lease ends
// before it answered, Forward returns ErrUnreachable at once (the request may
// or may not have been served, so it is not sent again). The answer carries
// Taskrt-Forward-Status and the home's headers and body, or Taskrt-Forward-Error
// when it could not be sent (larger than the NATS payload limit).
//
// # What Locate answers
//
//   - Unknown: no record, or one bound to another principal;
//   - Here or Elsewhere: the record's home holds the lease it names;
//   - Orphaned: the home's lease ended (the frontend died, was paused or cut off,
//     or shut down): Take it. Of concurrent takers exactly one wins.
package placement
