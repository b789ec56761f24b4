//go:build linux

package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools"
)

// bashCall is the JSON arguments of a bash call running command.
func bashCall(t *testing.T, command string, background bool) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(tools.BashArgs{Command: command, RunInBackground: background})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A command past the kernel's 128 KiB argument limit runs; one
// past the 1 MiB cap, or with a NUL byte, is a tool error of one short line that
// says why and does not repeat the command.
func TestBashCommandSizes(t *testing.T) {
	p := newProducer(t)
	e := newEnv(t)
	b := newBashTool(t, e.rt, p)
	if err := e.rt.Agents().Register(bg, "a1"); err != nil {
		t.Fatal(err)
	}
	big := "#" + strings.Repeat("x", 300<<10) + "\necho done"

	t.Run("a 300 KiB command runs in the foreground", func(t *testing.T) {
		got := b.Call(bg, "", bashCall(t, big, false))
		if want := (tools.Result{Text: lines("done", "[status: completed, exit code: 0]")}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("a 300 KiB command runs in the background under its first line", func(t *testing.T) {
		got := b.Call(bg, "a1", bashCall(t, "echo first\n"+big, true))
		if got.IsError || !strings.HasPrefix(got.Text, "started background task bash-1 (bash: echo first …).") {
			t.Fatalf("got %+v", got)
		}
	})
	for _, tc := range []struct {
		name, command, want string
	}{
		{"a command over the cap names the cap", strings.Repeat("y", 2<<20), "bash: command too long: 2097152 bytes, over the cap of 1048576 bytes (1 MiB)"},
		{"a single-line command over the cap names the cap in the background too", "echo " + strings.Repeat("z", 2<<20), "bash: command too long: 2097157 bytes, over the cap of 1048576 bytes (1 MiB)"},
		{"a NUL byte is named", "echo a\x00b", "bash: command contains a NUL byte (at byte 6)"},
	} {
		for _, background := range []bool{false, true} {
			name := tc.name + " (foreground)"
			if background {
				name = tc.name + " (background)"
			}
			t.Run(name, func(t *testing.T) {
				got := b.Call(bg, "a1", bashCall(t, tc.command, background))
				if !got.IsError || !strings.HasSuffix(got.Text, tc.want) {
					t.Errorf("got %+v, want the tool error %q", got, tc.want)
				}
				if strings.Contains(got.Text, "\n") || len([]rune(got.Text)) > 200 {
					t.Errorf("the error is not one line of at most 200 characters: %d characters", len([]rune(got.Text)))
				}
			})
		}
	}
}

// Whatever the producer's error says, the bash tool's error is one line of at most
// 200 characters: here a shell path of 300 characters that cannot run.
func TestBashErrorsAreOneShortLine(t *testing.T) {
	p := bash.New(bash.WithShell("/nonexistent/" + strings.Repeat("s", 300)))
	e := newEnv(t)
	b := newBashTool(t, e.rt, p)
	got := b.Call(bg, "", bashCall(t, "echo hi", false))
	if !got.IsError || !strings.HasPrefix(got.Text, "bash: start \"echo hi\": ") {
		t.Fatalf("got %+v", got)
	}
	if n := len([]rune(got.Text)); n > 200 || strings.Contains(got.Text, "\n") {
		t.Errorf("the error is not one line of at most 200 characters: %d characters", n)
	}
}
