// Package bench measures what taskrt costs beside the work it runs, next to the
// baselines a user would compare it with:
//
//   - impl=actors: the taskrt runtime (package actors), driven through its typed client;
//   - impl=mutex: MutexRegistry, a minimal hand-written registry (one mutex, one
//     goroutine per task) that keeps the same start/settle/read/kill/wait contract —
//     what a user would write instead of adopting a runtime;
//   - impl=floor: bare protoactor (spawn + stop, RequestFuture round trips) — what the
//     actor framework itself costs, below which the runtime cannot go;
//   - impl=exec: plain os/exec, for the figures that run real processes.
//
// Each figure is a function here (Lifecycle, Routed, WaitWake, Memory, Dispose,
// DisposeChain, TrueRuns, Flood), shared by the Go benchmarks of this package
// (go test -bench . ./bench/internal/bench, sub-benchmarks named impl=… so that
// benchstat compares columns) and by the taskrt-bench command, which runs them all
// (Run) and prints one table (WriteTable) or JSON (WriteJSON). The taskrt-stress
// command's package is bench/internal/stress.
//
// Performance is measured, never asserted: the tests of this package check that the
// baseline keeps its contract and that every measurement runs at tiny sizes, not how
// fast anything is.
//
// When not to use it: it is not a load generator for a deployed harness, and its
// in-memory producers do no work at all, on purpose — every figure but the two
// process figures isolates the runtime's own cost.
package bench
