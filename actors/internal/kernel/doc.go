// Package kernel is the scheduling machinery under the actors of package actors: the
// mailbox their messages wait in, the dispatcher that runs them, the reply processes
// the typed client waits on, the selector that awaits the tasks' Done channels, the
// queue that stops evicted task actors, and the spawner that starts task actors.
// The actors' rules (the fence, the task machine, retention, disposal) know none of
// it beyond this API:
//
//	New, Config, Kernel.Close          one kernel per runtime
//	Kernel.Props                       an actor's Props on the kernel's mailbox and dispatcher
//	Kernel.Spawner, InlineSpawner      start task actors (Spawner.Spawn, Spawned)
//	Kernel.Call, CallAbandonable       a request from outside the actors and its one answer
//	Kernel.PostAndAwait                hand a message to an idle actor and run it here
//	Kernel.SelectDone, DoneSlot.Stop   await a task's Done off its mailbox
//	Kernel.Stop                        stop an actor through its Mailbox handle
//
// # Why not plain protoactor
//
// Each piece replaces protoactor's own way, and each was measured against it in
// paired runs of the task lifecycle (start, settle, wait, evict; docs/cost.md); each
// is kept because it pays there or in memory:
//
//   - The mailbox keeps its queues as slices under one mutex and binds its run once:
//     protoactor's allocates per actor, per system message and per scheduling, and a
//     task's life touches four mailboxes. It also costs a live task less memory.
//   - The dispatcher runs batches on long-lived workers whose stacks have grown;
//     protoactor's starts a goroutine per batch, which the actors' call chains make
//     pay for a stack copy. Starts, routed requests and a waiter's wake-up are all
//     faster; only a mass stop is slower (see pool).
//   - Reply processes are one-shot and recycled. A protoactor Future per request is
//     the largest cost of all the pieces: it adds a process, a lock, a timer and
//     identifiers to every typed-client call.
//   - The done selector watches 32 Done channels per goroutine instead of parking one
//     goroutine per task. It buys nothing on the lifecycle; it is kept for memory: a
//     goroutine's stack per task is more than the rest of a task's record and would
//     break the per-task memory budget.
//   - The stop queue stops evicted task actors, and runs their parents' Terminated,
//     many to one dispatcher run instead of a Poison each; it pays with owners and
//     concurrent starters.
//   - The spawner makes one Props per spawning actor, and an agent's spawner runs the
//     new task's Started on the agent's goroutine instead of handing it over:
//     protoactor's way (a Props per task, Started dispatched) costs allocations per
//     start and memory per live task.
//
// # Guarantees
//
// The mailbox keeps protoactor's mailbox contract (system messages first, suspend
// and resume, throughput, escalation of a panic, no stranded message). Every
// goroutine the kernel starts is either a dispatcher worker (Close waits for them)
// or runs on Config.Go. A call returns exactly once, with the answer, the end of its
// context, or ErrStopped; a reply process whose caller gave up never receives into
// a later call.
//
// When not to use it: for anything that is not one of package actors' own actors.
// An embedder's actors use protoactor's defaults; the kernel's pieces assume the
// actors' rules (a task's Started never blocks, every request gets one answer).
package kernel
