//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// TestBashStdinTranscript plays two interactive background commands through the bash
// tool and task_input — a read loop on a pipe and a prompt on a terminal — and pins
// the transcript as a golden file.
func TestBashStdinTranscript(t *testing.T) {
	p := newProducer(t)
	// The reply to an input is collected from the task's first output on: waiting a
	// minute for it costs nothing when it comes at once, and keeps a loaded machine
	// from splitting a reply.
	e := newEnv(t, tools.WithInputWait(time.Minute), tools.WithMaxWait(time.Minute))
	ch := e.agent(t, "a1", 8)
	bt, err := tools.NewBash(e.rt, p)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tools.NewSet(append(e.tt.Tools(), bt)...)
	if err != nil {
		t.Fatal(err)
	}
	var tr strings.Builder
	call := func(name, args string) {
		r := set.Call(bg, "a1", name, json.RawMessage(args))
		fmt.Fprintf(&tr, "> %s %s\n", name, args)
		if r.IsError {
			tr.WriteString("error: ")
		}
		tr.WriteString(strings.ReplaceAll(r.Text, "\r", `\r`) + "\n")
		if r.Data != nil {
			d, err := json.Marshal(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&tr, "data: %s\n", d)
		}
		tr.WriteString("\n")
	}
	// A pipe: each line is answered; eof ends the loop.
	call("bash", `{"command":"while read -r l; do echo \"got $l\"; done","run_in_background":true,"stdin":"pipe"}`)
	call("task_input", `{"task_id":"bash-1","text":"hello\n"}`)
	call("task_input", `{"task_id":"bash-1","text":"","eof":true}`)
	// A terminal: read -p prompts only on one. The terminal's echo is turned off so
	// that each reply is one write of the command's.
	call("bash", `{"command":"stty -echo; read -r -p 'Name? ' n; echo \"hello $n\"; read -r _","run_in_background":true,"stdin":"tty"}`)
	call("task_output", `{"task_id":"bash-2","wait":true,"until":"Name\\? ","timeout_ms":60000}`)
	call("task_input", `{"task_id":"bash-2","text":"bob\n"}`)
	call("task_input", `{"task_id":"bash-2","text":"","eof":true}`)
	call("task_list", `{}`)
	t.Log("transcript:\n" + tr.String())
	golden(t, "bash_stdin_transcript", tr.String())
	// Both ends were returned by the calls: no notice follows.
	e.expectOnlySentinel(t, ch, "a1")
}

// commandRunner records the commands the bash tool hands to its runner; a background
// start is a task that has already completed.
type commandRunner struct{ commands []bash.Command }

func (r *commandRunner) Spec(owner messages.AgentID, c bash.Command) messages.Spec {
	return messages.Spec{Kind: bash.Kind, Label: c.Command, Owner: owner, Run: func() (messages.Hooks, error) {
		r.commands = append(r.commands, c)
		done := make(chan messages.Outcome, 1)
		done <- messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}
		return messages.Hooks{Done: done, Cancel: func(string) error { return nil }, ReadOutput: func() string { return "" }}, nil
	}}
}

func (r *commandRunner) Run(_ context.Context, c bash.Command, _ time.Duration) (bash.Result, error) {
	r.commands = append(r.commands, c)
	return bash.Result{Output: "ran\n", Outcome: messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"}}, nil
}

func TestBashStdinArgument(t *testing.T) {
	started := tools.Result{
		Text: "started background task bash-1 (bash: cat). You will be notified when it finishes; read its output with task_output.",
		Data: tools.Handle{Kind: "background", TaskID: "bash-1"},
	}
	ran := tools.Result{Text: lines("ran", "[status: completed, exit code: 0]")}
	tests := []struct {
		name      string
		opts      []tools.BashOption
		args      string
		want      tools.Result
		wantStdin []bash.Stdin // of the commands handed to the runner; none when nothing ran
	}{
		{"stdin pipe starts a background command on a pipe", nil,
			`{"command":"cat","run_in_background":true,"stdin":"pipe"}`, started, []bash.Stdin{bash.StdinPipe}},
		{"stdin tty starts a background command on a terminal", nil,
			`{"command":"cat","run_in_background":true,"stdin":"tty"}`, started, []bash.Stdin{bash.StdinTTY}},
		{"stdin none is the default's empty stdin", nil,
			`{"command":"cat","run_in_background":true,"stdin":"none"}`, started, []bash.Stdin{bash.StdinNone}},
		{"without stdin a background command reads nothing", nil,
			`{"command":"cat","run_in_background":true}`, started, []bash.Stdin{bash.StdinNone}},
		{"stdin none is accepted in the foreground", nil,
			`{"command":"cat","stdin":"none"}`, ran, []bash.Stdin{bash.StdinNone}},
		{"stdin pipe in the foreground is refused", nil,
			`{"command":"cat","stdin":"pipe"}`,
			tools.Result{Text: `invalid arguments: stdin "pipe" needs run_in_background: true (a foreground command takes no input)`, IsError: true}, nil},
		{"an unknown stdin is refused", nil,
			`{"command":"cat","run_in_background":true,"stdin":"file"}`,
			tools.Result{Text: `invalid arguments: stdin must be "none", "pipe" or "tty"`, IsError: true}, nil},
		{"stdin must be a string", nil,
			`{"command":"cat","run_in_background":true,"stdin":true}`,
			tools.Result{Text: `invalid arguments: stdin must be a string`, IsError: true}, nil},
		{"WithoutStdin: stdin is an unknown field", []tools.BashOption{tools.WithoutStdin()},
			`{"command":"cat","run_in_background":true,"stdin":"pipe"}`,
			tools.Result{Text: `invalid arguments: unknown field "stdin"`, IsError: true}, nil},
		{"WithoutStdin: background commands still start", []tools.BashOption{tools.WithoutStdin()},
			`{"command":"cat","run_in_background":true}`, started, []bash.Stdin{bash.StdinNone}},
		{"without run_in_background stdin is an unknown field too", []tools.BashOption{tools.WithRunInBackground(false)},
			`{"command":"cat","stdin":"none"}`,
			tools.Result{Text: `invalid arguments: unknown field "stdin"`, IsError: true}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.agent(t, "a1", 8)
			r := &commandRunner{}
			got := fakeBash(t, e.rt, r, tc.opts...).Call(bg, "a1", json.RawMessage(tc.args))
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			var stdins []bash.Stdin
			for _, c := range r.commands {
				stdins = append(stdins, c.Stdin)
			}
			if fmt.Sprint(stdins) != fmt.Sprint(tc.wantStdin) {
				t.Errorf("stdin of the commands run = %v, want %v", stdins, tc.wantStdin)
			}
		})
	}
}

func TestBashStdinInTheSchemaAndDescription(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		opts []tools.BashOption
		want bool
	}{
		{"offered by default", nil, true},
		{"absent with WithoutStdin", []tools.BashOption{tools.WithoutStdin()}, false},
		{"absent without run_in_background", []tools.BashOption{tools.WithRunInBackground(false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fakeBash(t, e.rt, &commandRunner{}, tc.opts...)
			props := b.Schema()["properties"].(map[string]any)
			if _, got := props["stdin"]; got != tc.want {
				t.Errorf("stdin in the schema: %v, want %v", got, tc.want)
			}
			if got := strings.Contains(b.Description(), "task_input"); got != tc.want {
				t.Errorf("the description names task_input: %v, want %v", got, tc.want)
			}
		})
	}
}

// WithLimits puts its limits on every command the tool hands to its runner,
// foreground and background.
func TestBashWithLimits(t *testing.T) {
	limits := bash.Limits{Processes: 64, Memory: 256 << 20, CPU: 0.5}
	for name, args := range map[string]string{
		"foreground": `{"command":"cat"}`,
		"background": `{"command":"cat","run_in_background":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.agent(t, "a1", 8)
			r := &commandRunner{}
			if got := fakeBash(t, e.rt, r, tools.WithLimits(limits)).Call(bg, "a1", json.RawMessage(args)); got.IsError {
				t.Fatalf("call = %+v", got)
			}
			if len(r.commands) != 1 || r.commands[0].Limits != limits {
				t.Errorf("commands = %+v, want one with limits %+v", r.commands, limits)
			}
		})
	}
}
