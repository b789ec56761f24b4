package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskrt/taskrt/agentsim"
)

// syncBuffer is a bytes.Buffer safe for the renderer's ticker and observers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const tinyScenario = `{
  "name": "tiny",
  "models": {"m": {"steps": [
    {"call": {"tool": "bash", "args": {"command": "echo tiny", "run_in_background": true}, "save": "b"}},
    {"await_notices": 1, "call": {"tool": "task_output", "args": {"task_id": "${b}"}}},
    {"answer": "ok"}
  ]}},
  "agents": [{"id": "a1", "model": "m", "turns": ["go"]}],
  "expect": {"statuses": {"completed": 1}}
}`

func playRendered(t *testing.T, mode renderMode) string {
	t.Helper()
	sc, err := agentsim.ParseScenario(strings.NewReader(tinyScenario))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out syncBuffer
	r := newRenderer(&out, mode)
	r.header(sc)
	rep, err := agentsim.Play(ctx, sc, agentsim.WithObserver(r.observe))
	r.close()
	if err != nil {
		t.Fatal(err)
	}
	r.summary(rep)
	if len(rep.Failures) > 0 {
		t.Errorf("failures: %q", rep.Failures)
	}
	return out.String()
}

func TestRenderer(t *testing.T) {
	t.Run("plain lines and a summary", func(t *testing.T) {
		out := playRendered(t, renderPlain)
		for _, want := range []string{
			"agentsim · tiny\n",
			"a1         user          go\n",
			"a1         → bash        {\"command\":\"echo tiny\",\"run_in_background\":true}\n",
			"a1         ← task_output tiny\n",
			"a1         settled       bash-1 [status: completed, exit code: 0]\n",
			"a1         notice        background task bash-1 (bash: echo tiny) finished [status: completed, exit code: 0]",
			"a1         answer        ok\n",
			"a1         agent         disposed\n",
			"tasks        1 completed\n",
			"notices      1 delivered, 0 suppressed\n",
			"quiescence   live tasks 0, agents 0, actors 0, processes 0 — ok\n",
			"result       PASS: every expectation met\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "\033[") {
			t.Error("plain output contains terminal escapes")
		}
	})
	t.Run("live mode draws a status line", func(t *testing.T) {
		out := playRendered(t, renderLive)
		if !strings.Contains(out, "running: bash-1") || !strings.Contains(out, "\r\033[K") {
			t.Errorf("no status line in:\n%q", out)
		}
	})
	t.Run("json mode writes one object per line, then the summary", func(t *testing.T) {
		out := playRendered(t, renderJSON)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		types := map[string]int{}
		for _, l := range lines {
			var v struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			types[v.Type]++
		}
		for _, ty := range []string{"entry", "registered", "started", "settled", "disposed"} {
			if types[ty] == 0 {
				t.Errorf("no %s event", ty)
			}
		}
		var sum struct {
			Type       string         `json:"type"`
			Statuses   map[string]int `json:"statuses"`
			Quiescence agentsim.Stats `json:"quiescence"`
			Failures   []string       `json:"failures"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Type != "summary" || sum.Statuses["completed"] != 1 || sum.Quiescence != (agentsim.Stats{}) || len(sum.Failures) != 0 {
			t.Errorf("summary = %+v", sum)
		}
	})
}
