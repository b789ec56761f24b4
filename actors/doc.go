// Package actors is the taskrt runtime: a tree of protoactor actors that owns
// background tasks for AI agent harnesses, and the typed client (Runtime, Tasks,
// Agents) embedders call.
//
// The tree:
//
//	registry actor              root; owns ids, the owner fence, the index, the surfaces
//	├── agent actor "a1"        one per registered owning agent
//	│   └── task actor bash-1   one per background task owned by a1
//	├── task actor bash-7       unowned task: child of the registry, dies with the runtime
//	└── listener actor          one per OnDone listener; its mailbox is its queue
//
// Every caller operation goes to the registry, which checks the owner fence and
// answers from its index (Get, List) or forwards the request to the task actor,
// which answers the caller directly (Read, Kill, Wait). Producer code (Run, Cancel,
// Done, Release), listeners and cleanups never run on the registry's mailbox.
//
// The actors run on the runtime's own scheduling kernel (package
// actors/internal/kernel: mailboxes, dispatcher, reply processes, the Done selector,
// the stop queue, the task spawner), which replaces protoactor's defaults where they
// cost a task's life too much; the rules in this package use it only through its API.
//
// # Lifecycles
//
// The runtime, each agent and each task have an explicit phase and one function that
// changes it; each file draws its machine:
//
//	runtime (registry.go)          open → closing → stopping → stopped
//	agent (registry_agents.go)     open → awaitingStarts → cleaning → tearingDown → awaitingChildren → stopping → gone
//	task actor (task.go)           queued → running → stopping → settled (then stopped: Release runs)
//
// An agent's phase is the registry's; the agent actor (agent.go) carries out the
// command each phase sends on entry — runCleanups, tearDownTasks, stopAgent — and
// reports when it is done (cleanupsRan, tasksTornDown, its Terminated).
//
// The guarantee the tree exists for: disposing an agent returns only after its
// cleanups ran and every task it owns has settled (transitively, through child
// agents), and Close returns only after every task of the runtime settled and every
// actor stopped. A Spec.Run, a Cancel or a Done that never returns holds a disposal
// at most the settle timeout (WithSettleTimeout): the task is then recorded failed
// ("abandoned: …") or the start abandoned, and the teardown goes on.
//
// # Retention
//
// An owner may live for days and run thousands of tasks, so settled tasks do not
// keep their records forever. Per owner, and for the unowned tasks, the Retention
// (default 100) most recently settled tasks keep their full record: the output still
// to read, the producer's resources (a spill file), and the task actor. When one more
// task settles, the oldest settled record beyond that is evicted: its route is
// removed, its actor is poisoned (a request already routed to it is answered
// first), and the actor's Stopped handler runs the producer's Release. It leaves a
// tombstone — its final snapshot, Evicted set — that the registry answers every call
// from: Get and List return it, Wait returns it at once, Kill says already-terminal,
// Read returns no output; all but Get and List mark it reported, as they would a
// live record. Tombstones are bounded too (default 10,000 per owner); past the bound
// the oldest is forgotten and its id reads as not found. Running and stopping tasks
// are never evicted, the owner fence applies to tombstones unchanged, and a task
// evicted before its completion notice was delivered still gets exactly one.
//
// Why the actor lives until eviction rather than stopping at settlement: a read of a
// settled stream task still calls the producer's ReadOutput (the rest of the output,
// possibly from a spill file on disk), and producer code never runs on the
// registry's mailbox. A retained actor costs about 2.4 KB and no goroutine; the live
// actors are therefore the registry, the agents, the unsettled tasks and at most the
// retained records. A tombstone costs about 300 bytes.
//
// # Failures
//
// Panics in code the runtime calls — a producer's Run, Cancel, ReadOutput or
// Release, an injector, a cleanup, a listener — are contained by one helper and
// become errors (*messages.PanicError, which keeps the stack) or recorded failures, never a
// crash and never a restart. A panic in the runtime's own code is a bug: a task actor
// records its task failed; an agent actor reports the fault, which that agent's
// Dispose returns, and redoes the step its disposal waits on, so the disposal still
// ends; the registry records the fault, closes the runtime (every
// task torn down, every agent disposed) and makes every later call fail with
// ErrClosed wrapping the fault, which Close returns — it never carries on with state
// a panic may have left half-updated.
//
// # Actor-native access
//
// Embedders who drive tasks from actors of their own send the requests of package
// messages (messages.Request: GetTask, ListTasks, ReadTask, KillTask, WaitTask) to
// Runtime.Registry() with protoactor's Request or RequestFuture; see that package for
// the rules. Everything the runtime's actors say to each other is unexported here, so
// it cannot be forged. Starting a task and registering or disposing an agent take Go
// values (Spec.Run, an Injector) and go through the typed client, from a goroutine
// when the caller is an actor (Example_actorNative).
//
// Use package actors directly when you embed the runtime; use package tools for the
// model-facing surface on top of it. Producers live in producers/.
package actors
