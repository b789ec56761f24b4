package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/taskrt/taskrt/agentsim"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

// renderMode selects how a renderer writes.
type renderMode int

// The render modes.
const (
	// renderPlain writes one readable line per event, nothing else: for logs, pipes
	// and files (-plain).
	renderPlain renderMode = iota
	// renderLive is renderPlain plus a status line (elapsed time, running tasks)
	// redrawn in place below the transcript: for terminals.
	renderLive
	// renderJSON writes every event as one JSON object per line, then the report
	// (-json).
	renderJSON
)

// renderer writes a Sim's events as they happen, and a report at the end: what
// `agentsim run` prints. Pass its observe method to agentsim.WithObserver. It is safe
// for concurrent use.
type renderer struct {
	mode renderMode

	mu      sync.Mutex // protects w, running, shown, start
	w       io.Writer
	running []messages.TaskID
	shown   bool // the status line is on screen
	start   time.Time

	stop chan struct{}
	wg   sync.WaitGroup // the status line ticker
}

// newRenderer returns a renderer writing to w. In renderLive mode it starts a ticker
// that redraws the status line; close stops it.
func newRenderer(w io.Writer, mode renderMode) *renderer {
	r := &renderer{mode: mode, w: w, start: time.Now(), stop: make(chan struct{})}
	if mode == renderLive {
		r.wg.Go(r.tick)
	}
	return r
}

func (r *renderer) tick() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			r.drawStatus()
			r.mu.Unlock()
		}
	}
}

// close stops the status line ticker and clears the status line.
func (r *renderer) close() {
	select {
	case <-r.stop:
		return
	default:
		close(r.stop)
	}
	r.wg.Wait()
	r.mu.Lock()
	r.clearStatus()
	r.mu.Unlock()
}

// header writes the scenario's title (text modes only).
func (r *renderer) header(sc *agentsim.Scenario) {
	if r.mode == renderJSON {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearStatus()
	fmt.Fprintf(r.w, "agentsim · %s\n", sc.Name)
	if sc.Description != "" {
		fmt.Fprintf(r.w, "%s\n", sc.Description)
	}
	fmt.Fprintln(r.w)
}

// observe renders one event.
func (r *renderer) observe(e agentsim.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Type {
	case "started":
		r.running = append(r.running, e.Task.ID)
	case "settled":
		r.running = slices.DeleteFunc(r.running, func(id messages.TaskID) bool { return id == e.Task.ID })
	}
	if r.mode == renderJSON {
		b, err := json.Marshal(e)
		if err == nil {
			r.w.Write(append(b, '\n'))
		}
		return
	}
	what, text := describe(e)
	if what == "" {
		r.drawStatus()
		return
	}
	r.clearStatus()
	agent := string(e.Agent)
	if agent == "" {
		agent = "·"
	}
	prefix := fmt.Sprintf("%6.2fs  %-10s %-13s ", e.Elapsed, agent, what)
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix))
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(r.w, "%s%s\n", prefix, clip(l, 100))
		} else {
			fmt.Fprintf(r.w, "%s%s\n", indent, clip(l, 100))
		}
	}
	r.drawStatus()
}

// describe returns an event's column label and text; "" = not shown.
func describe(e agentsim.Event) (string, string) {
	switch e.Type {
	case "registered":
		if e.Parent != "" {
			return "agent", "registered (child of " + string(e.Parent) + ")"
		}
		return "agent", "registered"
	case "disposed":
		return "agent", "disposed"
	case "settled":
		t := e.Task
		line := fmt.Sprintf("%s %s", t.ID, tools.StatusLine(messages.Snapshot{Status: t.Status, Detail: t.Detail}))
		if t.Reported {
			line += " (reported)"
		}
		return "settled", line
	case "entry":
		en := e.Entry
		switch en.Kind {
		case "user":
			return "user", en.Text
		case "assistant":
			if !en.Final {
				return "says", en.Text
			}
			text := en.Text
			if en.Stop != "completed" {
				stop := string(en.Stop)
				if en.Detail != "" {
					stop += ": " + en.Detail
				}
				text = strings.TrimSpace(text + "\n[" + stop + "]")
			}
			return "answer", text
		case "tool_call":
			return "→ " + en.Tool, string(en.Args)
		case "tool_result":
			label := "← " + en.Tool
			if en.IsError {
				label = "✗ " + en.Tool
			}
			return label, en.Text
		case "notice":
			return "notice", en.Text
		}
	}
	return "", ""
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// drawStatus redraws the status line (live mode, while tasks run). Called with r.mu
// held.
func (r *renderer) drawStatus() {
	if r.mode != renderLive {
		return
	}
	if len(r.running) == 0 {
		r.clearStatus()
		return
	}
	ids := make([]string, len(r.running))
	for i, id := range r.running {
		ids[i] = string(id)
	}
	line := fmt.Sprintf("⏵ %.1fs · running: %s", time.Since(r.start).Seconds(), strings.Join(ids, " "))
	// One screen line at most: a wrapped status line could not be erased in place.
	fmt.Fprintf(r.w, "\r\033[K\033[2m%s\033[0m", clip(line, 78))
	r.shown = true
}

func (r *renderer) clearStatus() {
	if r.shown {
		fmt.Fprint(r.w, "\r\033[K")
		r.shown = false
	}
}

// summary writes the report: tasks by final status, notices, quiescence, model
// calls, and the expectations' verdict.
func (r *renderer) summary(rep *agentsim.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearStatus()
	if r.mode == renderJSON {
		b, err := json.Marshal(struct {
			Type string `json:"type"`
			*agentsim.Report
		}{"summary", rep})
		if err == nil {
			r.w.Write(append(b, '\n'))
		}
		return
	}
	w := r.w
	fmt.Fprintln(w)
	fmt.Fprintln(w, "── summary ──────────────────────────────────────────────")
	var counts []string
	for _, s := range []messages.Status{messages.Completed, messages.Killed, messages.Failed} {
		if n := rep.Statuses[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	fmt.Fprintf(w, "tasks        %s\n", strings.Join(counts, ", "))
	for _, t := range rep.Tasks {
		owner := string(t.Owner)
		if owner == "" {
			owner = "(unowned)"
		}
		fmt.Fprintf(w, "             %-12s %-10s %-26s %s\n", t.ID, owner,
			strings.TrimSuffix(strings.TrimPrefix(tools.StatusLine(messages.Snapshot{Status: t.Status, Detail: t.Detail}), "[status: "), "]"),
			clip(tools.Label(t.Label), 40))
	}
	fmt.Fprintf(w, "notices      %d delivered, %d suppressed", rep.Notices.Delivered, rep.Notices.Suppressed)
	if rep.Notices.Failed > 0 {
		fmt.Fprintf(w, ", %d failed", rep.Notices.Failed)
	}
	fmt.Fprintln(w)
	q := rep.Quiescence
	verdict := "ok"
	if q != (agentsim.Stats{}) {
		verdict = "NOT QUIESCENT"
	}
	fmt.Fprintf(w, "quiescence   live tasks %d, agents %d, actors %d, processes %d — %s\n",
		q.LiveTasks, q.LiveAgents, q.LiveActors, q.Processes, verdict)
	var calls []string
	for _, name := range sortedKeys(rep.ModelCalls) {
		calls = append(calls, fmt.Sprintf("%s %d", name, rep.ModelCalls[name]))
	}
	sort.Strings(calls)
	fmt.Fprintf(w, "model calls  %s\n", strings.Join(calls, ", "))
	fmt.Fprintf(w, "elapsed      %.2fs\n", rep.Elapsed)
	if rep.Containment != "" {
		fmt.Fprintf(w, "containment  %s\n", rep.Containment)
	}
	if rep.Sandbox != "" {
		fmt.Fprintf(w, "sandbox      %s\n", rep.Sandbox)
	}
	if len(rep.Failures) == 0 {
		fmt.Fprintln(w, "result       PASS: every expectation met")
		return
	}
	fmt.Fprintf(w, "result       FAIL: %d unmet expectations\n", len(rep.Failures))
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "             - %s\n", f)
	}
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
