package messages_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The package documentation promises that messages imports nothing but the
// standard library, so producers and embedders can depend on it without the actor
// runtime. `go list -deps` sees every package it pulls in, directly or not.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the package's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var got []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/taskrt/taskrt/messages" {
			got = append(got, p)
		}
	}
	if len(got) > 0 {
		t.Errorf("messages depends on %q; its documentation says it imports only the standard library", got)
	}
}
