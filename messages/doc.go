// Package messages is the vocabulary of taskrt: task and agent identifiers, the
// task status machine, the producer contract (Spec, Hooks, Outcome), the read-only
// projections handed to callers (Snapshot, ReadResult), the sentinel errors, and the
// request/reply protocol of the runtime's actors.
//
// It imports nothing of taskrt's own, so producers (producers/...) and embedders can
// depend on it without pulling in the actor runtime.
//
// The task state machine, which the runtime (package actors) enforces:
//
//	          Kill / teardown (Cancel returned nil)
//	running ─────────────────────────────────────▶ stopping
//	   │                                              │
//	   │ Done delivers an Outcome                     │ Done delivers an Outcome,
//	   │ (or a producer contract violation)           │ SettleTimeout (teardown only),
//	   ▼                                              ▼ or Cancel error during teardown
//	completed | killed | failed  ◀────────────────────┘
//
// The first settled outcome wins; a terminal snapshot never changes again except for
// its Reported flag, which only ever goes from false to true.
package messages
