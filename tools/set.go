package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/taskrt/taskrt/messages"
)

// Set dispatches tool calls by name. Build it with NewSet; the zero value is an
// empty set.
type Set map[string]Tool

// NewSet indexes tools by name. Two tools with one name are an error: the model
// could not tell them apart.
func NewSet(tools ...Tool) (Set, error) {
	s := make(Set, len(tools))
	for _, t := range tools {
		if _, dup := s[t.Name()]; dup {
			return nil, fmt.Errorf("tools: two tools named %q", t.Name())
		}
		s[t.Name()] = t
	}
	return s, nil
}

// Names returns the tool names in sorted order.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Call routes a call to the named tool; an unknown name is a tool error
// ("unknown tool: <name>").
func (s Set) Call(ctx context.Context, caller messages.AgentID, name string, args json.RawMessage) Result {
	t, ok := s[name]
	if !ok {
		return Result{Text: "unknown tool: " + truncate(oneLine(name), 64), IsError: true}
	}
	return t.Call(ctx, caller, args)
}
