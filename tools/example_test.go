//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// An embedder wires a runtime, the task tools and the bash tool, registers an agent
// whose injector appends notices to its session, and dispatches the model's calls by
// name.
func Example() {
	ctx := context.Background()
	rt, err := actors.NewRuntime()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)
	tasks := tools.NewTaskTools(rt) // attaches the control surface and the notice injector
	defer tasks.Close()

	session := make(chan string, 1) // the agent's session, as far as notices go
	err = rt.Agents().Register(ctx, "agent-1", actors.WithInjector(func(_ context.Context, text string) error {
		session <- text
		return nil
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	bashTool, err := tools.NewBash(rt, bash.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	set, err := tools.NewSet(append(tasks.Tools(), bashTool)...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tools.PromptSection().Order, tools.PromptSection().Title)

	r := set.Call(ctx, "agent-1", "bash", json.RawMessage(`{"command":"echo built","run_in_background":true}`))
	fmt.Println(r.Text)
	fmt.Printf("%+v\n", r.Data)
	fmt.Println(<-session) // the model keeps working; the notice arrives when the command ends
	r = set.Call(ctx, "agent-1", "task_output", json.RawMessage(`{"task_id":"bash-1"}`))
	fmt.Println(r.Text)
	// Output:
	// 106 Background tasks
	// started background task bash-1 (bash: echo built). You will be notified when it finishes; read its output with task_output.
	// {Kind:background TaskID:bash-1}
	// background task bash-1 (bash: echo built) finished [status: completed, exit code: 0]. Read its output with task_output.
	// built
	// [status: completed, exit code: 0]
}
