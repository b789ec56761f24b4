//go:build linux

package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
	"github.com/taskrt/taskrt/tools/mcpserver"
)

// A server asked to sandbox runs every command in the sandbox and says so in the
// bash tool's description; where the sandbox cannot be had, it does not start.
func TestSandboxedServer(t *testing.T) {
	if err := bash.New().CheckSandbox(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	ws := t.TempDir()
	srv := newServer(t, mcpserver.WithBashOptions(bash.WithSandbox(bash.Sandbox{Mode: bash.SandboxWorkspaceWrite})), mcpserver.WithBashToolOptions(tools.WithWorkDir(ws)))
	c, _ := serve(t, srv)
	res, err := c.cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "bash" {
			continue
		}
		for _, want := range []string{"Commands run in a sandbox: the filesystem is read-only except the working directory (" + ws + ")", "The network is off"} {
			if !strings.Contains(tool.Description, want) {
				t.Errorf("the bash description lacks %q: %q", want, tool.Description)
			}
		}
	}
	tests := []struct{ name, command, want string }{
		{"the workspace is writable", "echo ok > f && cat f", "ok\n[status: completed, exit code: 0]"},
		{"/etc is not", "echo no > /etc/taskrt-sandbox-test", "/bin/bash: line 1: /etc/taskrt-sandbox-test: Read-only file system\n[status: completed, exit code: 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(texts(t, c.call(t, "bash", map[string]any{"command": tc.command})), "\n")
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestASandboxThatCannotBeHadStopsTheServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap
	_, err := mcpserver.New(mcpserver.WithBashOptions(bash.WithSandbox(bash.Sandbox{Mode: bash.SandboxReadOnly})))
	if err == nil || !strings.Contains(err.Error(), "taskrt-mcp: bash: sandbox unavailable: no bubblewrap") {
		t.Fatalf("New = %v, want the sandbox unavailable", err)
	}
}
