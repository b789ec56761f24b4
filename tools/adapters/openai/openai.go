// Package openai adapts taskrt's task tools to the OpenAI Go SDK
// (github.com/openai/openai-go/v3): function tools for Chat Completions and for the
// Responses API, and dispatchers from the model's tool calls back to tool messages
// (Chat Completions) and function_call_output items (Responses). A Toolset is bound
// to one owner agent: every call runs as that agent, so its background tasks are
// the agent's, fenced from other agents and disposed with it.
//
// The function schemas are not strict: taskrt's tools have optional properties
// (wait, timeout_ms, run_in_background, …), which strict mode does not allow.
// Arguments are still checked strictly by the tools themselves; a bad call is a
// tool result with the one-line reason, and the model can retry.
//
// It is a module of its own (github.com/taskrt/taskrt/tools/adapters/openai), so
// that the core module never requires a provider SDK. Import it under a name of your
// own, beside the SDK:
//
//	import (
//		sdk "github.com/openai/openai-go/v3"
//		taskrt "github.com/taskrt/taskrt/tools/adapters/openai"
//	)
//
// # Notices
//
// Register the owner agent with actors.WithInjector(inbox.Inject), where inbox is a
// tools.Inbox, and give the Toolset the same inbox (WithInbox). Notices then reach
// the model two ways:
//
//   - beside a tool result: the notices queued so far are added as extra text parts
//     of the last tool output a dispatch returns (a tool message's content parts in
//     Chat Completions, input_text items of a function_call_output's output in
//     Responses), so that they stay part of the tool turn;
//   - between turns: when the loop is idle (the model answered without calling a
//     tool), the inbox's Ready signals and Wake returns the notices; ChatNoticeMessage
//     and ResponseNoticeItem make them the user message of an automatic turn.
//     tools.Inbox bounds those turns (tools.WithMaxAutoTurns).
//
// # When not to use it
//
// A harness that speaks MCP (Codex, for one) should run taskrt-mcp instead.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// Toolset is a set of taskrt tools bound to one owner agent, in the OpenAI SDK's
// terms. Its methods are safe for concurrent use.
type Toolset struct {
	owner messages.AgentID
	set   tools.Set
	list  []tools.Tool
	inbox *tools.Inbox // nil: no notices beside tool results
}

// Option configures a Toolset.
type Option interface{ apply(*Toolset) }

type optionFunc func(*Toolset)

func (f optionFunc) apply(t *Toolset) { f(t) }

// WithInbox makes the Toolset put the notices queued in inbox beside the tool
// results it returns (see the package doc). inbox must be the owner agent's
// injector.
func WithInbox(inbox *tools.Inbox) Option {
	return optionFunc(func(t *Toolset) { t.inbox = inbox })
}

// New returns the tools ts bound to owner. The tools' names must be distinct.
func New(owner messages.AgentID, ts []tools.Tool, opts ...Option) (*Toolset, error) {
	set, err := tools.NewSet(ts...)
	if err != nil {
		return nil, fmt.Errorf("taskrt/openai: %w", err)
	}
	t := &Toolset{owner: owner, set: set, list: append([]tools.Tool(nil), ts...)}
	for _, o := range opts {
		o.apply(t)
	}
	return t, nil
}

// Owner is the agent every call runs as.
func (t *Toolset) Owner() messages.AgentID { return t.owner }

// Call runs one tool call as the owner: name and its JSON arguments as the model
// sent them. An unknown tool or malformed arguments are a tool error with the
// reason, as any failure is.
func (t *Toolset) Call(ctx context.Context, name, arguments string) tools.Result {
	return t.set.Call(ctx, t.owner, name, json.RawMessage(arguments))
}

// ---- Chat Completions ----

// ChatTools are the tools as Chat Completions function tools
// (ChatCompletionNewParams.Tools), not strict.
func (t *Toolset) ChatTools() []sdk.ChatCompletionToolUnionParam {
	out := make([]sdk.ChatCompletionToolUnionParam, len(t.list))
	for i, tool := range t.list {
		out[i] = sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        tool.Name(),
			Description: sdk.String(tool.Description()),
			Parameters:  shared.FunctionParameters(tool.Schema()),
			Strict:      sdk.Bool(false),
		})
	}
	return out
}

// DispatchChat runs every function tool call of msg, concurrently, and returns one
// tool message per call, in the calls' order; the notices queued in the inbox
// (WithInbox) are extra text parts of the last one. It returns false, and runs
// nothing, when msg calls no function.
func (t *Toolset) DispatchChat(ctx context.Context, msg sdk.ChatCompletionMessage) ([]sdk.ChatCompletionMessageParamUnion, bool) {
	var calls []sdk.ChatCompletionMessageFunctionToolCall
	for _, c := range msg.ToolCalls {
		if c.Type == "function" {
			calls = append(calls, c.AsFunction())
		}
	}
	if len(calls) == 0 {
		return nil, false
	}
	texts := t.run(ctx, len(calls), func(i int) (string, string) { return calls[i].Function.Name, calls[i].Function.Arguments })
	out := make([]sdk.ChatCompletionMessageParamUnion, len(calls))
	for i, parts := range texts {
		content := make([]sdk.ChatCompletionContentPartTextParam, len(parts))
		for j, p := range parts {
			content[j] = sdk.ChatCompletionContentPartTextParam{Text: p}
		}
		out[i] = sdk.ToolMessage(content, calls[i].ID)
	}
	return out, true
}

// ChatNoticeMessage is the user message of an automatic turn: the notices an idle
// loop woke for (tools.Inbox.Wake), one per line.
func ChatNoticeMessage(notices []string) sdk.ChatCompletionMessageParamUnion {
	parts := make([]sdk.ChatCompletionContentPartUnionParam, len(notices))
	for i, n := range notices {
		parts[i] = sdk.TextContentPart(n)
	}
	return sdk.UserMessage(parts)
}

// ---- Responses ----

// ResponseTools are the tools as Responses function tools (ResponseNewParams.Tools),
// not strict.
func (t *Toolset) ResponseTools() []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, len(t.list))
	for i, tool := range t.list {
		u := responses.ToolParamOfFunction(tool.Name(), tool.Schema(), false)
		u.OfFunction.Description = sdk.String(tool.Description())
		out[i] = u
	}
	return out
}

// DispatchResponse runs every function_call item of resp's output, concurrently,
// and returns one function_call_output item per call, in the calls' order; the
// notices queued in the inbox (WithInbox) are extra input_text items of the last
// one's output. It returns false, and runs nothing, when resp calls no function.
func (t *Toolset) DispatchResponse(ctx context.Context, resp *responses.Response) ([]responses.ResponseInputItemUnionParam, bool) {
	var calls []responses.ResponseFunctionToolCall
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			calls = append(calls, item.AsFunctionCall())
		}
	}
	if len(calls) == 0 {
		return nil, false
	}
	texts := t.run(ctx, len(calls), func(i int) (string, string) { return calls[i].Name, calls[i].Arguments })
	out := make([]responses.ResponseInputItemUnionParam, len(calls))
	for i, parts := range texts {
		var item responses.ResponseInputItemUnionParam
		if len(parts) == 1 {
			item = responses.ResponseInputItemParamOfFunctionCallOutput(parts[0])
		} else {
			list := make(responses.ResponseFunctionCallOutputItemListParam, len(parts))
			for j, p := range parts {
				list[j] = responses.ResponseFunctionCallOutputItemParamOfInputText(p)
			}
			item = responses.ResponseInputItemParamOfFunctionCallOutput(list)
		}
		item.OfFunctionCallOutput.CallID = param.NewOpt(calls[i].CallID)
		out[i] = item
	}
	return out, true
}

// ResponseNoticeItem is the user message item of an automatic turn: the notices an
// idle loop woke for (tools.Inbox.Wake), one input_text each.
func ResponseNoticeItem(notices []string) responses.ResponseInputItemUnionParam {
	content := make(responses.ResponseInputMessageContentListParam, len(notices))
	for i, n := range notices {
		content[i] = responses.ResponseInputContentParamOfInputText(n)
	}
	return responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser)
}

// ---- shared ----

// run calls n tools concurrently (call i is named and has arguments as get(i)
// says) and returns each one's text parts: the tool's text, and for the last call
// the notices queued in the inbox after it.
func (t *Toolset) run(ctx context.Context, n int, get func(i int) (name, arguments string)) [][]string {
	out := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name, args := get(i)
			out[i] = []string{t.Call(ctx, name, args).Text}
		})
	}
	wg.Wait()
	if t.inbox != nil {
		out[n-1] = append(out[n-1], t.inbox.Drain()...)
	}
	return out
}
