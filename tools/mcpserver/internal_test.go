//go:build linux

package mcpserver

import (
	"strings"
	"testing"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

func TestNoticeTaskID(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		want   messages.TaskID
		wantOK bool
	}{
		{"reads the id of the tools package's notice",
			tools.NoticeText(messages.Snapshot{ID: "bash-12", Kind: "bash", Label: "make test", Status: messages.Completed, Detail: "exit code: 0"}), "bash-12", true},
		{"a label with spaces does not matter",
			tools.NoticeText(messages.Snapshot{ID: "subagent-3", Kind: "subagent", Label: "a b (c)", Status: messages.Failed}), "subagent-3", true},
		{"another text names no task", "something else", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := noticeTaskID(tc.text)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("noticeTaskID(%q) = %q, %v; want %q, %v", tc.text, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCollector(t *testing.T) {
	t.Run("below the bound it keeps every byte, as one read of the whole output would", func(t *testing.T) {
		c := newCollector(64)
		for _, d := range []string{"one\ntw", "o\n", "", "three"} {
			c.add(d)
		}
		if got, want := c.String(), "one\ntwo\nthree"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("exactly at the bound nothing is left out", func(t *testing.T) {
		c := newCollector(8)
		c.add("1234")
		c.add("5678")
		if got, want := c.String(), "12345678"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("past the bound it keeps head and tail around a marker, cut at lines", func(t *testing.T) {
		c := newCollector(20)
		c.add("aaaa\nbbbb\n")     // 10
		c.add("cccc\ndddd\n")     // 20
		c.add("eeee\nffff\ngg\n") // 33: head 10, tail the last 10 from its first line start (8)
		want := "aaaa\nbbbb\n[... 15 bytes of output left out ...]\nffff\ngg\n"
		if got := c.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("no cut splits a rune", func(t *testing.T) {
		c := newCollector(10)
		c.add(strings.Repeat("é", 20)) // 40 bytes, no line break
		got := c.String()
		if !strings.HasPrefix(got, "éé") || !strings.HasSuffix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
			t.Errorf("got %q", got)
		}
		if !strings.Contains(got, "bytes of output left out") {
			t.Errorf("got %q, want a marker", got)
		}
	})
	t.Run("the latest line", func(t *testing.T) {
		tests := []struct {
			name   string
			deltas []string
			want   string
		}{
			{"none before any output", nil, ""},
			{"the last complete line", []string{"a\nb\n"}, "b"},
			{"the line being written", []string{"a\nhalf"}, "half"},
			{"a line split across reads", []string{"a\nfi", "rst\n"}, "first"},
			{"blank lines are skipped", []string{"a\n\n  \n"}, "a"},
			{"a progress bar's redraw", []string{"10%\r50%\r"}, "50%"},
			{"a long line is cut", []string{strings.Repeat("x", 300) + "\n"}, strings.Repeat("x", tools.MaxLabel-1) + "…"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				c := newCollector(1 << 10)
				for _, d := range tc.deltas {
					c.add(d)
				}
				if got := c.lastLine(); got != tc.want {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
	})
}

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
