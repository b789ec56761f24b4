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
//	P.start              owner → one worker       startReq{task, owner, epoch, command, dir, env, stdin, limits, block, grant,
//	  (queue P-workers)    with a free slot          scope, scope_epoch} → startReply{worker, epoch} | {full} | {err}
//	P.w.<worker>.kill    owner → worker           killReq{task, owner, epoch, reason} → reply{} | {unknown}
//	P.w.<worker>.input   owner → worker           inputReq{task, owner, epoch, data, eof} → reply{} | {ended} | {closed} | {err}
//	                                               (answered once the data is written)
//	P.w.<worker>.ack     owner → worker           grant: task, owner epoch, acked (the owner holds the
//	                                               output up to it), limit (send up to it), resend,
//	                                               cursor (scope-owned: where consuming reads got to)
//	P.w.<worker>.release owner → worker           releaseReq{task, owner, epoch} → reply{} | {unknown}
//	P.adopt              adopter → every worker   adoptReq{scope, scope_epoch, owner, epoch} → adoptReply{worker,
//	  (plain subscribe)                              tasks: [{key, worker, worker_epoch, label, exited, status,
//	                                                 detail, exit_code, written, cursor, block, stdin}]} | {err}
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
// owner node — whether it died, hung or was cut off — except a scope's (below). A start under an epoch that is
// not the owner's current lease is refused (a stale command). The worker's: its
// tasks' outcomes. An owner node that sees worker.<worker> end settles every task
// it placed there under that epoch as failed, "worker lost: <worker>". Because the
// holder fences at D/2 and the others act at D + D/4 at the earliest, a node that
// can no longer renew has fenced itself before anyone acts on the lapse.
//
// # Scope-owned commands
//
// With WithScopes, a start for a scope's owner carries the scope and its epoch, and
// the command belongs to the scope. When its owner node's lease ends the worker
// orphans it instead of killing it: it runs on, nothing is sent to the dead node,
// and it is killed and dropped only if no adoption comes within the orphan grace
// (WithOrphanGrace). One that exits is kept, outcome and output, after its outcome
// was reported, until its owner releases it (Hooks.Release, when the runtime drops
// the record: P.w.<worker>.release, three tries) or an orphan's grace expires; a
// released or dropped task frees what it held, so this costs no more than the
// worker's existing buffers for as long as the owner keeps the record.
//
// Adopt publishes P.adopt (again every 500 ms while some have not answered) and
// gathers the answers on an inbox until every worker whose lease the watch shows
// live has answered, or its context ends. A worker
// moves each command of the scope whose scope epoch is older than the adoption's,
// if the adopter's lease epoch is current: owner, epoch and scope epoch become the
// adopter's, any orphan timer stops, and it holds the command, sending nothing,
// until the adopter's first grant (sent by Adopt, and again every 500 ms until a
// frame comes; none within the orphan grace drops the command). Its stream then
// starts again at the read cursor: the adopter's buffer starts empty there (its
// offsets count from 0; a worker offset is the cursor plus the local offset, less
// the adopter's markers of dropped bytes), the worker sends from the cursor and
// reports the outcome, again, once the adopter holds every byte. A repeat of the
// same adoption lists the commands still waiting for that first grant.
//
// The read cursor: after each consuming read of a scope-owned task, the owner maps
// the read's end to a worker offset and sends it in a grant at once (a publish; the
// read never waits on the network); the worker keeps the highest it was told. So a
// read whose cursor had not reached the worker when its home died is returned again
// by the adopter: at most that read's bytes. A read up to a pattern is found again
// in the raw bytes to place the cursor; when that is not certain the cursor stays
// behind (bytes returned again, never skipped). In block mode the worker still
// counts acknowledged bytes as read from its buffer: bytes between the cursor and
// them come from its memory's tail, and what that no longer holds is marked dropped.
//
// Fencing: kill, input and release name the owner node and its epoch, a grant its
// epoch (epochs are revisions of one bucket: unique across nodes), so once a
// command moved, the previous node's requests are refused ("unknown") or ignored;
// its kill of a command it no longer owns settles its record ("moved: …"). A node
// whose own lease is lost detaches its scope-owned tasks instead of failing them:
// their output stays as it is, no kill is sent, a Cancel settles them at once
// ("detached: …"), frames and outcomes for them are not taken; it may adopt them
// again under its new lease (the detached record then settles).
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
