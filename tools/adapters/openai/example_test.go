package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	taskrt "github.com/taskrt/taskrt/tools/adapters/openai"
)

// A hand-written agent loop on the Responses API with the task tools: the model
// starts the tests in the background, keeps working (lint), answers for now; the
// loop, idle, is woken by the inbox when the tests finish, hands the model the
// notice as the next user message, and the model reads the output and answers.
//
// The model here is a scripted fake of the API (an httptest server, no network);
// without option.WithBaseURL the client talks to OpenAI.
func Example() {
	if _, err := runResponsesExample(os.Stdout); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// user: Run the test suite in the background, and lint meanwhile.
	// function_call bash {"command":"until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\\n' 42","run_in_background":true}
	//   → started background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42). You will be notified when it finishes; read its output with task_output.
	// function_call bash {"command":"echo lint: no issues"}
	//   → lint: no issues
	//     [status: completed, exit code: 0]
	// assistant: Lint found no issues. The tests are still running; I will report when they finish.
	// (idle: the inbox woke the loop)
	// user: background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42) finished [status: completed, exit code: 0]. Read its output with task_output.
	// function_call task_output {"task_id":"bash-1"}
	//   → ok 42 tests passed
	//     [status: completed, exit code: 0]
	// assistant: All 42 tests passed, and lint found no issues.
	// live tasks: 0, agents: 0, processes: 0
}

// The same loop on Chat Completions.
func Example_chatCompletions() {
	if _, err := runChatExample(os.Stdout); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// user: Run the test suite in the background, and lint meanwhile.
	// tool_call bash {"command":"until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\\n' 42","run_in_background":true}
	//   → started background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42). You will be notified when it finishes; read its output with task_output.
	// tool_call bash {"command":"echo lint: no issues"}
	//   → lint: no issues
	//     [status: completed, exit code: 0]
	// assistant: Lint found no issues. The tests are still running; I will report when they finish.
	// (idle: the inbox woke the loop)
	// user: background task bash-1 (bash: until [ -e lint.done ]; do sleep 0.01; done; printf 'ok %s tests passed\n' 42) finished [status: completed, exit code: 0]. Read its output with task_output.
	// tool_call task_output {"task_id":"bash-1"}
	//   → ok 42 tests passed
	//     [status: completed, exit code: 0]
	// assistant: All 42 tests passed, and lint found no issues.
	// live tasks: 0, agents: 0, processes: 0
}

const examplePrompt = "Run the test suite in the background, and lint meanwhile."

// exampleRules script the fake model of the examples, working in dir. When it
// answers after the lint, it lets the tests finish (it creates lint.done), so that
// their notice can only come while the loop is idle.
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

// exampleReport is what an example's loop did.
type exampleReport struct {
	answer    string       // the model's last text
	wakeups   int          // automatic turns the inbox started
	stats     actors.Stats // the runtime's, after the teardown
	processes int          // the bash producer's live processes, after the teardown
	requests  []map[string]any
}

// exampleEnv is what both examples set up: a fake model, a runtime with the task
// tools and bash, an agent whose injector is an inbox, and its Toolset.
type exampleEnv struct {
	model    *fakeModel
	rt       *actors.Runtime
	inbox    *tools.Inbox
	toolset  *taskrt.Toolset
	teardown func(w io.Writer, rep *exampleReport) error
}

const exampleAgent messages.AgentID = "agent-1"

func newExampleEnv(ctx context.Context) (*exampleEnv, error) {
	dir, err := os.MkdirTemp("", "taskrt-openai-example-")
	if err != nil {
		return nil, err
	}
	model := newFakeModel(exampleRules(dir)...)
	rt, err := actors.NewRuntime()
	if err != nil {
		return nil, err
	}
	taskTools := tools.NewTaskTools(rt)
	producer := bash.New()
	inbox := tools.NewInbox()
	bashTool, err := tools.NewBash(rt, producer, tools.WithWorkDir(dir))
	if err == nil {
		err = rt.Agents().Register(ctx, exampleAgent, actors.WithInjector(inbox.Inject))
	}
	var toolset *taskrt.Toolset
	if err == nil {
		toolset, err = taskrt.New(exampleAgent, append([]tools.Tool{bashTool}, taskTools.Tools()...), taskrt.WithInbox(inbox))
	}
	teardown := func(w io.Writer, rep *exampleReport) error {
		// Disposing the agent kills and awaits its tasks.
		err := errors.Join(rt.Agents().Dispose(ctx, exampleAgent))
		taskTools.Close()
		err = errors.Join(err, rt.Close(ctx))
		model.Close()
		os.RemoveAll(dir)
		rep.stats, rep.processes, rep.requests = rt.Stats(), producer.Live(), model.Requests()
		fmt.Fprintf(w, "live tasks: %d, agents: %d, processes: %d\n", rep.stats.Running, rep.stats.Agents, rep.processes)
		return err
	}
	env := &exampleEnv{model: model, rt: rt, inbox: inbox, toolset: toolset, teardown: teardown}
	if err != nil {
		return nil, errors.Join(err, teardown(io.Discard, &exampleReport{}))
	}
	return env, nil
}

// idle is the loop's step once the model answered without calling a tool: while a
// task the model has not collected remains, wait for the inbox (a real loop waits
// for the user's input too, and calls inbox.UserInput when it comes). It returns
// the notices to hand the model, or nil when the run is over.
func (e *exampleEnv) idle(ctx context.Context, w io.Writer, rep *exampleReport) ([]string, error) {
	snaps, err := e.rt.Tasks().List(ctx, exampleAgent)
	if err != nil {
		return nil, err
	}
	uncollected := false
	for _, s := range snaps {
		uncollected = uncollected || !s.Reported // running, or its notice on the way
	}
	if !uncollected {
		return nil, nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	notices, err := e.inbox.Wait(waitCtx)
	if err != nil {
		return nil, fmt.Errorf("idle with tasks uncollected, and no notice: %w", err)
	}
	rep.wakeups++
	fmt.Fprintln(w, "(idle: the inbox woke the loop)")
	for _, n := range notices {
		fmt.Fprintln(w, "user:", n)
	}
	return notices, nil
}

// runResponsesExample runs Example's loop and writes its transcript to w.
func runResponsesExample(w io.Writer) (rep exampleReport, err error) {
	ctx := context.Background()
	env, err := newExampleEnv(ctx)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, env.teardown(w, &rep)) }()
	client := sdk.NewClient(option.WithBaseURL(env.model.BaseURL()), option.WithAPIKey("fake"), option.WithMaxRetries(0))

	fmt.Fprintln(w, "user:", examplePrompt)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(examplePrompt, responses.EasyInputMessageRoleUser)}
	previous := ""
	for {
		params := responses.ResponseNewParams{
			Model:        "gpt-fake",
			Instructions: sdk.String(tools.PromptSection().Text),
			Tools:        env.toolset.ResponseTools(),
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		}
		if previous != "" {
			params.PreviousResponseID = sdk.String(previous)
		}
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			return rep, err
		}
		previous = resp.ID
		for _, item := range resp.Output {
			if item.Type == "function_call" {
				fc := item.AsFunctionCall()
				fmt.Fprintln(w, "function_call", fc.Name, fc.Arguments)
			}
		}
		if outputs, ok := env.toolset.DispatchResponse(ctx, resp); ok {
			for _, o := range outputs {
				printOutput(w, o)
			}
			input = outputs
			continue
		}
		rep.answer = resp.OutputText()
		fmt.Fprintln(w, "assistant:", rep.answer)
		notices, err := env.idle(ctx, w, &rep)
		if err != nil || notices == nil {
			return rep, err
		}
		input = responses.ResponseInputParam{taskrt.ResponseNoticeItem(notices)}
	}
}

// runChatExample runs Example_chatCompletions's loop and writes its transcript to w.
func runChatExample(w io.Writer) (rep exampleReport, err error) {
	ctx := context.Background()
	env, err := newExampleEnv(ctx)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, env.teardown(w, &rep)) }()
	client := sdk.NewClient(option.WithBaseURL(env.model.BaseURL()), option.WithAPIKey("fake"), option.WithMaxRetries(0))

	fmt.Fprintln(w, "user:", examplePrompt)
	history := []sdk.ChatCompletionMessageParamUnion{
		sdk.SystemMessage(tools.PromptSection().Text),
		sdk.UserMessage(examplePrompt),
	}
	for {
		completion, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
			Model:    "gpt-fake",
			Tools:    env.toolset.ChatTools(),
			Messages: history,
		})
		if err != nil {
			return rep, err
		}
		msg := completion.Choices[0].Message
		history = append(history, msg.ToParam())
		for _, c := range msg.ToolCalls {
			fmt.Fprintln(w, "tool_call", c.Function.Name, c.Function.Arguments)
		}
		if results, ok := env.toolset.DispatchChat(ctx, msg); ok {
			for _, r := range results {
				for _, p := range r.OfTool.Content.OfArrayOfContentParts {
					fmt.Fprintln(w, "  → "+strings.ReplaceAll(p.Text, "\n", "\n    "))
				}
			}
			history = append(history, results...)
			continue
		}
		rep.answer = msg.Content
		fmt.Fprintln(w, "assistant:", rep.answer)
		notices, err := env.idle(ctx, w, &rep)
		if err != nil || notices == nil {
			return rep, err
		}
		history = append(history, taskrt.ChatNoticeMessage(notices))
	}
}

// printOutput prints a function_call_output item's text.
func printOutput(w io.Writer, item responses.ResponseInputItemUnionParam) {
	out := item.OfFunctionCallOutput.Output
	texts := []string{out.OfString.Value}
	if out.OfResponseFunctionCallOutputItemArray != nil {
		texts = nil
		for _, p := range out.OfResponseFunctionCallOutputItemArray {
			texts = append(texts, p.OfInputText.Text)
		}
	}
	for _, t := range texts {
		fmt.Fprintln(w, "  → "+strings.ReplaceAll(t, "\n", "\n    "))
	}
}
