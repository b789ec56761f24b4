// Package remote runs taskrt's bash commands on other machines: worker nodes
// reached over NATS (github.com/nats-io/nats.go, its jetstream KV for the leases).
//
// An owner node is any process with a taskrt runtime (an embedder, taskrt-mcp
// -nats). It keeps every record, owner fence, output buffer, notice and waiter
// exactly as for a local task: a remote command is an ordinary task of the
// Producer made by New, whose hooks talk to a worker. A worker is a Worker
// (NewWorker; the command taskrt-worker) running its own bash producer — cgroup
// containment, limits, stdin modes as for local tasks — for the commands placed on
// it. Use it when commands must run apart from the sessions (sandboxes, build
// boxes); when they may run where the runtime runs, producers/bash alone is
// simpler and faster.
//
// # Protocol
//
// Every subject starts with a prefix P (WithPrefix, default "taskrt"); <node> is
// an owner node's id (random, one per Producer), <worker> a worker's name. Bodies
// are JSON except output's frames and grants, which are binary (frame.go).
//
//	subject              sent by → answered by   body → answer
//	P.start              owner → one worker       startReq{task, owner, epoch, command, dir, env, stdin, limits, block, grant}
//	  (queue P-workers)    with a free slot        → startReply{worker, epoch} | {full} | {err}
//	P.w.<worker>.kill    owner → worker           killReq{task, owner, epoch, reason} → reply{} | {unknown}
//	P.w.<worker>.input   owner → worker           inputReq{task, owner, epoch, data, eof} → reply{} | {ended} | {closed} | {err}
//	                                               (answered once the data is written)
//	P.w.<worker>.ack     owner → worker           grant: task, owner epoch, acked (the owner holds the
//	                                               output up to it), limit (send up to it), resend
//	P.o.<node>.out       worker → owner           frame: task, worker, both epochs, from, off, flags
//	                                               (ack now, held), then the output bytes as they are
//	P.o.<node>.done      worker → owner           doneMsg{task, worker, status, detail, written, exit_code} → reply{}
//
// Placement: a worker subscribes to P.start in the queue group P-workers only while
// it has a free slot (WithMaxTasks), so NATS hands a start to a worker that can
// take it; no subscriber means no free slot anywhere, and the start fails at once
// with ErrNoWorker (through the runtime: no id burned). A worker that filled up
// meanwhile answers "full" and the owner asks again (three more times). A start
// that gets no answer in time (WithStartTimeout) fails; if a worker ran it after
// all, its output reaches an owner that does not know the task, which answers it
// with a kill.
//
// Output: the worker reads the command's output from its bash buffer (bounded
// memory plus a capped spill file, as locally) and sends it in frames of up to
// 1 MiB (less if the server's max_payload is smaller). Credit decides how far:
// the owner grants the worker its window (WithOutputWindow, 4 MiB) past what it
// holds, and a worker's bytes sent and not acknowledged, over all its tasks, stay
// within its budget (WithOutputBudget, 16 MiB), shared by the tasks that stream.
// The owner appends what it did not hold yet (a retransmission overlaps) and
// grants at once when a frame asks (the worker is about to run out of credit, or
// waits to report the outcome), when a quarter window arrived, or after a frame
// that follows a lost one (resend from acked); otherwise 5 ms later, batched.
// What the worker sent and did not see acknowledged for 500 ms it sends again;
// credit it did not see for as long it asks for with an empty frame. Bytes the
// worker's buffer dropped are counted in the frame (off − from) and marked in the
// owner's read. Once the command's processes are gone and every byte is
// acknowledged, the worker reports the outcome on P.o.<node>.done until the owner
// answers; the owner settles the task with the first outcome it gets (a repeat is
// answered and ignored).
//
// Block mode (bash.Command.BlockOutput): both buffers block instead of dropping.
// The owner grants no more than its buffer has room for, and grants again as it
// reads; the worker's acknowledged bytes are its buffer's reads, so the command
// blocks on its write once a read's worth is waiting there. A worker that has
// output the grant does not let it send says so once per grant (a held frame),
// and the owner's stream reports Full until a read makes room. A kill or a
// disposal ends block mode on both sides, so the task ends within the grace.
//
// Kill: Cancel records the reason and a goroutine of the task sends the kill until
// the worker answers (or the task settles); it never fails, so a kill during
// disposal never leaves work orphaned: either the worker kills the command and its
// outcome follows, or the worker is lost and the task settles failed.
//
// # Leases
//
// Owner nodes and workers each hold a lease in the KV bucket P_leases, under
// owner.<node> and worker.<worker>. The lease's epoch is the revision of the Create
// that acquired it; every start, kill and input carries the owner's epoch, and a
// start's answer the worker's. Ownership is decided only by compare-and-set:
// Create to acquire, Update on the last revision to renew, Delete on the last
// revision to end a lapsed lease. A refused Update is lost ownership: the node
// fences itself and acquires a new lease, with a new epoch; it never renews the
// old one again.
//
// With D the lease's duration (WithLease, written into the lease so that observers
// use the holder's), the timings, all on the monotonic clock:
//
//   - renew every D/4: one slow or lost renewal costs nothing;
//   - self-fence at D/2 without a successful renewal (counted from when the last
//     successful one was sent): an owner node fails every remote task ("owner lease
//     lost: …"); a worker kills every command (its grace is D/4, at most 3 s). This
//     guards against a node that is cut off, hung or paused acting on a lease that
//     the others are about to end;
//   - lapse at D + D/4 without a new revision, counted by each observer from when
//     it saw the last one: every node watches the bucket and then tries the
//     conditional Delete. A renewal in between makes it fail and the lease lives on.
//
// What each lease protects. The owner node's: its commands. A worker that sees
// owner.<node> end (deleted, or replaced by a newer epoch) kills every command of
// that node's old epoch and reports nothing to it, so no command outlives its
// owner node — whether it died, hung or was cut off. A start under an epoch that is
// not the owner's current lease is refused (a stale command). The worker's: its
// tasks' outcomes. An owner node that sees worker.<worker> end settles every task
// it placed there under that epoch as failed, "worker lost: <worker>". Because the
// holder fences at D/2 and the others act at D + D/4 at the earliest, a node that
// can no longer renew has fenced itself before anyone acts on the lapse.
//
// Replays: Connect disables the reconnect buffer, so a request made while cut off
// fails instead of reaching the worker late; a worker remembers the last 4096 task
// keys it started and refuses a start it has seen (a command never runs twice);
// kill and input carry the epoch and are refused for a task of another node.
//
// # What is not guaranteed
//
//   - A worker process killed with SIGKILL cannot kill its commands; the guard
//     process of taskrt-worker does (cgroup containment), and owners see the worker
//     lost at the lapse. An embedder running a Worker in its own process gets no
//     guard.
//   - Clock rates: the leases assume that clocks on different machines run at about
//     the same rate (not that they agree).
//   - The lease bucket lives in memory on the NATS server (one replica unless
//     WithReplicas): if that server restarts, every lease ends and every remote
//     task of every node fails. WithReplicas(3) on a cluster replicates it; the
//     store's faults are in docs/remote-faults.md.
//   - Output a worker's buffer dropped (past its memory and spill cap) is missing
//     on the owner too; the read says how many bytes.
package remote
