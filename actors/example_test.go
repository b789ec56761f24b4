package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Embedding the runtime: one agent starts a background task through a producer
// (here an in-memory one; producers/bash and producers/subagent are the real ones),
// reads it, waits for it, and is disposed.
func Example() {
	ctx := context.Background()
	rt, err := actors.NewRuntime()
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	// A control surface must be attached before anything can start (tools.NewTaskTools
	// does this for the model-facing tools).
	detach := rt.Tasks().AttachSurface("my harness")
	defer detach()

	// Register the owning agent with the injector that appends to its session.
	_ = rt.Agents().Register(ctx, "agent-1", actors.WithInjector(func(_ context.Context, text string) error {
		fmt.Println("notice:", text)
		return nil
	}))

	// A producer hands the runtime its hooks from Run.
	finish := make(chan messages.Outcome, 1)
	id, err := rt.Tasks().Start(ctx, messages.Spec{
		Kind: "job", Label: "count to three", Owner: "agent-1",
		Run: func() (messages.Hooks, error) {
			return messages.Hooks{
				Cancel: func(reason string) error {
					finish <- messages.Outcome{Status: messages.Killed, Detail: reason}
					return nil
				},
				Done: finish,
			}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("started", id)

	s, _ := rt.Tasks().Wait(ctx, id, "agent-1", 10*time.Millisecond)
	fmt.Println("after a short wait:", s.Status)

	finish <- messages.Outcome{Status: messages.Completed, Detail: "exit code: 0", Output: "1 2 3"}
	s, _ = rt.Tasks().Wait(ctx, id, "agent-1", time.Minute)
	fmt.Println("settled:", s.Status, s.Detail)

	_, err = rt.Tasks().Get(ctx, id, "agent-2")
	fmt.Println("another agent:", err)

	_ = rt.Agents().Dispose(ctx, "agent-1")
	fmt.Printf("after dispose: %+v\n", rt.Stats())
	// Output:
	// started job-1
	// after a short wait: running
	// settled: completed exit code: 0
	// another agent: task not found: job-1
	// after dispose: {Tasks:0 Running:0 Retained:0 Tombstones:0 Agents:0 Actors:1 Abandoned:0}
}

// started is the embedder actor's own message: a start it asked for has returned.
type started struct {
	id  messages.TaskID
	err error
}

// An actor of the embedder's own drives a task through Runtime.Registry(): it starts
// the task from a goroutine (Start calls the producer's Run, which must not run on a
// mailbox), then waits on it and reads it with requests whose replies come to its
// own mailbox — it never blocks.
func Example_actorNative() {
	ctx := context.Background()
	rt, err := actors.NewRuntime()
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	detach := rt.Tasks().AttachSurface("example")
	defer detach()

	finish := make(chan messages.Outcome, 1)
	spec := messages.Spec{Kind: "job", Label: "count the files", Run: func() (messages.Hooks, error) {
		return messages.Hooks{Cancel: func(string) error { return nil }, Done: finish}, nil
	}}
	result := make(chan string)
	root := rt.ActorSystem().Root
	pid := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			self := c.Self()
			go func() {
				id, err := rt.Tasks().Start(ctx, spec)
				root.Send(self, &started{id: id, err: err})
			}()
		case *started:
			fmt.Println("started", m.id, m.err)
			finish <- messages.Outcome{Status: messages.Completed, Output: "42 files"}
			c.Request(rt.Registry(), &messages.WaitTask{ID: m.id, Timeout: time.Minute})
		case *messages.WaitReply:
			fmt.Println("settled:", m.Snapshot.Status)
			c.Request(rt.Registry(), &messages.ReadTask{ID: m.Snapshot.ID})
		case *messages.ReadReply:
			result <- m.Result.Output
		}
	}))
	fmt.Println("output:", <-result)
	_ = root.StopFuture(pid).Wait()
	// Output:
	// started job-1 <nil>
	// settled: completed
	// output: 42 files
}
