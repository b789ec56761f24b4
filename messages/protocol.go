package messages

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// This file is the actor protocol: one sealed message set per actor. Embedders who
// prefer actor-native access send the Registry* requests to Runtime.Registry() with
// RequestFuture (or Request from inside an actor) and receive the matching reply;
// the typed client in package actors does exactly that. Messages marked "runtime
// internal" are exchanged between the runtime's own actors and are listed here so
// that each actor's whole protocol reads in one place; embedders never send them.

// RegistryMessage is the sealed set of messages the registry actor accepts.
type RegistryMessage interface{ registryMessage() }

// TaskMessage is the sealed set of messages a task actor accepts.
type TaskMessage interface{ taskMessage() }

// AgentMessage is the sealed set of messages an agent actor accepts.
type AgentMessage interface{ agentMessage() }

// ---- registry requests (public) ----

// ReserveStart is a start's preflight: on success the registry holds a slot for the
// owner and replies with a token to commit or abort. Reply: *ReserveStartReply.
type ReserveStart struct {
	Kind, Label string
	Owner       AgentID
}

// ReserveStartReply answers ReserveStart.
type ReserveStartReply struct {
	Token uint64
	Err   error
}

// CommitStart turns a reservation into a task with the hooks Run returned; it cannot
// fail for a valid token. Reply: *StartReply.
type CommitStart struct {
	Token uint64
	Hooks Hooks
}

// StartReply answers CommitStart with the new task's id.
type StartReply struct {
	ID  TaskID
	Err error
}

// AbortStart releases a reservation whose Run failed or was never called. No reply.
type AbortStart struct{ Token uint64 }

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

// ReadTask reads a task's output (routed to the task actor). Reply: *ReadReply.
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

// KillReply answers KillTask.
type KillReply struct {
	Result KillResult
	Err    error
}

// WaitTask registers the sender as a waiter on a task (routed to the task actor). The
// reply, *WaitReply, comes at settlement, or at once for a terminal task, or in answer
// to AbandonWait from the same sender. Every WaitTask gets exactly one reply.
type WaitTask struct {
	ID     TaskID
	Caller AgentID
}

// WaitReply answers WaitTask. Abandoned is true when the wait ended by AbandonWait
// before settlement; Snapshot is then the current (non-terminal) snapshot.
type WaitReply struct {
	Snapshot  Snapshot
	Abandoned bool
	Err       error
}

// AbandonWait ends the pending wait registered by Waiter, if it is still pending: the
// waiter then receives a WaitReply with Abandoned set. An abandoned wait does not mark
// the task reported. No reply to the sender.
type AbandonWait struct {
	ID     TaskID
	Caller AgentID
	Waiter *actor.PID
}

// AttachSurface attaches a named control surface (the fence Start checks). Reply:
// *AttachReply.
type AttachSurface struct{ Name string }

// AttachReply answers AttachSurface with a handle for DetachSurface.
type AttachReply struct {
	Handle uint64
	Err    error
}

// DetachSurface detaches a surface; detaching twice is harmless. No reply.
type DetachSurface struct{ Handle uint64 }

// Injector appends text to an agent's session (a completion notice). It must not
// block for long; it runs on the notice listener's goroutine, never on an actor's.
type Injector func(ctx context.Context, text string) error

// RegisterAgent registers an owning agent. Reply: *ErrReply.
type RegisterAgent struct {
	ID       AgentID
	Parent   AgentID // "" = top level; a parent's disposal disposes its child agents
	Injector Injector
}

// ErrReply is the reply of requests that return nothing but an error.
type ErrReply struct{ Err error }

// Cleanup is an owner-cleanup registration: it runs once, when the agent is
// disposed, with a context that is cancelled if the disposal's caller gives up.
type Cleanup func(ctx context.Context) error

// AddCleanup registers a cleanup on an agent (routed to the agent actor). Drain is
// non-zero only for a registration made from inside that agent's running drain (the
// runtime reads it from the cleanup's context), which is accepted while the agent is
// disposing. Reply: *AddCleanupReply.
type AddCleanup struct {
	Agent   AgentID
	Cleanup Cleanup
	Drain   uint64
}

// AddCleanupReply answers AddCleanup with a handle for RemoveCleanup.
type AddCleanupReply struct {
	Handle uint64
	Err    error
}

// RemoveCleanup unregisters a cleanup that has not run yet. No reply.
type RemoveCleanup struct {
	Agent  AgentID
	Handle uint64
}

// DisposeAgent disposes an agent: refuse its starts, run its cleanups, cancel and
// await its tasks, dispose its child agents, drop its records, unregister it. The
// reply, *ErrReply, comes when all of that is done; concurrent disposals of the same
// agent all get it.
type DisposeAgent struct{ ID AgentID }

// LookupAgent asks for an agent's injector. Reply: *AgentReply.
type LookupAgent struct{ ID AgentID }

// AgentReply answers LookupAgent. Live is false for an unknown or disposing agent.
type AgentReply struct {
	Live     bool
	Injector Injector
}

// NotifyTask claims the one completion notice of a settled task: the registry answers
// with its owner's injector only if the task's record is live, terminal, owned, not
// reported and not yet notified, and its owner is registered and not disposing; it
// then marks the task notified, so a notice is claimed at most once however many
// surfaces ask. Because records are dropped when their owner is disposed, the injector
// is always that of the registration that owned the task, never a later registration
// of the same id. Reply: *AgentReply (Live false = no notice).
type NotifyTask struct{ ID TaskID }

// CloseRuntime cancels every task, disposes every agent, awaits settlement and stops
// the runtime's actor tree. The reply, *ErrReply, comes from the stopped registry.
type CloseRuntime struct{}

// ---- runtime internal ----

// TaskSpawned is a new task actor announcing itself to the registry, which indexes
// it; the task then answers its starter. Runtime internal.
type TaskSpawned struct {
	Snapshot Snapshot
	PID      *actor.PID
}

// TaskChanged carries a task's new snapshot to the registry's index (status or
// reported flag changed). Runtime internal.
type TaskChanged struct{ Snapshot Snapshot }

// TaskSettled carries a task's terminal snapshot to the registry. Runtime internal.
type TaskSettled struct{ Snapshot Snapshot }

// SpawnTask asks an agent actor to spawn a committed task as its child and answer
// Starter with a StartReply. Runtime internal.
type SpawnTask struct {
	Snapshot Snapshot
	Hooks    Hooks
	Starter  *actor.PID
}

// BeginDispose starts an agent actor's disposal: drain cleanups, then tear down its
// tasks with Reason, then stop. Runtime internal.
type BeginDispose struct{ Reason string }

// Teardown cancels a task for its owner's disposal or the runtime's close: it is
// marked reported, cancelled with Reason, force-failed if Cancel errors, and
// abandoned after the settle timeout. The task answers *TeardownDone once terminal.
// Runtime internal.
type Teardown struct{ Reason string }

// TeardownDone answers Teardown. Runtime internal.
type TeardownDone struct{ ID TaskID }

// AgentQuiesced tells the registry that a disposing agent drained its cleanups and
// every task it owns has settled. Runtime internal.
type AgentQuiesced struct{ ID AgentID }

// StopAgent tells a quiesced agent actor to stop once its (poisoned) task actors have
// stopped. Runtime internal.
type StopAgent struct{}

func (*ReserveStart) registryMessage()  {}
func (*CommitStart) registryMessage()   {}
func (*AbortStart) registryMessage()    {}
func (*GetTask) registryMessage()       {}
func (*ListTasks) registryMessage()     {}
func (*ReadTask) registryMessage()      {}
func (*KillTask) registryMessage()      {}
func (*WaitTask) registryMessage()      {}
func (*AbandonWait) registryMessage()   {}
func (*AttachSurface) registryMessage() {}
func (*DetachSurface) registryMessage() {}
func (*RegisterAgent) registryMessage() {}
func (*AddCleanup) registryMessage()    {}
func (*RemoveCleanup) registryMessage() {}
func (*DisposeAgent) registryMessage()  {}
func (*LookupAgent) registryMessage()   {}
func (*NotifyTask) registryMessage()    {}
func (*CloseRuntime) registryMessage()  {}
func (*TaskSpawned) registryMessage()   {}
func (*TaskChanged) registryMessage()   {}
func (*TaskSettled) registryMessage()   {}
func (*TeardownDone) registryMessage()  {}
func (*AgentQuiesced) registryMessage() {}

func (*ReadTask) taskMessage()    {}
func (*KillTask) taskMessage()    {}
func (*WaitTask) taskMessage()    {}
func (*AbandonWait) taskMessage() {}
func (*Teardown) taskMessage()    {}

func (*SpawnTask) agentMessage()     {}
func (*AddCleanup) agentMessage()    {}
func (*RemoveCleanup) agentMessage() {}
func (*BeginDispose) agentMessage()  {}
func (*TeardownDone) agentMessage()  {}
func (*StopAgent) agentMessage()     {}
