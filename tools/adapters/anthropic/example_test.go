package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	taskrt "github.com/taskrt/taskrt/tools/adapters/anthropic"
)

// A hand-written agent loop on Messages.New with the task tools: the model starts
// the tests in the background, keeps working (lint), ends its turn; the loop, idle,
// is woken by the inbox when the tests finish, hands the model the notice as the
// next user message, and the model reads the output and answers.
//
// The model here is a scripted fake of the Messages API (an httptest server, no
// network); point option.WithBaseURL at nothing and the client talks to Anthropic.
func Example() {
	if _, err := runExample(os.Stdout); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// user: Run the test suite in the background, and lint meanwhile.
	// tool_use bash {"command":"until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\\n' 42","run_in_background":true}
	//   → started background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42). You will be notified when it finishes; read its output with task_output.
	// tool_use bash {"command":"echo lint: no issues"}
	//   → lint: no issues
	//     [status: completed, exit code: 0]
	// assistant: Lint found no issues. The tests are still running; I will report when they finish.
	// (idle: the inbox woke the loop)
	// user: background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42) finished [status: completed, exit code: 0]. Read its output with task_output.
	// tool_use task_output {"task_id":"bash-1"}
	//   → ok 42 tests passed
	//     [status: completed, exit code: 0]
	// assistant: All 42 tests passed, and lint found no issues.
	// live tasks: 0, agents: 0, processes: 0
}

// exampleRules script the fake model of Example, working in dir. When it ends its
// first turn, it lets the tests finish (it creates lint.done), so that their
// notice can only come while the loop is idle.
func exampleRules(dir string) []rule {
	return []rule{
		{"ok 42 tests passed", func() reply { return reply{text: "All 42 tests passed, and lint found no issues."} }},
		{"finished [status:", func() reply { return reply{calls: []call{{"task_output", `{"task_id":"bash-1"}`}}} }},
		{"lint: no issues", func() reply {
			if err := os.WriteFile(filepath.Join(dir, "lint.done"), nil, 0o644); err != nil {
				return reply{text: err.Error()}
			}
			return reply{text: "Lint found no issues. The tests are still running; I will report when they finish."}
		}},
		{"started background task bash-1", func() reply {
			return reply{calls: []call{{"bash", `{"command":"echo lint: no issues"}`}}}
		}},
		{"Run the test suite", func() reply {
			return reply{calls: []call{{"bash", `{"command":"until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\\n' 42","run_in_background":true}`}}}
		}},
	}
}

// exampleReport is what runExample's loop did.
type exampleReport struct {
	answer    string       // the model's last text
	wakeups   int          // automatic turns the inbox started
	stats     actors.Stats // the runtime's, after the teardown
	processes int          // the bash producer's live processes, after the teardown
	requests  []map[string]any
}

// runExample runs Example's loop and writes its transcript to w.
func runExample(w io.Writer) (rep exampleReport, err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "taskrt-anthropic-example-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	model := newFakeModel(exampleRules(dir)...)
	defer model.Close()

	// 1. The runtime, the task tools and bash, and the agent whose injector is the
	//    inbox.
	rt, err := actors.NewRuntime()
	if err != nil {
		return rep, err
	}
	taskTools := tools.NewTaskTools(rt)
	producer := bash.New()
	bashTool, err := tools.NewBash(rt, producer, tools.WithWorkDir(dir))
	if err != nil {
		return rep, err
	}
	const agent messages.AgentID = "agent-1"
	inbox := tools.NewInbox()
	if err := rt.Agents().Register(ctx, agent, actors.WithInjector(inbox.Inject)); err != nil {
		return rep, err
	}
	defer func() {
		// 4. Teardown: disposing the agent kills and awaits its tasks.
		err = errors.Join(err, rt.Agents().Dispose(ctx, agent))
		taskTools.Close()
		err = errors.Join(err, rt.Close(ctx))
		rep.stats, rep.processes, rep.requests = rt.Stats(), producer.Live(), model.Requests()
		fmt.Fprintf(w, "live tasks: %d, agents: %d, processes: %d\n", rep.stats.Running, rep.stats.Agents, rep.processes)
	}()
	toolset, err := taskrt.New(agent, append([]tools.Tool{bashTool}, taskTools.Tools()...), taskrt.WithInbox(inbox))
	if err != nil {
		return rep, err
	}
	client := sdk.NewClient(option.WithBaseURL(model.URL()), option.WithAPIKey("fake"), option.WithMaxRetries(0))

	// 2. The loop: a request, the tool calls answered (notices beside their
	//    results), until the model ends its turn.
	const prompt = "Run the test suite in the background, and lint meanwhile."
	fmt.Fprintln(w, "user:", prompt)
	history := []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(prompt))}
	for {
		msg, err := client.Messages.New(ctx, sdk.MessageNewParams{
			Model:     "claude-fake",
			MaxTokens: 1024,
			System:    []sdk.TextBlockParam{{Text: tools.PromptSection().Text}},
			Tools:     toolset.Params(),
			Messages:  history,
		})
		if err != nil {
			return rep, err
		}
		history = append(history, msg.ToParam())
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				fmt.Fprintln(w, "assistant:", b.Text)
				rep.answer = b.Text
			case "tool_use":
				fmt.Fprintln(w, "tool_use", b.Name, string(b.Input))
			}
		}
		if answer, ok := toolset.Dispatch(ctx, msg); ok {
			printAnswer(w, answer)
			history = append(history, answer)
			continue
		}
		// 3. The turn ended: the loop is idle. While a task the model has not
		//    collected remains, wait for the inbox (a real loop waits for the
		//    user's input too, and calls inbox.UserInput when it comes).
		if !uncollected(ctx, rt, agent) {
			return rep, nil
		}
		waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
		notices, err := inbox.Wait(waitCtx)
		cancel()
		if err != nil {
			return rep, fmt.Errorf("idle with tasks uncollected, and no notice: %w", err)
		}
		rep.wakeups++
		fmt.Fprintln(w, "(idle: the inbox woke the loop)")
		for _, n := range notices {
			fmt.Fprintln(w, "user:", n)
		}
		history = append(history, taskrt.NoticeMessage(notices))
	}
}

// uncollected reports whether agent has a task whose end the model has not seen:
// one still running, or finished with its notice on the way.
func uncollected(ctx context.Context, rt *actors.Runtime, agent messages.AgentID) bool {
	snaps, err := rt.Tasks().List(ctx, agent)
	if err != nil {
		return false
	}
	for _, s := range snaps {
		if !s.Reported {
			return true
		}
	}
	return false
}

// printAnswer prints a Dispatch answer: each tool result, and any notice beside.
func printAnswer(w io.Writer, m sdk.MessageParam) {
	for _, b := range m.OfUser.Content {
		switch {
		case b.OfToolResult != nil:
			for _, c := range b.OfToolResult.Content {
				fmt.Fprintln(w, "  → "+strings.ReplaceAll(c.OfText.Text, "\n", "\n    "))
			}
		case b.OfText != nil:
			fmt.Fprintln(w, "  notice beside the results:", b.OfText.Text)
		}
	}
}
