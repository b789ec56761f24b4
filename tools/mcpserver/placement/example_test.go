//go:build linux

package placement_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

// A takeover without mcpserver: frontend A homes a scope whose command runs on a
// worker; A is cut off; frontend B takes the scope, adopts the command under the
// scope's next epoch and makes it a task again under the id A gave it.
func Example_takeover() {
	dir, _ := os.MkdirTemp("", "placement-example-")
	defer os.RemoveAll(dir)
	srv, err := remote.StartServer(dir, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx := context.Background()
	const lease = time.Second
	wnc, _ := remote.Connect(srv.URL())
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("box1"), remote.WithLease(lease))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close(ctx)

	// A frontend: an owner node whose scope owner's commands are the scope's, its
	// placement, a runtime. The scope's epoch is what Register or Take gave.
	type frontend struct {
		nc   interface{ Close() }
		node *remote.Producer
		pl   *placement.Placement
		rt   *actors.Runtime
		gen  uint64
	}
	const scope, owner = "SCOPE1", messages.AgentID("scope-1")
	join := func() *frontend {
		f := &frontend{}
		nc, _ := remote.Connect(srv.URL())
		f.nc = nc
		f.node, _ = remote.New(nc, remote.WithLease(lease), remote.WithScopes(func(a messages.AgentID) (string, uint64, bool) {
			return scope, f.gen, a == owner
		}))
		f.pl, _ = placement.New(nc, f.node)
		f.rt, _ = actors.NewRuntime(actors.WithIDs(f.pl.NextID))
		f.rt.Tasks().AttachSurface("example")
		_ = f.rt.Agents().Register(ctx, owner)
		return f
	}
	a, b := join(), join()
	defer func() {
		for _, f := range []*frontend{b, a} {
			_ = f.rt.Close(ctx)
			_ = f.pl.Close(ctx)
			_ = f.node.Close(ctx)
			f.nc.Close()
		}
	}()

	// A registers the scope, starts its command and saves the task first.
	if _, err := a.pl.Register(ctx, scope, "alice"); err != nil {
		fmt.Println(err)
		return
	}
	a.gen = 1
	id, _ := a.rt.Tasks().Start(ctx, a.node.Spec(owner, bash.Command{Command: "echo started; exec sleep 60"}))
	snap, _ := a.rt.Tasks().Get(ctx, id, owner)
	_ = a.pl.Save(ctx, scope, []placement.Task{{ID: string(id), Kind: snap.Kind, Label: snap.Label, Ref: snap.Ref, Started: snap.Started}})

	// B hears of A's lease's end; Orphans lists the scopes A homed then.
	ended := make(chan uint64, 1)
	b.node.OnOwnerEnded(func(node string, epoch uint64) {
		if node == a.node.Node() {
			select {
			case ended <- epoch:
			default: // a callback must not block
			}
		}
	})
	a.nc.Close() // A is cut off: its lease lapses
	orphans, _ := b.pl.Orphans(ctx, a.node.Node(), <-ended)
	fmt.Println("orphaned:", orphans)
	taken, _, err := b.pl.Take(ctx, scope)
	if err != nil {
		fmt.Println(err)
		return
	}
	b.gen = taken.Gen
	adopted, _ := b.node.Adopt(ctx, scope, taken.Gen)
	for _, t := range taken.Tasks {
		for _, c := range adopted {
			if c.Key == t.Ref {
				_ = b.rt.Tasks().Restore(ctx, messages.Spec{Kind: t.Kind, Label: t.Label, Owner: owner},
					actors.Restored{ID: messages.TaskID(t.ID), Started: t.Started, Reported: t.Told}, c.Hooks)
			}
		}
	}
	r, _ := b.rt.Tasks().ReadUntil(ctx, id, owner, "started", 10*time.Second)
	fmt.Printf("%s on B, epoch %d: %q, %s\n", id, taken.Gen, r.Output, r.Snapshot.Status)
	// Output:
	// orphaned: [SCOPE1]
	// bash-1 on B, epoch 2: "started\n", running
}
