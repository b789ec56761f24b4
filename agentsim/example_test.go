package agentsim_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/taskrt/taskrt/agentsim"
)

// An agent with a scripted model starts a command in the background, is notified
// when it finishes, collects its output and answers with it.
func Example() {
	models, err := agentsim.ParseModels(strings.NewReader(`{
		"lead": {"steps": [
			{"say": "Building in the background.",
			 "call": {"tool": "bash", "args": {"command": "echo build ok", "run_in_background": true}, "save": "build"}},
			{"await_notices": 1, "call": {"tool": "task_output", "args": {"task_id": "${build}"}}},
			{"answer": "${result}"}
		]}
	}`))
	if err != nil {
		log.Fatal(err)
	}
	sim, err := agentsim.New(models)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	sess, err := sim.Register(ctx, "a1", "")
	if err != nil {
		log.Fatal(err)
	}
	agent, err := sim.Agent("a1", "lead")
	if err != nil {
		log.Fatal(err)
	}
	res := agent.Turn(ctx, "Build the project.")
	fmt.Printf("%s: %q\n", res.Stop, res.Output)
	for _, e := range sess.Entries() {
		if e.Kind == "notice" {
			fmt.Println("notice:", e.Text)
		}
	}
	// Close disposes a1 and checks that nothing outlived it (ErrNotQuiescent).
	if err := sim.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// completed: "build ok\n[status: completed, exit code: 0]"
	// notice: background task bash-1 (bash: echo build ok) finished [status: completed, exit code: 0]. Read its output with task_output.
}

// A scenario is a whole session as data: models, agents and their turns, and the
// expected outcome. Play plays it and reports every unmet expectation.
func ExamplePlay() {
	sc, err := agentsim.ParseScenario(strings.NewReader(`{
		"name": "delegate",
		"models": {"lead": {"steps": [
			{"call": {"tool": "subagent", "args": {"description": "ask", "prompt": "42", "model": "echo"}}},
			{"answer": "the child said ${result}"}
		]}},
		"agents": [{"id": "a1", "model": "lead", "turns": ["Ask a sub-agent."]}],
		"expect": {"answers": {"a1": ["the child said 42"]}, "model_calls": {"lead": 2, "echo": 1}}
	}`))
	if err != nil {
		log.Fatal(err)
	}
	rep, err := agentsim.Play(context.Background(), sc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Scenario, rep.Turns["a1"][0].Output, rep.Failures)
	// Output:
	// delegate the child said 42 []
}
