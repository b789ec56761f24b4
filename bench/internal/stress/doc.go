// Package stress is a randomized, long-running check of the taskrt runtime with its
// real producers: many agents start bash commands and background sub-agents (which
// start work of their own), read, wait on, kill and list them, poke at each other's
// tasks, dispose themselves and register again — for a set duration. Then the runtime
// is closed and the invariants are checked:
//
//   - no foreign effect: every operation on another owner's task (or on an owned task
//     as the no-agent caller) fails exactly as an unknown id does, and no producer
//     Cancel ever sees a foreign kill's reason;
//   - every task reaches exactly one terminal status, and every terminal status any
//     call returned for it is that one;
//   - every task gets exactly one completion notice in its owner's session, or has a
//     recorded reason for none: unowned; reported at settlement (killed, a wait
//     pending, teardown); a read or wait returned its terminal state; or its owner's
//     disposal began before the notice listener reached its settlement;
//   - List shows a caller only its own and unowned tasks;
//   - after Close: zero task records, running tasks, agents and actors
//     (actors.Runtime.Stats), nothing abandoned, the goroutine count back to its
//     baseline, and no process of any bash task alive (leakcheck.Live).
//
// Run drives it; the taskrt-stress command (bench/cmd/taskrt-stress, `make stress`)
// wraps it with flags. A run is reproducible in the operations each agent chooses
// (its random stream is derived from the seed) but not in their interleaving.
//
// When not to use it: it is not a benchmark (its numbers depend on the random mix and
// the machine) and not a substitute for the specification tests in package actors.
package stress
