package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/taskrt/taskrt/producers/subagent"
	"github.com/taskrt/taskrt/tools"
)

// ParseModels reads scripted models, a JSON object that maps a model's name to its
// script — {"name": {"steps": [...]}, ...}, the format of a scenario's "models"
// (README.md documents the steps) — and returns the Option that registers them.
// Unknown keys are errors; so is a malformed step. Every agent or sub-agent that
// names a scripted model gets a fresh instance playing its script from the first
// step; a model replaces a built-in one of the same name, and one an earlier option
// registered.
func ParseModels(r io.Reader) (Option, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var models map[string]modelScript
	if err := dec.Decode(&models); err != nil {
		return nil, fmt.Errorf("invalid models: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid models: data after the models object")
	}
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	opts := make([]Option, len(names))
	for i, name := range names {
		if err := models[name].validate(); err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		opts[i] = withScript(name, models[name])
	}
	return optionFunc(func(c *config) {
		for _, o := range opts {
			o.apply(c)
		}
	}), nil
}

// modelScript is the data a scripted model plays: its steps, in order, across all
// the turns of its agent (a final answer ends a turn; the next turn continues with
// the next step).
type modelScript struct {
	Steps []scriptStep `json:"steps"`
}

// scriptStep is one scripted model step. Exactly one of Call, Calls, Answer and Fail
// is set. Before the step is returned, in this order: the results of the previous
// step's calls are checked against their expectations, Open is opened, the Await
// gate opens, the session holds AwaitNotices notices, and DelayMS passes.
//
// Strings in Args, Answer and Expect may name variables as ${name}: a name saved
// from a background handle (Save), ${prompt} (the latest user prompt) and ${result}
// (the text of the latest tool result).
type scriptStep struct {
	Open         string       `json:"open,omitempty"`          // a gate to open (see gateSet)
	Await        string       `json:"await,omitempty"`         // block until this gate opens
	AwaitNotices int          `json:"await_notices,omitempty"` // block until the session holds this many notices in total
	DelayMS      int          `json:"delay_ms,omitempty"`      // then think this long
	Say          string       `json:"say,omitempty"`           // commentary that comes with the calls
	Call         *scriptCall  `json:"call,omitempty"`          // one tool call
	Calls        []scriptCall `json:"calls,omitempty"`         // several tool calls, run concurrently
	// Answer is the final answer, with stop reason Stop ("" = completed).
	Answer *string             `json:"answer,omitempty"`
	Stop   subagent.StopReason `json:"stop,omitempty"`
	// Fail makes the model itself fail with this message (stop reason "error").
	Fail string `json:"fail,omitempty"`
}

// scriptCall is one scripted tool call and the expectations on its result.
type scriptCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Save names a variable that receives the task id of the background handle the
	// call returns.
	Save string `json:"save,omitempty"`
	// Expect, when set, must occur in the result's text.
	Expect string `json:"expect,omitempty"`
	// ExpectError, when set, must equal the result's error flag.
	ExpectError *bool `json:"expect_error,omitempty"`
}

// neverGate is the name of a gate that never opens: a step awaiting it blocks until
// its turn is cancelled.
const neverGate = "never"

// validate reports the first malformed step.
func (m modelScript) validate() error {
	if len(m.Steps) == 0 {
		return errors.New("no steps")
	}
	for i, s := range m.Steps {
		if err := s.validate(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func (s scriptStep) validate() error {
	n := 0
	for _, set := range []bool{s.Call != nil, len(s.Calls) > 0, s.Answer != nil, s.Fail != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("exactly one of call, calls, answer and fail must be set")
	}
	if s.Stop != "" && s.Answer == nil {
		return errors.New("stop needs an answer")
	}
	if s.DelayMS < 0 || s.AwaitNotices < 0 {
		return errors.New("delay_ms and await_notices must not be negative")
	}
	for _, c := range s.calls() {
		if strings.TrimSpace(c.Tool) == "" {
			return errors.New("a call has no tool")
		}
		if len(c.Args) > 0 && !json.Valid(c.Args) {
			return fmt.Errorf("call %s: args are not valid JSON", c.Tool)
		}
	}
	return nil
}

func (s scriptStep) calls() []scriptCall {
	if s.Call != nil {
		return []scriptCall{*s.Call}
	}
	return s.Calls
}

// gateSet holds named one-shot signals that let the scripted models of one Sim (and
// the scenario player) coordinate without timing: a step opens a gate, another step
// awaits it. The zero value is ready to use; it is safe for concurrent use.
type gateSet struct {
	mu sync.Mutex // protects m
	m  map[string]chan struct{}
}

func (g *gateSet) ch(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]chan struct{}{}
	}
	c, ok := g.m[name]
	if !ok {
		c = make(chan struct{})
		g.m[name] = c
	}
	return c
}

// open opens the named gate; opening it again is harmless. neverGate cannot be
// opened.
func (g *gateSet) open(name string) {
	if name == neverGate {
		return
	}
	c := g.ch(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// wait blocks until the named gate is open or ctx ends.
func (g *gateSet) wait(ctx context.Context, name string) error {
	select {
	case <-g.ch(name):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scripted is a Model that plays a modelScript. It is used by one agent at a time.
// Failed expectations end the turn with stop reason "error" and are kept for
// failures.
type scripted struct {
	name   string
	script modelScript
	gates  *gateSet

	mu       sync.Mutex // protects next, vars, pending, seen, failures
	next     int
	vars     map[string]string
	pending  []scriptCall // the calls of the previous step, awaiting their results
	seen     int          // session length when the previous step was returned
	failures []string
}

// newScripted returns a model named name (used in failure messages) that plays
// script, coordinating through gates (nil: a private set).
func newScripted(name string, script modelScript, gates *gateSet) *scripted {
	if gates == nil {
		gates = &gateSet{}
	}
	return &scripted{name: name, script: script, gates: gates, vars: map[string]string{}}
}

// failed returns the expectations that failed so far.
func (m *scripted) failed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.failures...)
}

// Next implements Model.
func (m *scripted) Next(ctx context.Context, s *Session) (Step, error) {
	m.mu.Lock()
	err := m.absorb(s)
	if err == nil && m.next >= len(m.script.Steps) {
		err = fmt.Errorf("model %s: script exhausted after %d steps", m.name, len(m.script.Steps))
	}
	if err != nil {
		m.mu.Unlock()
		return Step{}, err
	}
	st := m.script.Steps[m.next]
	m.next++
	m.mu.Unlock()

	if st.Open != "" {
		m.gates.open(st.Open)
	}
	if st.Await != "" {
		if err := m.gates.wait(ctx, st.Await); err != nil {
			return Step{}, err
		}
	}
	if st.AwaitNotices > 0 {
		if err := s.waitNotices(ctx, st.AwaitNotices); err != nil {
			return Step{}, err
		}
	}
	if st.DelayMS > 0 {
		t := time.NewTimer(time.Duration(st.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Step{}, ctx.Err()
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = s.size()
	switch {
	case st.Fail != "":
		return Step{}, errors.New(st.Fail)
	case st.Answer != nil:
		return Step{Text: m.expand(*st.Answer), Stop: st.Stop}, nil
	}
	calls := st.calls()
	m.pending = calls
	out := Step{Text: m.expand(st.Say), Calls: make([]ToolCall, len(calls))}
	for i, c := range calls {
		args, err := m.expandJSON(c.Args)
		if err != nil {
			return Step{}, fmt.Errorf("model %s: args of %s: %w", m.name, c.Tool, err)
		}
		out.Calls[i] = ToolCall{Tool: c.Tool, Args: args}
	}
	return out, nil
}

// absorb reads what happened since the previous step: the prompt, the results of the
// pending calls (saving handles, checking expectations). Called with m.mu held.
func (m *scripted) absorb(s *Session) error {
	pending := m.pending
	m.pending = nil
	var (
		results []Entry
		aborted bool // the turn ended before the calls ran: they have no results
	)
	for _, e := range s.since(m.seen) {
		switch e.Kind {
		case entryUser:
			m.vars["prompt"] = e.Text
		case entryToolResult:
			results = append(results, e)
			m.vars["result"] = e.Text
		case entryAssistant:
			aborted = aborted || (e.Final && e.Stop == subagent.StopAborted)
		}
	}
	var failed []string
	for i, c := range pending {
		if i >= len(results) {
			if !aborted {
				failed = append(failed, fmt.Sprintf("model %s: no result for call %s", m.name, c.Tool))
			}
			continue
		}
		r := results[i]
		if c.Save != "" {
			if h, ok := r.Data.(tools.Handle); ok {
				m.vars[c.Save] = string(h.TaskID)
			} else {
				failed = append(failed, fmt.Sprintf("model %s: %s returned no background handle to save as %q: %s", m.name, c.Tool, c.Save, r.Text))
			}
		}
		if c.Expect != "" {
			if want := m.expand(c.Expect); !strings.Contains(r.Text, want) {
				failed = append(failed, fmt.Sprintf("model %s: %s result %q does not contain %q", m.name, c.Tool, r.Text, want))
			}
		}
		if c.ExpectError != nil && r.IsError != *c.ExpectError {
			failed = append(failed, fmt.Sprintf("model %s: %s result is_error = %t, want %t: %s", m.name, c.Tool, r.IsError, *c.ExpectError, r.Text))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	m.failures = append(m.failures, failed...)
	return fmt.Errorf("expectation failed: %s", strings.Join(failed, "; "))
}

// expand replaces ${name} with the variable's value; unknown names stay as they are.
func (m *scripted) expand(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	for k, v := range m.vars {
		s = strings.ReplaceAll(s, "${"+k+"}", v)
	}
	return s
}

// expandJSON expands the variables inside the string values of raw, keeping the rest
// of the document (numbers included) as it was.
func (m *scripted) expandJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if !bytes.Contains(raw, []byte("${")) {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(m.walk(v))
}

func (m *scripted) walk(v any) any {
	switch x := v.(type) {
	case string:
		return m.expand(x)
	case map[string]any:
		for k, e := range x {
			x[k] = m.walk(e)
		}
	case []any:
		for i, e := range x {
			x[i] = m.walk(e)
		}
	}
	return v
}
