package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/producers/bash"
)

func TestSandboxFlags(t *testing.T) {
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown mode is refused", []string{"-sandbox", "full"}, `unknown sandbox mode "full" (want off, read-only or workspace-write)`},
		{"the network needs a sandbox", []string{"-sandbox-network"}, "-sandbox-network needs -sandbox read-only or workspace-write"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, os.Stdin, os.Stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
	good := []struct {
		name string
		args []string
		want bash.Sandbox
	}{
		{"off by default", nil, bash.Sandbox{}},
		{"read-only", []string{"-sandbox", "read-only"}, bash.Sandbox{Mode: bash.SandboxReadOnly}},
		{"workspace-write with the network", []string{"-sandbox", "workspace-write", "-sandbox-network"}, bash.Sandbox{Mode: bash.SandboxWorkspaceWrite, Network: true}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, err := parse(tc.args, &stderr)
			if err != nil || o.sandbox.String() != tc.want.String() {
				t.Errorf("parse(%q) = sandbox %s, err %v; want %s", tc.args, o.sandbox, err, tc.want)
			}
		})
	}
	t.Run("a sandbox that cannot be had fails the start", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // no bwrap
		var stderr bytes.Buffer
		if code := run([]string{"-sandbox", "read-only"}, os.Stdin, os.Stdout, &stderr, nil); code != 1 || !strings.Contains(stderr.String(), "sandbox unavailable: no bubblewrap") {
			t.Errorf("code %d, stderr %q; want 1 and the sandbox unavailable", code, stderr.String())
		}
	})
}
