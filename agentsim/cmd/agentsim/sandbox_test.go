package main

import (
	"strings"
	"testing"

	"github.com/taskrt/taskrt/producers/bash"
)

// The summary shows the sandbox below the containment; -sandbox sets it, and a
// sandboxed script's write outside the workspace fails with the command's own error.
func TestSandboxFlag(t *testing.T) {
	t.Run("the summary says off by default", func(t *testing.T) {
		code, out, errOut := runArgs(t, "", "run", "-plain")
		if code != 0 || !strings.Contains(out, "\nsandbox      off\n") {
			t.Errorf("exit %d, output lacks the sandbox line: %s\n%s", code, errOut, out)
		}
	})
	t.Run("an unknown mode is a usage error", func(t *testing.T) {
		code, _, errOut := runArgs(t, "", "run", "-sandbox", "full")
		if code != 2 || !strings.Contains(errOut, `unknown sandbox mode "full"`) {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	if err := bash.New().CheckSandbox(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	t.Run("run -sandbox shows it in the summary", func(t *testing.T) {
		code, out, errOut := runArgs(t, "", "run", "-plain", "-sandbox", "read-only")
		if code != 0 || !strings.Contains(out, "\nsandbox      read-only (bwrap at ") {
			t.Errorf("exit %d, output lacks the sandbox line: %s\n%s", code, errOut, out)
		}
	})
	t.Run("script -sandbox runs the commands in it", func(t *testing.T) {
		script := `{"op":"register","agent":"a1"}
{"op":"call","agent":"a1","tool":"bash","args":{"command":"echo x > /etc/taskrt-agentsim-test"}}
`
		code, out, errOut := runArgs(t, script, "script", "-sandbox", "workspace-write", "-")
		want := `"text":"/bin/bash: line 1: /etc/taskrt-agentsim-test: Read-only file system\n[status: completed, exit code: 1]"`
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %s: %s\n%s", code, want, out, errOut)
		}
	})
}
