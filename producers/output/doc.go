// Package output is a task's output as a bounded, offset-keyed byte stream: the
// buffer a producer writes its work's output to and the runtime reads, implementing
// messages.Output.
//
// Every byte written has an offset (0, 1, 2, …). The first bytes stay in memory
// (head), and so do the latest ones (a tail ring); the bytes between are written
// through to a capped spill file, and past that cap they are dropped and counted.
// Memory is bounded per task whatever the work prints. On top of that one store the
// runtime gets:
//
//   - consuming reads (Read): the output since the previous read, rendered for a
//     model — at most one read's worth, as head and tail around a one-line marker
//     that says how many bytes were left out and where they are; invalid UTF-8 and
//     NUL bytes rendered safely;
//   - reads up to a pattern (ReadMatch): consume through the end of the first line
//     that matches, leave the rest for the next read;
//   - observer reads by offset (Peek) that never move the consuming cursor, so a UI
//     can tail the output without stealing it from the model;
//   - growth notifications (OnGrow), which turn into output events and wake waits.
//
// The bash producer keeps its commands' output here; a producer with no buffer of its
// own (a streaming sub-agent, an HTTP stream) pushes its output into one and gets
// all of the above for free.
package output
