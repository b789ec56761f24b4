//go:build linux

package remote_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/remote"
)

// An owner node and a worker in one process, on an embedded NATS server: the
// command runs on the worker, the task lives in the owner's runtime.
func Example() {
	dir, _ := os.MkdirTemp("", "remote-example-")
	defer os.RemoveAll(dir)
	srv, err := remote.StartServer(dir, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx := context.Background()

	wnc, _ := remote.Connect(srv.URL())
	defer wnc.Close()
	w, err := remote.NewWorker(wnc, remote.WithName("box1"), remote.WithLease(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close(ctx)

	onc, _ := remote.Connect(srv.URL())
	defer onc.Close()
	p, err := remote.New(onc, remote.WithLease(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	rt, _ := actors.NewRuntime()
	defer rt.Close(ctx)
	defer rt.Tasks().AttachSurface("example")()

	id, err := rt.Tasks().Start(ctx, p.Spec("", bash.Command{Command: `echo "hello from $TASKRT_WORKER"`}))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := rt.Tasks().Wait(ctx, id, "", 10*time.Second)
	r, _ := rt.Tasks().Read(ctx, id, "")
	fmt.Printf("%s %s (%s): %s", id, s.Status, s.Detail, r.Output)
	// Output: bash-1 completed (exit code: 0): hello from box1
}
