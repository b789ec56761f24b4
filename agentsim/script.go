package agentsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// DefaultNoticeWait bounds a notices line's wait when it gives no timeout_ms.
const DefaultNoticeWait = 10 * time.Second

// maxScriptLine bounds one input line of a script.
const maxScriptLine = 4 << 20

// scriptLine is one input line of a script. Every field but op is optional at the
// JSON level; each op checks what it needs.
type scriptLine struct {
	Op        string            `json:"op"`
	Agent     *messages.AgentID `json:"agent"`
	Parent    messages.AgentID  `json:"parent"`
	Tool      string            `json:"tool"`
	Args      json.RawMessage   `json:"args"`
	MS        *int              `json:"ms"`
	Wait      int               `json:"wait"`       // notices: block until this many are pending
	TimeoutMS int               `json:"timeout_ms"` // notices: bound for wait
}

// The output lines, one type per shape so that keys keep the documented order.
type (
	agentOut struct {
		Op    string           `json:"op"`
		Agent messages.AgentID `json:"agent"`
	}
	callOut struct {
		Op      string `json:"op"`
		Text    string `json:"text"`
		Data    any    `json:"data"`
		IsError bool   `json:"is_error"`
	}
	noticesOut struct {
		Op      string   `json:"op"`
		Notices []string `json:"notices"`
	}
	statsOut struct {
		Op string `json:"op"`
		Stats
	}
	sleepOut struct {
		Op string `json:"op"`
		MS int    `json:"ms"`
	}
	errOut struct {
		Op    string `json:"op"`
		Error string `json:"error"`
	}
)

// RunScript executes a JSON-lines script on a new Sim: it reads one JSON object per
// line from r, executes it, and writes one JSON object per line to w, in exactly
// this format (see README.md):
//
//	{"op":"register","agent":"a1"}                     → {"op":"register","agent":"a1"}   optional "parent"
//	{"op":"call","agent":"a1","tool":"bash","args":{…}} → {"op":"call","text":…,"data":…,"is_error":false}
//	{"op":"notices","agent":"a1"}                      → {"op":"notices","notices":[…]}
//	{"op":"dispose","agent":"a1"}                      → {"op":"dispose","agent":"a1"}
//	{"op":"stats"}                                     → {"op":"stats","live_tasks":0,"live_agents":0,"live_actors":1,"processes":0}
//	{"op":"sleep","ms":100}                            → {"op":"sleep","ms":100}
//
// A call's agent "" is the no-agent caller; data is null when the tool returned
// none. notices returns the notices injected since the previous notices line for
// that agent; with "wait":N it first blocks until N are pending (at most
// "timeout_ms", default 10 s). A line that cannot be executed (malformed JSON, an
// unknown op or field, a missing or unknown agent, an unknown tool) yields
// {"op":…,"error":"…"} and the script goes on. Blank lines are skipped.
//
// At the end of input every agent still registered is disposed and the Sim is
// closed. The error is for reading, writing or closing, never for a bad line.
func RunScript(ctx context.Context, r io.Reader, w io.Writer, opts ...Option) error {
	sim, err := New(opts...)
	if err != nil {
		return err
	}
	runErr := sim.runScript(ctx, r, w)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return errors.Join(runErr, sim.Close(closeCtx))
}

// runScript executes the script's lines on s (see RunScript) and leaves s open.
func (s *Sim) runScript(ctx context.Context, r io.Reader, w io.Writer) error {
	x := &scriptRun{sim: s, ctx: ctx, seen: map[messages.AgentID]int{}}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxScriptLine)
	var runErr error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := enc.Encode(x.exec(line)); err != nil {
			runErr = err
			break
		}
		// Flush per line: a script is a conversation, the reader may be waiting.
		if err := bw.Flush(); err != nil {
			runErr = err
			break
		}
	}
	if runErr == nil {
		runErr = sc.Err()
	}
	return runErr
}

type scriptRun struct {
	sim  *Sim
	ctx  context.Context
	seen map[messages.AgentID]int // notices already returned, per agent
}

func (x *scriptRun) exec(raw []byte) any {
	var l scriptLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return errOut{Op: opOf(raw), Error: "malformed line: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if dec.More() {
		return errOut{Op: l.Op, Error: "malformed line: data after the JSON object"}
	}
	fail := func(format string, a ...any) any {
		return errOut{Op: l.Op, Error: fmt.Sprintf(format, a...)}
	}
	agent := func() (messages.AgentID, error) {
		if l.Agent == nil {
			return "", errors.New("missing agent")
		}
		return *l.Agent, nil
	}
	switch l.Op {
	case "register":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		if _, err := x.sim.Register(x.ctx, id, l.Parent); err != nil {
			return fail("register %s: %v", id, err)
		}
		return agentOut{Op: "register", Agent: id}
	case "call":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		if id != "" && !x.live(id) {
			return fail("unknown agent %q", id)
		}
		if l.Tool == "" {
			return fail("missing tool")
		}
		if _, ok := x.sim.Tools()[l.Tool]; !ok {
			return fail("unknown tool %q (known: %s)", l.Tool, strings.Join(x.sim.Tools().Names(), ", "))
		}
		res := x.sim.Call(x.ctx, id, l.Tool, l.Args)
		return callOut{Op: "call", Text: res.Text, Data: res.Data, IsError: res.IsError}
	case "notices":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		sess := x.sim.Session(id)
		if sess == nil || !x.live(id) {
			return fail("unknown agent %q", id)
		}
		if l.Wait > 0 {
			d := DefaultNoticeWait
			if l.TimeoutMS > 0 {
				d = time.Duration(l.TimeoutMS) * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(x.ctx, d)
			_ = sess.WaitNotices(ctx, x.seen[id]+l.Wait) // on timeout, return what is there
			cancel()
		}
		all := sess.Notices()
		fresh := all[min(x.seen[id], len(all)):]
		x.seen[id] = len(all)
		return noticesOut{Op: "notices", Notices: append([]string{}, fresh...)}
	case "dispose":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		if !x.live(id) {
			return fail("unknown agent %q", id)
		}
		if err := x.sim.Dispose(x.ctx, id); err != nil {
			return fail("dispose %s: %v", id, err)
		}
		return agentOut{Op: "dispose", Agent: id}
	case "stats":
		return statsOut{Op: "stats", Stats: x.sim.Stats()}
	case "sleep":
		if l.MS == nil || *l.MS < 0 {
			return fail("sleep needs ms >= 0")
		}
		t := time.NewTimer(time.Duration(*l.MS) * time.Millisecond)
		select {
		case <-t.C:
		case <-x.ctx.Done():
			t.Stop()
			return fail("%v", x.ctx.Err())
		}
		return sleepOut{Op: "sleep", MS: *l.MS}
	case "":
		return fail("missing op")
	default:
		return fail("unknown op %q (want register, call, notices, dispose, stats or sleep)", l.Op)
	}
}

// live reports whether id is an agent the Sim registered and has not disposed.
func (x *scriptRun) live(id messages.AgentID) bool { return x.sim.registered(id) }

// opOf recovers the op of a line that failed to decode, when it has one.
func opOf(raw []byte) string {
	var probe struct {
		Op string `json:"op"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return ""
	}
	return probe.Op
}
