//go:build linux

package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
)

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:80", true},
		{"localhost:8080", true},
		{"LOCALHOST", true},
		{"[::1]:8080", true},
		{"::1", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"192.168.1.2:8080", false},
		{"example.com:80", false},
		{"localhost.example.com:80", false},
	}
	for _, tc := range tests {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// nopRunner is a tools.BashRunner that runs nothing.
type nopRunner struct{}

func (nopRunner) Spec(owner messages.AgentID, c bash.Command) messages.Spec {
	return messages.Spec{Kind: "bash", Label: c.Command, Owner: owner}
}

func (nopRunner) Run(context.Context, bash.Command, time.Duration) (bash.Result, error) {
	return bash.Result{}, nil
}

// A runner runs the commands elsewhere: bash options for a producer here would
// not apply, and a command must never run without the sandbox or the limits it was
// promised, so New refuses the pair.
func TestABashRunnerCannotBeSandboxedHere(t *testing.T) {
	_, err := New(WithBashRunner(nopRunner{}), WithBashOptions(bash.WithSandbox(bash.Sandbox{Mode: bash.SandboxReadOnly})))
	if err == nil || !strings.Contains(err.Error(), "WithBashOptions and WithBashRunner cannot be combined") {
		t.Fatalf("New with a runner and a sandbox: got %v, want the refusal", err)
	}
}
