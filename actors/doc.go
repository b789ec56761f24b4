// Package actors is the taskrt runtime: a tree of protoactor actors that owns
// background tasks for AI agent harnesses, and the typed client (Runtime, Tasks,
// Agents) embedders call.
//
// The tree:
//
//	registry actor            root; owns ids, the owner fence, the index, the surfaces
//	├── agent actor "a1"      one per registered owning agent
//	│   └── task actor bash-1 one per background task owned by a1
//	└── task actor bash-7     unowned task: child of the registry, dies with the runtime
//
// Every caller operation goes to the registry, which checks the owner fence and
// answers from its index (Get, List) or forwards the request to the task actor,
// which answers the caller directly (Read, Kill, Wait). Producer code (Run, Cancel,
// Done, Release), listeners and cleanups never run on the registry's mailbox.
//
// The guarantee the tree exists for: disposing an agent returns only after its
// cleanups ran and every task it owns has settled (transitively, through child
// agents), and Close returns only after every task of the runtime settled and every
// actor stopped.
//
// Use package actors directly when you embed the runtime; use package tools for the
// model-facing surface on top of it. Producers live in producers/.
package actors
