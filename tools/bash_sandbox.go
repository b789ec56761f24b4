package tools

import (
	"fmt"
	"os"
	"strings"

	"github.com/taskrt/taskrt/producers/bash"
)

// sandboxReporter is what a BashRunner implements to have the tool's description
// say what its commands may touch: *bash.Producer does, and so does a wrapper that
// passes Sandbox on.
type sandboxReporter interface{ Sandbox() bash.Sandbox }

// sandboxDescription tells the model what a sandboxed command may write and reach,
// so that it reads a failed write or connection as the rule it is instead of
// retrying blindly; "" without a sandbox. dir is the commands' working directory.
func sandboxDescription(s bash.Sandbox, dir string) string {
	if !s.On() {
		return ""
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	var b strings.Builder
	b.WriteString(" Commands run in a sandbox: ")
	switch s.Mode {
	case bash.SandboxReadOnly:
		b.WriteString("the whole filesystem is read-only except a private /tmp (empty at the start, gone at the end)")
	default:
		w := []string{fmt.Sprintf("the working directory (%s)", dir)}
		w = append(w, s.Writable...)
		fmt.Fprintf(&b, "the filesystem is read-only except %s and a private /tmp (empty at the start, gone at the end)", strings.Join(w, ", "))
	}
	b.WriteString("; a write anywhere else fails with \"Read-only file system\", so do not retry it: write inside the writable paths instead")
	if s.Network {
		b.WriteString(". The network is available.")
	} else {
		b.WriteString(". The network is off: connections to other machines, and to servers on this one, fail; downloads and package installs from the network do not work.")
	}
	return b.String()
}
