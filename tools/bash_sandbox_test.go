//go:build linux

package tools_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// newSandboxedProducer is newProducer with every command in s; the test skips
// where bwrap cannot build a sandbox (CI installs it).
func newSandboxedProducer(t *testing.T, s bash.Sandbox) *bash.Producer {
	t.Helper()
	p := bash.New(bash.WithGrace(time.Second), bash.WithSandbox(s))
	if err := p.CheckSandbox(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	t.Cleanup(func() {
		if n := p.Live(); n != 0 {
			t.Errorf("%d bash processes still alive after the test", n)
		}
	})
	return p
}

// Through the bash tool, foreground and background: in workspace-write the
// workspace is writable and nothing else is (but a private /tmp), in read-only
// not even the workspace; the system is readable; the host's loopback is out of
// reach. A refused write fails at once with the command's own error.
func TestBashToolInASandbox(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-accepted })
	port := ln.Addr().(*net.TCPAddr).Port

	other, err := os.MkdirTemp("/var/tmp", "taskrt-sandbox-tools-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	refused := func(path string) string {
		return fmt.Sprintf("/bin/bash: line 1: %s: Read-only file system", path)
	}
	type tc struct {
		name    string
		command func(ws string) string
		want    func(ws string) string // the output before the status line
		status  string
	}
	write := func(dir func(ws string) string) func(ws string) string {
		return func(ws string) string { return fmt.Sprintf("echo data > %s/f && cat %s/f", dir(ws), dir(ws)) }
	}
	workspace := func(ws string) string { return ws }
	fixed := func(p string) func(string) string { return func(string) string { return p } }
	common := []tc{
		{"writing /etc fails", write(fixed("/etc")), func(string) string { return refused("/etc/f") }, "[status: completed, exit code: 1]"},
		{"writing $HOME fails", write(fixed(home)), func(string) string { return refused(home + "/f") }, "[status: completed, exit code: 1]"},
		{"writing another directory fails", write(fixed(other)), func(string) string { return refused(other + "/f") }, "[status: completed, exit code: 1]"},
		{"writing the private /tmp works", write(fixed("/tmp")), fixed("data"), "[status: completed, exit code: 0]"},
		{"reading the system works", func(string) string { return "head -c 5 /etc/passwd; echo" }, fixed("root:"), "[status: completed, exit code: 0]"},
		{"a connection to the host's loopback fails", func(string) string {
			return fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)
		}, func(string) string {
			return fmt.Sprintf("/bin/bash: connect: Connection refused\n/bin/bash: line 1: /dev/tcp/127.0.0.1/%d: Connection refused", port)
		}, "[status: completed, exit code: 1]"},
	}
	modes := []struct {
		sandbox bash.Sandbox
		cases   []tc
	}{
		{bash.Sandbox{Mode: bash.SandboxWorkspaceWrite}, append([]tc{
			{"writing the workspace works", write(workspace), fixed("data"), "[status: completed, exit code: 0]"},
		}, common...)},
		{bash.Sandbox{Mode: bash.SandboxReadOnly}, append([]tc{
			{"writing the workspace fails", write(workspace), func(ws string) string { return refused(ws + "/f") }, "[status: completed, exit code: 1]"},
		}, common...)},
	}
	for _, m := range modes {
		for _, c := range m.cases {
			for _, background := range []bool{false, true} {
				name := "sandbox=" + m.sandbox.String() + "/foreground/" + c.name
				if background {
					name = "sandbox=" + m.sandbox.String() + "/background/" + c.name
				}
				t.Run(name, func(t *testing.T) {
					p := newSandboxedProducer(t, m.sandbox)
					e := newEnv(t)
					e.agent(t, "a1", 8)
					ws := t.TempDir()
					b := newBashTool(t, e.rt, p, tools.WithWorkDir(ws))
					args, err := json.Marshal(map[string]any{"command": c.command(ws), "run_in_background": background})
					if err != nil {
						t.Fatal(err)
					}
					got := b.Call(bg, "a1", args)
					if background {
						id := got.Data.(tools.Handle).TaskID
						got = e.call("a1", "task_output", fmt.Sprintf(`{"task_id":%q,"wait":true}`, id))
					}
					if want := lines(c.want(ws), c.status); got.Text != want {
						t.Errorf("got %q, want %q", got.Text, want)
					}
				})
			}
		}
	}
}

// The description tells the model what it may write and whether the network is
// off, so that it does not retry a refused write or download blindly; without a
// sandbox it says nothing of one.
func TestBashDescriptionStatesTheSandbox(t *testing.T) {
	ws := t.TempDir()
	extra := filepath.Join(ws, "cache")
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		sandbox bash.Sandbox
		want    string
	}{
		{"workspace-write", bash.Sandbox{Mode: bash.SandboxWorkspaceWrite, Writable: []string{extra}},
			" Commands run in a sandbox: the filesystem is read-only except the working directory (" + ws + "), " + extra +
				" and a private /tmp (empty at the start, gone at the end); a write anywhere else fails with \"Read-only file system\", so do not retry it: write inside the writable paths instead." +
				" The network is off: connections to other machines, and to servers on this one, fail; downloads and package installs from the network do not work."},
		{"read-only with the network", bash.Sandbox{Mode: bash.SandboxReadOnly, Network: true},
			" Commands run in a sandbox: the whole filesystem is read-only except a private /tmp (empty at the start, gone at the end); a write anywhere else fails with \"Read-only file system\", so do not retry it: write inside the writable paths instead." +
				" The network is available."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newSandboxedProducer(t, tc.sandbox)
			plain := newBashTool(t, newEnv(t).rt, newProducer(t), tools.WithWorkDir(ws)).Description()
			got := newBashTool(t, newEnv(t).rt, p, tools.WithWorkDir(ws)).Description()
			if got != plain+tc.want {
				t.Errorf("description:\n got %q\nwant %q", got, plain+tc.want)
			}
			if strings.Contains(plain, "sandbox") {
				t.Errorf("an unsandboxed tool's description mentions a sandbox: %q", plain)
			}
		})
	}
}
