package actors_test

import (
	"context"
	"fmt"
	"time"

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
	// after dispose: {Tasks:0 Running:0 Agents:0 Actors:1 Abandoned:0}
}
