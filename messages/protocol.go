package messages

import (
	"context"
	"time"
)

// This file is the part of the registry actor's protocol that embedders may use: a
// small set of requests to send to Runtime.Registry() with protoactor's Request (from
// inside an actor) or RequestFuture, each answered by exactly one reply of the named
// type. The typed client in package actors sends the same requests. The runtime's own
// actors exchange other messages too; those are unexported in package actors, so that
// nothing outside the runtime can forge a settlement, a teardown or a reservation.
//
// The rules that keep this surface safe:
//
//   - Send a pointer (&GetTask{…}). A request sent by value is answered with the
//     matching reply carrying ErrInvalidArgument, never dropped.
//   - Send it with Request or RequestFuture, so that it has a sender. A request sent
//     without one (Root.Send) has nobody to answer: it is refused before it reaches
//     any task, logged, and its reply carrying ErrInvalidArgument goes to the actor
//     system's dead letters (a DeadLetterEvent on its EventStream).
//   - Every deadline travels inside the request (WaitTask.Timeout, WaitTasks.Timeout): the runtime ends
//     the wait itself, so a requester that gave up never leaves a waiter behind.
//   - The owner fence applies as in the typed client: Caller is the calling agent's
//     id ("" = the no-agent caller), and a task the caller may not reach is answered
//     exactly like an unknown one.
//   - A ReadTask consumes the output it returns: a requester that stops listening
//     before the reply arrives loses that delta. Give RequestFuture a timeout well
//     above the registry's round trip (it is microseconds; seconds are safe).
//
// Starting tasks and registering or disposing agents take Go values that cannot
// travel (Spec.Run, an Injector) and are done with the typed client (actors.Tasks,
// actors.Agents), from a goroutine when the caller is an actor.

// Request is the sealed set of requests an embedder may send to the registry actor.
type Request interface{ isRequest() }

// GetTask asks for a task's snapshot. Reply: *SnapshotReply.
type GetTask struct {
	ID     TaskID
	Caller AgentID
}

// SnapshotReply answers GetTask.
type SnapshotReply struct {
	Snapshot Snapshot
	Err      error
}

// ListTasks asks for the caller-visible tasks in start order. Reply: *ListReply.
type ListTasks struct{ Caller AgentID }

// ListReply answers ListTasks.
type ListReply struct {
	Snapshots []Snapshot
	Err       error
}

// ReadTask reads a task's output (routed to the task actor, which answers). It
// consumes a stream kind's delta. Reply: *ReadReply.
type ReadTask struct {
	ID     TaskID
	Caller AgentID
}

// ReadReply answers ReadTask.
type ReadReply struct {
	Result ReadResult
	Err    error
}

// KillTask requests cancellation (routed to the task actor). Reply: *KillReply.
type KillTask struct {
	ID     TaskID
	Caller AgentID
	Reason string
}

// KillReply answers KillTask, with the task's snapshot after the kill.
type KillReply struct {
	Result   KillResult
	Snapshot Snapshot
	Err      error
}

// WaitTask waits for a task to settle. The reply, *WaitReply, comes at settlement
// (the terminal snapshot; the task is then reported), or at once for a terminal task,
// or when Timeout has passed (the current, non-terminal snapshot; nothing is marked).
// Timeout must be positive.
type WaitTask struct {
	ID      TaskID
	Caller  AgentID
	Timeout time.Duration
}

// WaitReply answers WaitTask. A non-terminal Snapshot means the timeout passed first.
// ID is the id the request named, so that a requester with several waits in flight
// can tell the answers apart (errors included).
type WaitReply struct {
	ID       TaskID
	Snapshot Snapshot
	Err      error
}

// WaitMode says when a wait on a set of tasks ends.
type WaitMode string

// The wait modes.
const (
	WaitAny WaitMode = "any" // as soon as one of the tasks has settled
	WaitAll WaitMode = "all" // once every task has settled
)

// MaxWaitSet is the most ids one WaitTasks may name.
const MaxWaitSet = 32

// WaitTasks waits on a set of tasks (1 to MaxWaitSet ids; duplicates count once):
// until one has settled (WaitAny) or all have (WaitAll), or Timeout passes. Every id
// is checked against the owner fence before anything waits: an unknown or foreign
// id fails the whole request, naming it. The reply, *WaitTasksReply, carries the
// snapshots in the order of the (deduplicated) ids; every terminal one it returns
// marks its task reported, as WaitTask does.
type WaitTasks struct {
	IDs     []TaskID
	Caller  AgentID
	Mode    WaitMode
	Timeout time.Duration
}

// WaitTasksReply answers WaitTasks.
type WaitTasksReply struct {
	Snapshots []Snapshot
	Err       error
}

// InputTask writes Data to a task's input, then closes it when EOF is set (routed to
// the task actor, which hands it to the producer's Input hook off its mailbox; inputs
// to one task are written in the order they arrive). Data may be empty with EOF set.
// The reply, *InputReply, comes once the producer took the write.
type InputTask struct {
	ID     TaskID
	Caller AgentID
	Data   []byte
	EOF    bool
}

// InputReply answers InputTask, with the snapshot taken when the write completed.
type InputReply struct {
	Snapshot Snapshot
	Err      error
}

// ReadUntil reads a stream task's output up to a pattern (RE2 syntax): the reply
// comes as soon as the task's unread output contains a match (consumed through the
// end of the matching line; what follows stays for the next read), or the task
// settles (everything new is consumed), or Timeout passes (everything new is
// consumed) — whichever comes first, and says which. Matching runs on the task
// actor, on the output the producer holds in memory. Tasks without an output stream
// (Hooks.Output) answer ErrNoOutputStream. Reply: *ReadUntilReply.
type ReadUntil struct {
	ID      TaskID
	Caller  AgentID
	Pattern string
	Timeout time.Duration
}

// ReadUntilReply answers ReadUntil.
type ReadUntilReply struct {
	Result UntilResult
	Err    error
}

// PeekTask is an observer read: up to Max raw bytes of a stream task's output from
// byte offset Offset on, without moving the model's consuming cursor. Tasks without
// an output stream (Hooks.Output) answer ErrNoOutputStream. Reply: *PeekReply.
type PeekTask struct {
	ID     TaskID
	Caller AgentID
	Offset int64
	Max    int
}

// PeekReply answers PeekTask.
type PeekReply struct {
	Result PeekResult
	Err    error
}

func (*GetTask) isRequest()   {}
func (*ReadUntil) isRequest() {}
func (*PeekTask) isRequest()  {}
func (*InputTask) isRequest() {}
func (*ListTasks) isRequest() {}
func (*ReadTask) isRequest()  {}
func (*KillTask) isRequest()  {}
func (*WaitTask) isRequest()  {}
func (*WaitTasks) isRequest() {}

// Injector appends text to an agent's session (a completion notice). It runs on the
// goroutine of whoever delivers the notice (package tools' listener), never on an
// actor's mailbox, and must not block for long.
type Injector func(ctx context.Context, text string) error

// noticeKey is the context key of the task a notice is about.
type noticeKey struct{}

// WithNoticeTask returns ctx marked as the delivery of task id's completion notice.
// The runtime's notice delivery (actors.Tasks.Notify) marks the context it calls the
// injector with, so that an injector can relate a notice to its task without reading
// the text back.
func WithNoticeTask(ctx context.Context, id TaskID) context.Context {
	return context.WithValue(ctx, noticeKey{}, id)
}

// NoticeTask is the task whose completion notice an injector was called for (see
// WithNoticeTask); ok is false for text injected otherwise (actors.Agents.Inject).
func NoticeTask(ctx context.Context) (id TaskID, ok bool) {
	id, ok = ctx.Value(noticeKey{}).(TaskID)
	return id, ok
}

// Cleanup is an owner-cleanup registration: it runs once, when the agent is
// disposed, with a context that is cancelled if Close gives up waiting.
type Cleanup func(ctx context.Context) error
