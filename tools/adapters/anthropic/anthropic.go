// Package anthropic adapts taskrt's task tools to the Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2): the tools as SDK tool params and a
// dispatcher from the model's tool_use blocks to tool_result blocks, for a
// hand-written agent loop on Messages.New; and the same tools as BetaTools for the
// SDK's tool runner. A Toolset is bound to one owner agent: every call runs as that
// agent, so its background tasks are the agent's, fenced from other agents and
// disposed with it.
//
// It is a module of its own (github.com/taskrt/taskrt/tools/adapters/anthropic), so
// that the core module never requires a provider SDK. Import it under a name of
// your own, beside the SDK:
//
//	import (
//		sdk "github.com/anthropics/anthropic-sdk-go/v2"
//		taskrt "github.com/taskrt/taskrt/tools/adapters/anthropic"
//	)
//
// # Notices
//
// Register the owner agent with actors.WithInjector(inbox.Inject), where inbox is a
// tools.Inbox, and give the Toolset the same inbox (WithInbox). Notices then reach
// the model two ways, as the Messages API expects them:
//
//   - beside a tool result: Dispatch appends the notices queued so far as text
//     blocks after the tool_result blocks of the user message it returns (the API
//     wants tool results first in that message); a BetaTool appends them as text
//     blocks inside its tool_result's content;
//   - between turns: when the loop is idle (the model ended its turn), the inbox's
//     Ready signals and Wake returns the notices; NoticeMessage makes them the user
//     message of an automatic turn. tools.Inbox bounds those turns
//     (tools.WithMaxAutoTurns).
//
// # When not to use it
//
// A harness that speaks MCP (Claude Code, for one) should run taskrt-mcp instead;
// a loop on another provider's SDK has its own adapter (tools/adapters/openai) or
// can wrap tools.Tool directly.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// Toolset is a set of taskrt tools bound to one owner agent, in the Anthropic SDK's
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
		return nil, fmt.Errorf("taskrt/anthropic: %w", err)
	}
	t := &Toolset{owner: owner, set: set, list: append([]tools.Tool(nil), ts...)}
	for _, o := range opts {
		o.apply(t)
	}
	return t, nil
}

// Owner is the agent every call runs as.
func (t *Toolset) Owner() messages.AgentID { return t.owner }

// Params are the tools as Messages API tool definitions (MessageNewParams.Tools).
func (t *Toolset) Params() []sdk.ToolUnionParam {
	out := make([]sdk.ToolUnionParam, len(t.list))
	for i, tool := range t.list {
		props, required, extra := splitSchema(tool.Schema())
		out[i] = sdk.ToolUnionParam{OfTool: &sdk.ToolParam{
			Name:        tool.Name(),
			Description: sdk.String(tool.Description()),
			InputSchema: sdk.ToolInputSchemaParam{Properties: props, Required: required, ExtraFields: extra},
		}}
	}
	return out
}

// Call runs one tool_use block as the owner and returns its tool_result. An unknown
// tool is a tool error naming it, as any failure is.
func (t *Toolset) Call(ctx context.Context, block sdk.ToolUseBlock) sdk.ToolResultBlockParam {
	r := t.set.Call(ctx, t.owner, block.Name, block.Input)
	return sdk.ToolResultBlockParam{
		ToolUseID: block.ID,
		Content:   []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Text}}},
		IsError:   sdk.Bool(r.IsError),
	}
}

// Dispatch runs every tool_use block of msg, concurrently, and returns the user
// message that answers them: one tool_result per block, in the blocks' order, then
// one text block per notice queued in the inbox (WithInbox). It returns false, and
// runs nothing, when msg has no tool_use block.
func (t *Toolset) Dispatch(ctx context.Context, msg *sdk.Message) (sdk.MessageParam, bool) {
	var uses []sdk.ToolUseBlock
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			uses = append(uses, b.AsToolUse())
		}
	}
	if len(uses) == 0 {
		return sdk.MessageParam{}, false
	}
	results := make([]sdk.ContentBlockParamUnion, len(uses))
	var wg sync.WaitGroup
	for i, u := range uses {
		wg.Go(func() {
			r := t.Call(ctx, u)
			results[i] = sdk.ContentBlockParamUnion{OfToolResult: &r}
		})
	}
	wg.Wait()
	if t.inbox != nil {
		for _, n := range t.inbox.Drain() {
			results = append(results, sdk.NewTextBlock(n))
		}
	}
	return sdk.NewUserMessage(results...), true
}

// NoticeMessage is the user message of an automatic turn: the notices an idle loop
// woke for (tools.Inbox.Wake), one text block each.
func NoticeMessage(notices []string) sdk.MessageParam {
	blocks := make([]sdk.ContentBlockParamUnion, len(notices))
	for i, n := range notices {
		blocks[i] = sdk.NewTextBlock(n)
	}
	return sdk.NewUserMessage(blocks...)
}

// BetaTools are the tools as BetaTools for the SDK's tool runner
// (Beta.Messages.NewToolRunner), each running as the owner. A tool error is
// returned as an error, which the runner turns into an is_error tool_result; the
// notices queued in the inbox (WithInbox) go, as text blocks, into the content of a
// successful result.
func (t *Toolset) BetaTools() []sdk.BetaTool {
	out := make([]sdk.BetaTool, len(t.list))
	for i, tool := range t.list {
		out[i] = betaTool{ts: t, tool: tool}
	}
	return out
}

type betaTool struct {
	ts   *Toolset
	tool tools.Tool
}

func (b betaTool) Name() string        { return b.tool.Name() }
func (b betaTool) Description() string { return b.tool.Description() }

func (b betaTool) InputSchema() sdk.BetaToolInputSchemaParam {
	props, required, extra := splitSchema(b.tool.Schema())
	return sdk.BetaToolInputSchemaParam{Properties: props, Required: required, ExtraFields: extra}
}

func (b betaTool) Execute(ctx context.Context, input json.RawMessage) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	r := b.tool.Call(ctx, b.ts.owner, input)
	if r.IsError {
		// The runner answers "Error: <text>" with is_error; the notices wait for
		// a result that carries them.
		return nil, errors.New(r.Text)
	}
	out := []sdk.BetaToolResultBlockParamContentUnion{{OfText: &sdk.BetaTextBlockParam{Text: r.Text}}}
	if b.ts.inbox != nil {
		for _, n := range b.ts.inbox.Drain() {
			out = append(out, sdk.BetaToolResultBlockParamContentUnion{OfText: &sdk.BetaTextBlockParam{Text: n}})
		}
	}
	return out, nil
}

// splitSchema splits a tool's input JSON Schema into the SDK's fields: properties,
// required, and the rest ("additionalProperties": false) as extra fields.
func splitSchema(schema map[string]any) (props any, required []string, extra map[string]any) {
	extra = map[string]any{}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			props = v
		case "required":
			switch r := v.(type) {
			case []string:
				required = r
			case []any:
				for _, s := range r {
					if s, ok := s.(string); ok {
						required = append(required, s)
					}
				}
			}
		default:
			extra[k] = v
		}
	}
	if props == nil {
		props = map[string]any{}
	}
	return props, required, extra
}
