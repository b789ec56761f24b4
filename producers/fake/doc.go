// Package fake is a producer whose work is driven by its caller: it streams what the
// caller emits, settles with the outcome the caller gives (or, when cancelled, as
// killed by SIGTERM), and can be told to fail, panic or hold its Cancel. It starts no
// process and no goroutine.
//
// It exists for tests — of the runtime, of the tools, of code that embeds taskrt — and
// for examples: every rule of the producer contract (messages.Hooks) can be exercised
// with it deterministically. Do not use it to run real work.
package fake
