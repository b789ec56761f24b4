package actors

import (
	"regexp"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors/internal/kernel"
	"github.com/taskrt/taskrt/messages"
)

// This file is the runtime's internal protocol: one sealed message set per actor. What
// embedders may send lives in package messages (messages.Request); everything here is
// unexported, so nothing outside the runtime can forge a settlement, a teardown answer
// or a start reservation. Each message names who sends it and what answers it.

// registryMsg is the sealed set of internal messages the registry accepts (besides
// the public messages.Request set), in two families: what the typed client asks
// (registryCall) and what the runtime's own actors and timers report
// (registryReport).
type registryMsg interface{ isRegistryMsg() }

// registryCall is a request of the typed client's to the registry.
type registryCall interface {
	registryMsg
	isRegistryCall()
}

// registryReport is what a task actor, an agent actor or a timer of the runtime
// tells the registry.
type registryReport interface {
	registryMsg
	isRegistryReport()
}

// agentMsg is the sealed set of messages an agent actor accepts.
type agentMsg interface{ isAgentMsg() }

// taskMsg is the sealed set of internal messages a task actor accepts (besides the
// routed public ReadTask, KillTask and WaitTask).
type taskMsg interface{ isTaskMsg() }

// listenerMsg is the sealed set of messages a listener actor accepts.
type listenerMsg interface{ isListenerMsg() }

// setWaiterMsg is the sealed set of internal messages a set waiter accepts (besides
// the WaitReply answers to its own waits).
type setWaiterMsg interface{ isSetWaiterMsg() }

// Sealed sends: every internal message goes to its actor through one of these, so a
// message sent to the wrong actor does not compile. c is the sending actor's context,
// or rt.system.Root from a goroutine or a timer. Replies (to a typed client's reply
// process, or a public messages reply) are not part of a sealed set and go with
// Respond or Send.

func tellRegistry(c actor.SenderContext, rt *Runtime, m registryMsg) { c.Send(rt.registry, m) }

func tellAgent(c actor.SenderContext, agent *actor.PID, m agentMsg) { c.Send(agent, m) }

func tellTask(c actor.SenderContext, task *actor.PID, m taskMsg) { c.Send(task, m) }

// requestTask sends with c as the sender, for a message the task answers (teardown).
func requestTask(c actor.SenderContext, task *actor.PID, m taskMsg) { c.Request(task, m) }

func tellListener(c actor.SenderContext, listener *actor.PID, m listenerMsg) { c.Send(listener, m) }

func tellSetWaiter(c actor.SenderContext, waiter *actor.PID, m setWaiterMsg) { c.Send(waiter, m) }

// tellTeardownDone answers a teardown's requester, the registry or an agent actor
// (teardownDone is in both sets).
func tellTeardownDone(c actor.SenderContext, requester *actor.PID, m *teardownDone) {
	c.Send(requester, m)
}

// ---- sent by the typed client to the registry ----

// reserveStart is a start's preflight (client → registry). On success the registry
// holds a slot for the owner until commitStart or abortStart. Reply: *reserveReply.
// The request carries the reservation the registry keeps on success (kind, label,
// owner and key filled in by the client, the rest by the registry): one allocation
// a start instead of two. The client never reads it once sent.
type reserveStart struct {
	reservation
	noQueue bool // refuse rather than queue at the cap (Adopt: the work runs already)
}

type reserveReply struct {
	token  uint64
	queued bool            // at the cap with room in the queue: commit with run, do not call it (queue.go)
	dup    messages.TaskID // the task the start's key names: nothing to start (see keys.go)
	err    error
}

// commitStart turns a reservation into a task (client → registry). The task actor
// answers the client with *startReply once the registry has indexed it; the registry
// answers at once with an error when the reservation is gone (abandoned by a
// teardown that could not wait any longer for the start). task is the task actor's
// state, made by the client (off the registry's mailbox) with the hooks, or a queued
// start's Spec.Run (called when it gets a slot); the registry fills in its snapshot
// and starter and spawns an unowned task itself; for an owned one it answers with
// *spawnVia, and the client hands the task to the agent actor (Runtime.commit).
type commitStart struct {
	token uint64
	task  *task
	// id, when set, is the task's id, chosen by the caller (WithIDs, Restore)
	// instead of the registry's counter; started and reported are a restored
	// task's.
	id       messages.TaskID
	started  time.Time
	reported bool
}

// newCommit is the commit of a reservation for hooks, or for run (a queued start).
func newCommit(rt *Runtime, token uint64, hooks messages.Hooks, run func() (messages.Hooks, error)) *commitStart {
	return &commitStart{token: token, task: newTask(rt, messages.Snapshot{}, hooks, run, nil)}
}

// as sets the id the commit gives the task ("" keeps the registry's counter).
func (c *commitStart) as(id messages.TaskID) *commitStart {
	c.id = id
	return c
}

// spawnVia answers the commit of an owned task: the caller hands the task to its
// agent actor (spawnTask) itself, and is answered with *startReply by the task.
type spawnVia struct {
	agent *kernel.Mailbox
	task  *task
}

type startReply struct {
	id  messages.TaskID
	err error
}

// abortStart releases a reservation whose Run failed or was never called. No reply.
type abortStart struct{ token uint64 }

// abandonWait ends the pending wait registered by waiter, if it is still pending
// (client → registry → task). The waiter then receives its one WaitReply with the
// current snapshot; nothing is marked reported.
type abandonWait struct {
	id     messages.TaskID
	caller messages.AgentID
	waiter *actor.PID
}

// attachSurface / detachSurface maintain the control-surface fence. Reply to attach:
// *attachReply.
type attachSurface struct{ name string }

type attachReply struct{ handle uint64 }

type detachSurface struct{ handle uint64 }

// registerAgent registers an owning agent. Reply: *errReply.
type registerAgent struct {
	id       messages.AgentID
	parent   messages.AgentID
	injector messages.Injector
}

type errReply struct{ err error }

// addCleanup registers a cleanup (client → registry → agent). drain is non-zero only
// for a registration made with the context of that agent's running drain. Reply:
// *addCleanupReply, from the agent actor (or the registry, when refused).
type addCleanup struct {
	agent messages.AgentID
	fn    messages.Cleanup
	drain uint64
}

type addCleanupReply struct {
	handle uint64
	err    error
}

// removeCleanup unregisters a cleanup that has not run (client → registry → agent).
type removeCleanup struct {
	agent  messages.AgentID
	handle uint64
}

// disposeAgent disposes an agent. Reply: *errReply, when the disposal is complete.
type disposeAgent struct{ id messages.AgentID }

// lookupAgent asks for a live agent's injector. Reply: *agentReply.
type lookupAgent struct{ id messages.AgentID }

type agentReply struct {
	live     bool
	injector messages.Injector
}

// notifyTask claims a settled task's one completion notice. Reply: *agentReply.
type notifyTask struct{ id messages.TaskID }

// addListener spawns a listener actor for an OnDone listener. Reply: *addListenerReply.
type addListener struct{ l *listener }

type addListenerReply struct{ pid *actor.PID }

// dropListener stops a listener actor (the listener was removed). No reply.
type dropListener struct{ pid *actor.PID }

// closeRuntime closes the runtime. Reply: *errReply, from the stopped registry.
type closeRuntime struct{}

// subscribeEvents / unsubscribeEvents maintain the registry's event subscribers.
// Reply to subscribeEvents: *errReply.
type subscribeEvents struct{ s *subscriber }

type unsubscribeEvents struct{ sub *Subscription }

// abandonSet ends a set wait early: its requester gave up (client → registry → set
// waiter). The registry finds the waiter by its requester.
type abandonSet struct{ requester *actor.PID }

// ---- sent by the runtime's own actors and timers to the registry ----

// taskSpawned: a new task actor announces itself; the registry indexes it. entry is
// the record the registry made at commit (with the snapshot the task starts from),
// handed to the task and back untouched, so that no snapshot is copied into this
// message.
type taskSpawned struct {
	entry   *taskEntry
	pid     *actor.PID
	settled *taskSettled // the task settled within its Started (work done within Run): applied right after
}

// taskChanged: a task's snapshot changed (stopping, reported).
type taskChanged struct{ snap messages.Snapshot }

// taskSettled: a task settled. It carries what settling changes in the snapshot —
// status, detail, finish time, reported — and the registry applies it to its copy,
// which every earlier change reached before (taskChanged), so that no whole snapshot
// is copied into the message.
type taskSettled struct {
	id       messages.TaskID
	status   messages.Status
	detail   string
	finished time.Time
	reported bool
	queued   bool  // it settled while queued: it never held a slot (queue.go)
	bytes    int64 // the output's size, for a task with an output stream
}

// taskOutput: a task's output grew (task → registry, only while someone
// subscribes).
type taskOutput struct {
	snap  messages.Snapshot
	bytes int64
}

// agentFailed: an agent actor's own code panicked (a runtime bug); the registry keeps
// the first fault and returns it from Dispose.
type agentFailed struct {
	id  messages.AgentID
	err *messages.PanicError
}

// cleanupsRan: a disposing agent actor ran its cleanups (runCleanups is done).
type cleanupsRan struct{ id messages.AgentID }

// tasksTornDown: a disposing agent actor's tasks have all settled (tearDownTasks is
// done).
type tasksTornDown struct{ id messages.AgentID }

// startsOverdue: starts in flight held a teardown longer than the settle timeout.
type startsOverdue struct{ owner messages.AgentID }

// ---- agent actor ----

// spawnTask: spawn a committed task as a child; it answers its starter (registry →
// agent). The task's state is made by the registry and handed over whole: the
// registry keeps no reference to it, the agent only spawns it.
type spawnTask struct{ task *task }

// runCleanups: run the agent's cleanups, those registered from inside them included;
// answer cleanupsRan (registry → agent). drain marks the cleanups' contexts.
type runCleanups struct {
	reason string
	drain  uint64
}

// tearDownTasks: tear down every task of the agent; answer tasksTornDown (registry →
// agent).
type tearDownTasks struct{ reason string }

// cleanupDone: a cleanup returned (drain goroutine → agent).
type cleanupDone struct {
	handle uint64
	err    error
}

// stopAgent: the registry dropped the agent's records and poisoned its task actors;
// stop once they are gone (registry → agent). No answer: the registry sees
// Terminated.
type stopAgent struct{}

// ---- task actor ----

// teardown cancels a task for its owner's disposal or the runtime's close (agent or
// registry → task). Answer: *teardownDone once the task is settled.
type teardown struct{ reason string }

type teardownDone struct {
	id  messages.TaskID
	pid *actor.PID // the task actor
}

// outcomeMsg: the producer's Done delivered (done selector → task).
type outcomeMsg struct {
	outcome messages.Outcome
	ok      bool // false: Done was closed without a value
}

// cancelResult: a Cancel call returned (cancel goroutine → task).
type cancelResult struct {
	err    error
	sender *actor.PID // the KillTask requester; nil for a teardown (a request without a sender never reaches a task)
}

// teardown reports whether the Cancel was a teardown's rather than a kill's.
func (r *cancelResult) teardown() bool { return r.sender == nil }

// reportedByRegistry: the registry answered a wait or a kill of the settled task
// from its index and marked it reported there (registry → task). Every request the
// registry routes to the task after that comes after this message.
type reportedByRegistry struct{}

// settleTimeout: a torn-down task's settle timer fired.
type settleTimeout struct{}

// waitTimeout: a waiter's deadline passed.
type waitTimeout struct{ n uint64 }

// outputGrew: the producer's output grew (Output.OnGrow → task). At most one is on
// its way at a time.
type outputGrew struct{}

// untilTimeout: a ReadUntil's deadline passed.
type untilTimeout struct{ n uint64 }

// inputDone: an Input call returned (input goroutine → task).
type inputDone struct{ err error }

// inputGraceOver: a parked input's grace passed.
type inputGraceOver struct{}

// ---- listener actor ----

// settlement: one task settlement to hand to an OnDone listener.
type settlement struct{ snap messages.Snapshot }

// ---- watches (watch.go) ----

// watchTask starts a watch (client → registry → task). Reply: *errReply, from the
// task actor (or the registry, when refused).
type watchTask struct {
	id      messages.TaskID
	caller  messages.AgentID
	pattern string
	re      *regexp.Regexp
	opts    WatchOptions
}

// watchEnded: a watch's delivery sent its last notice, or the task refused the watch
// (delivery or task → registry).
type watchEnded struct {
	id    messages.TaskID
	owner messages.AgentID
}

// countWatches asks for the live watches on one owner's tasks (client → registry).
// Reply: *countWatchesReply.
type countWatches struct{ owner messages.AgentID }

type countWatchesReply struct{ counts map[messages.TaskID]int }

// watchTimeout: a watch's timeout passed (timer → task).
type watchTimeout struct{ n uint64 }

// watchCapped: a watch's delivery sent its last notice under the cap (delivery →
// task).
type watchCapped struct{ n uint64 }

// ---- queues (queue.go) ----

// runQueued: the registry handed a queued task a slot (registry → task).
type runQueued struct{}

// queuedRan: a queued task's Run returned (start goroutine → task).
type queuedRan struct {
	hooks messages.Hooks
	err   error
}

// queuePosition asks where a queued task stands (client → registry). Reply:
// *queuePositionReply.
type queuePosition struct {
	id     messages.TaskID
	caller messages.AgentID
}

type queuePositionReply struct {
	pos, total int
	err        error
}

func (*reserveStart) isRegistryMsg()   {}
func (*commitStart) isRegistryMsg()    {}
func (*abortStart) isRegistryMsg()     {}
func (*abandonWait) isRegistryMsg()    {}
func (*attachSurface) isRegistryMsg()  {}
func (*detachSurface) isRegistryMsg()  {}
func (*registerAgent) isRegistryMsg()  {}
func (*addCleanup) isRegistryMsg()     {}
func (*removeCleanup) isRegistryMsg()  {}
func (*disposeAgent) isRegistryMsg()   {}
func (*lookupAgent) isRegistryMsg()    {}
func (*notifyTask) isRegistryMsg()     {}
func (*addListener) isRegistryMsg()    {}
func (*dropListener) isRegistryMsg()   {}
func (*closeRuntime) isRegistryMsg()   {}
func (*taskSpawned) isRegistryMsg()    {}
func (*taskChanged) isRegistryMsg()    {}
func (*taskSettled) isRegistryMsg()    {}
func (*cleanupsRan) isRegistryMsg()    {}
func (*tasksTornDown) isRegistryMsg()  {}
func (*startsOverdue) isRegistryMsg()  {}
func (*teardownDone) isRegistryMsg()   {}
func (*spawnTask) isAgentMsg()         {}
func (*addCleanup) isAgentMsg()        {}
func (*removeCleanup) isAgentMsg()     {}
func (*runCleanups) isAgentMsg()       {}
func (*tearDownTasks) isAgentMsg()     {}
func (*cleanupDone) isAgentMsg()       {}
func (*teardownDone) isAgentMsg()      {}
func (*stopAgent) isAgentMsg()         {}
func (*teardown) isTaskMsg()           {}
func (*abandonWait) isTaskMsg()        {}
func (*outcomeMsg) isTaskMsg()         {}
func (*cancelResult) isTaskMsg()       {}
func (*settleTimeout) isTaskMsg()      {}
func (*reportedByRegistry) isTaskMsg() {}
func (*waitTimeout) isTaskMsg()        {}
func (*settlement) isListenerMsg()     {}

// Events, set waits, task output and input.
func (*subscribeEvents) isRegistryMsg()   {}
func (*unsubscribeEvents) isRegistryMsg() {}
func (*abandonSet) isRegistryMsg()        {}
func (*abandonSet) isSetWaiterMsg()       {}
func (*taskOutput) isRegistryMsg()        {}
func (*agentFailed) isRegistryMsg()       {}
func (*outputGrew) isTaskMsg()            {}
func (*untilTimeout) isTaskMsg()          {}
func (*inputDone) isTaskMsg()             {}
func (*inputGraceOver) isTaskMsg()        {}
func (*watchTask) isRegistryMsg()         {}
func (*watchEnded) isRegistryMsg()        {}
func (*countWatches) isRegistryMsg()      {}
func (*watchTask) isTaskMsg()             {}
func (*watchTimeout) isTaskMsg()          {}
func (*watchCapped) isTaskMsg()           {}
func (*queuePosition) isRegistryMsg()     {}
func (*runQueued) isTaskMsg()             {}
func (*queuedRan) isTaskMsg()             {}

// The registry's families.
func (*reserveStart) isRegistryCall()      {}
func (*commitStart) isRegistryCall()       {}
func (*abortStart) isRegistryCall()        {}
func (*abandonWait) isRegistryCall()       {}
func (*attachSurface) isRegistryCall()     {}
func (*detachSurface) isRegistryCall()     {}
func (*registerAgent) isRegistryCall()     {}
func (*addCleanup) isRegistryCall()        {}
func (*removeCleanup) isRegistryCall()     {}
func (*disposeAgent) isRegistryCall()      {}
func (*lookupAgent) isRegistryCall()       {}
func (*notifyTask) isRegistryCall()        {}
func (*addListener) isRegistryCall()       {}
func (*dropListener) isRegistryCall()      {}
func (*closeRuntime) isRegistryCall()      {}
func (*subscribeEvents) isRegistryCall()   {}
func (*unsubscribeEvents) isRegistryCall() {}
func (*abandonSet) isRegistryCall()        {}
func (*watchTask) isRegistryCall()         {}
func (*countWatches) isRegistryCall()      {}
func (*queuePosition) isRegistryCall()     {}
func (*taskSpawned) isRegistryReport()     {}
func (*taskChanged) isRegistryReport()     {}
func (*taskSettled) isRegistryReport()     {}
func (*cleanupsRan) isRegistryReport()     {}
func (*tasksTornDown) isRegistryReport()   {}
func (*startsOverdue) isRegistryReport()   {}
func (*teardownDone) isRegistryReport()    {}
func (*taskOutput) isRegistryReport()      {}
func (*agentFailed) isRegistryReport()     {}
func (*watchEnded) isRegistryReport()      {}
