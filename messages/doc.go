// Package messages is the vocabulary of taskrt: task and agent identifiers, the task
// status machine, the producer contract (Spec, Hooks, Outcome), the read-only
// projections handed to callers (Snapshot, ReadResult), the sentinel errors, and the
// requests an embedder may send to the runtime's registry actor.
//
// It imports nothing but the standard library (`go list -deps ./messages` lists no
// module), so producers (producers/...) and embedders can depend on it without pulling
// in the actor runtime. Nothing in it holds a process handle: tasks and agents are
// named by id, so that what embedders send and receive could one day cross machines.
//
// A task's Status follows the task machine the runtime enforces, drawn once where
// it lives (package actors, task.go): queued (only at a cap, with a queue) →
// running → stopping (a kill's Cancel returned nil, or teardown began) →
// completed | killed | failed.
//
// The first settled outcome wins; a terminal snapshot never changes again except for
// its Reported flag, which only ever goes from false to true.
package messages
