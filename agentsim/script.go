package agentsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskrt/taskrt/messages"
)

// defaultNoticeWait bounds a notices line's wait when it gives no timeout_ms.
const defaultNoticeWait = 10 * time.Second

// maxScriptDuration bounds every duration a script line gives: a sleep's ms and a
// notices wait's timeout_ms.
const maxScriptDuration = 24 * time.Hour

// maxScriptLine is the longest input line of a script, in bytes (4 MiB). A longer
// line is answered with an error and skipped; the script goes on.
const maxScriptLine = 4 << 20

// maxNoticeWait bounds a notices line's wait (a count of notices).
const maxNoticeWait = 1_000_000

// scriptLine is one decoded input line. Pointers tell a given field from an absent
// one: which fields a line may give depends on its op.
type scriptLine struct {
	Op        string
	Agent     *messages.AgentID
	Parent    *messages.AgentID
	Tool      *string
	Args      json.RawMessage
	MS        *int64
	Wait      *int64
	TimeoutMS *int64
	given     []string // the keys of the line, in input order
}

// scriptFields are the keys a line may have, with the ops that take each.
var scriptFields = map[string][]string{
	"op":         nil, // every op
	"agent":      {"register", "call", "notices", "dispose"},
	"parent":     {"register"},
	"tool":       {"call"},
	"args":       {"call"},
	"ms":         {"sleep"},
	"wait":       {"notices"},
	"timeout_ms": {"notices"},
}

// The output lines, one type per shape so that keys keep the documented order: op
// and the input's line number first, then the agent and tool the line named, then
// what the op returns.
type (
	agentOut struct {
		Op    string           `json:"op"`
		Line  int              `json:"line"`
		Agent messages.AgentID `json:"agent"`
	}
	callOut struct {
		Op      string           `json:"op"`
		Line    int              `json:"line"`
		Agent   messages.AgentID `json:"agent"`
		Tool    string           `json:"tool"`
		Text    string           `json:"text"`
		Data    any              `json:"data"`
		IsError bool             `json:"is_error"`
	}
	noticesOut struct {
		Op      string           `json:"op"`
		Line    int              `json:"line"`
		Agent   messages.AgentID `json:"agent"`
		Notices []string         `json:"notices"`
	}
	statsOut struct {
		Op   string `json:"op"`
		Line int    `json:"line"`
		Stats
	}
	sleepOut struct {
		Op   string `json:"op"`
		Line int    `json:"line"`
		MS   int64  `json:"ms"`
	}
	errOut struct {
		Op    string            `json:"op"`
		Line  int               `json:"line"`
		Agent *messages.AgentID `json:"agent,omitempty"`
		Tool  *string           `json:"tool,omitempty"`
		Error string            `json:"error"`
	}
)

// RunScript executes a JSON-lines script on a new Sim: it reads one JSON object per
// line from r, executes it, and writes one JSON object per line to w, in exactly
// this format (see README.md):
//
//	{"op":"register","agent":"a1"}                      → {"op":"register","line":1,"agent":"a1"}   optional "parent"
//	{"op":"call","agent":"a1","tool":"bash","args":{…}} → {"op":"call","line":2,"agent":"a1","tool":"bash","text":…,"data":…,"is_error":false}
//	{"op":"notices","agent":"a1"}                       → {"op":"notices","line":3,"agent":"a1","notices":[…]}
//	{"op":"dispose","agent":"a1"}                       → {"op":"dispose","line":4,"agent":"a1"}
//	{"op":"stats"}                                      → {"op":"stats","line":5,"live_tasks":0,"live_agents":0,"live_actors":1,"processes":0}
//	{"op":"sleep","ms":100}                             → {"op":"sleep","line":6,"ms":100}
//
// line is the input line's number (from 1, blank lines counted). A call's agent ""
// is the no-agent caller; data is null when the tool returned none. notices returns
// the notices injected since the previous notices line for that agent; with
// "wait":N it first blocks until N are pending, at most "timeout_ms" (default 10 s),
// and answers "timed out …" as an error when they did not come (the pending ones are
// returned by the next notices line). A line that cannot be executed (malformed
// JSON, an unknown op, a key that is unknown or does not apply to the op — keys are
// case-sensitive —, a value of the wrong type or out of range, a missing or unknown
// agent, an unknown tool, a line longer than 4 MiB) yields
// {"op":…,"line":N,"error":"…"}, with the agent and tool when the line named them,
// and the script goes on. Blank lines are skipped. Durations are at most 24 h.
//
// At the end of input, or when ctx ends, every agent still registered is disposed
// and the Sim is closed. The error is for reading, writing or closing, for ctx's end
// (the script was interrupted), and ErrNotQuiescent when anything was still live
// after the close — never for a bad line. When ctx ends while r is blocked in Read,
// RunScript returns without waiting for that Read: the goroutine that reads r ends
// when it returns, without reading further.
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

// inputLine is one line read from a script, or the end of the input.
type inputLine struct {
	n       int    // line number, from 1
	text    []byte // trimmed
	tooLong bool   // the line was longer than maxScriptLine; text is empty
	err     error  // a read error; the input ends after it
}

// readLines reads r line by line into lines until r ends or stop is closed, then
// closes lines. Each line is delivered whole, trimmed; one longer than
// maxScriptLine is read to its end and delivered as tooLong, without its text.
func readLines(r io.Reader, lines chan<- inputLine, stop <-chan struct{}) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		var (
			buf     []byte
			tooLong bool
			err     error
		)
		for {
			var part []byte
			part, err = br.ReadSlice('\n')
			if !tooLong {
				if len(buf)+len(bytes.TrimSuffix(part, []byte("\n"))) > maxScriptLine {
					tooLong, buf = true, nil
				} else {
					buf = append(buf, part...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err == io.EOF && len(buf) == 0 && !tooLong {
			return
		}
		l := inputLine{n: n, text: bytes.TrimSpace(buf), tooLong: tooLong}
		if err != nil && err != io.EOF {
			l.err = err
		}
		select {
		case lines <- l:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// runScript executes the script's lines on s (see RunScript) and leaves s open.
func (s *Sim) runScript(ctx context.Context, r io.Reader, w io.Writer) error {
	x := &scriptRun{sim: s, ctx: ctx, seen: map[messages.AgentID]int{}}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	lines, stop := make(chan inputLine), make(chan struct{})
	defer close(stop)
	go readLines(r, lines, stop)
	for {
		var l inputLine
		select {
		case <-ctx.Done():
			return fmt.Errorf("script interrupted: %w", context.Cause(ctx))
		case next, ok := <-lines:
			if !ok {
				return nil
			}
			l = next
		}
		if l.err != nil {
			return l.err
		}
		var out any
		switch {
		case l.tooLong:
			out = errOut{Op: "", Line: l.n, Error: fmt.Sprintf("line is longer than %d bytes (4 MiB); skipped", maxScriptLine)}
		case len(l.text) == 0:
			continue
		default:
			out = x.exec(l.n, l.text)
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
		// Flush per line: a script is a conversation, the reader may be waiting.
		if err := bw.Flush(); err != nil {
			return err
		}
	}
}

type scriptRun struct {
	sim  *Sim
	ctx  context.Context
	seen map[messages.AgentID]int // notices already returned, per agent
}

// exec executes one non-blank line, numbered n, and returns its output line.
func (x *scriptRun) exec(n int, raw []byte) any {
	l, err := parseLine(raw)
	if err != nil {
		return errOut{Op: l.Op, Line: n, Agent: l.Agent, Tool: l.Tool, Error: err.Error()}
	}
	fail := func(format string, a ...any) any {
		return errOut{Op: l.Op, Line: n, Agent: l.Agent, Tool: l.Tool, Error: fmt.Sprintf(format, a...)}
	}
	if l.Op == "" {
		return fail("missing op")
	}
	if _, known := opFields[l.Op]; !known {
		return fail("unknown op %q (want register, call, notices, dispose, stats or sleep)", truncateText(l.Op, 64))
	}
	for _, k := range l.given {
		if ops := scriptFields[k]; ops != nil && !slices.Contains(ops, l.Op) {
			return fail("field %q does not apply to op %q", k, l.Op)
		}
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
		var parent messages.AgentID
		if l.Parent != nil {
			parent = *l.Parent
		}
		if _, err := x.sim.Register(x.ctx, id, parent); err != nil {
			return fail("register %s: %v", id, err)
		}
		return agentOut{Op: "register", Line: n, Agent: id}
	case "call":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		if id != "" && !x.live(id) {
			return fail("unknown agent %q", id)
		}
		if l.Tool == nil || *l.Tool == "" {
			return fail("missing tool")
		}
		if _, ok := x.sim.set[*l.Tool]; !ok {
			return fail("unknown tool %q (known: %s)", truncateText(*l.Tool, 64), strings.Join(x.sim.set.Names(), ", "))
		}
		res := x.sim.Call(x.ctx, id, *l.Tool, l.Args)
		return callOut{Op: "call", Line: n, Agent: id, Tool: *l.Tool, Text: res.Text, Data: res.Data, IsError: res.IsError}
	case "notices":
		id, err := agent()
		if err != nil {
			return fail("%v", err)
		}
		sess := x.sim.Session(id)
		if sess == nil || !x.live(id) {
			return fail("unknown agent %q", id)
		}
		var wait int64
		if l.Wait != nil {
			wait = *l.Wait
		}
		switch {
		case wait < 0 || wait > maxNoticeWait:
			return fail("wait must be from 0 to %d notices", maxNoticeWait)
		case l.TimeoutMS != nil && wait == 0:
			return fail("timeout_ms needs a wait of at least 1")
		case l.TimeoutMS != nil && (*l.TimeoutMS < 1 || *l.TimeoutMS > maxScriptDuration.Milliseconds()):
			return fail("timeout_ms must be from 1 to %d (24 h)", maxScriptDuration.Milliseconds())
		}
		if wait > 0 {
			d := defaultNoticeWait
			if l.TimeoutMS != nil {
				d = time.Duration(*l.TimeoutMS) * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(x.ctx, d)
			err := sess.waitNotices(ctx, x.seen[id]+int(wait))
			cancel()
			switch {
			case x.ctx.Err() != nil:
				return fail("interrupted while waiting for notices: %v", context.Cause(x.ctx))
			case err != nil:
				pending := len(sess.noticeTexts()) - x.seen[id]
				return fail("timed out after %d ms: %d of the %d notices awaited arrived", d.Milliseconds(), pending, wait)
			}
		}
		all := sess.noticeTexts()
		fresh := all[min(x.seen[id], len(all)):]
		x.seen[id] = len(all)
		return noticesOut{Op: "notices", Line: n, Agent: id, Notices: append([]string{}, fresh...)}
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
		return agentOut{Op: "dispose", Line: n, Agent: id}
	case "stats":
		return statsOut{Op: "stats", Line: n, Stats: x.sim.stats()}
	case "sleep":
		if l.MS == nil {
			return fail("sleep needs ms")
		}
		if *l.MS < 0 || *l.MS > maxScriptDuration.Milliseconds() {
			return fail("ms must be from 0 to %d (24 h)", maxScriptDuration.Milliseconds())
		}
		t := time.NewTimer(time.Duration(*l.MS) * time.Millisecond)
		select {
		case <-t.C:
		case <-x.ctx.Done():
			t.Stop()
			return fail("interrupted while sleeping: %v", context.Cause(x.ctx))
		}
		return sleepOut{Op: "sleep", Line: n, MS: *l.MS}
	}
	panic("unreachable: every op in opFields is handled")
}

// opFields lists the known ops.
var opFields = map[string]bool{"register": true, "call": true, "notices": true, "dispose": true, "stats": true, "sleep": true}

// live reports whether id is an agent the Sim registered and has not disposed.
func (x *scriptRun) live(id messages.AgentID) bool { return x.sim.registered(id) }

// errMalformed marks a line that does not decode; its text is the reason.
var errMalformed = errors.New("malformed line")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, a...))
}

// parseLine decodes one line strictly: one JSON object, nothing after it, every key
// known (case-sensitively) and given once, every value of its field's type. The
// returned line holds what did decode even on error (its op, agent and tool, for the
// error line). Errors name the field in plain words; none shows Go types.
func parseLine(raw []byte) (scriptLine, error) {
	var l scriptLine
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return l, malformed("a line must be one JSON object")
		}
		return l, malformed("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if obj == nil {
		return l, malformed("a line must be one JSON object")
	}
	keys, err := topLevelKeys(raw)
	if err != nil {
		return l, malformed("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	l.given = keys
	// Decode the fields that name the line first, so that an error line can echo
	// them; then check the keys; then the rest.
	var errs []error
	str := func(name string) *string {
		v, ok := obj[name]
		if !ok {
			return nil
		}
		var s string
		if bytes.Equal(v, []byte("null")) || json.Unmarshal(v, &s) != nil {
			errs = append(errs, malformed("%s must be a string", name))
			return nil
		}
		return &s
	}
	if op := str("op"); op != nil {
		l.Op = *op
	}
	if a := str("agent"); a != nil {
		id := messages.AgentID(*a)
		l.Agent = &id
	}
	l.Tool = str("tool")
	seen := map[string]bool{}
	for _, k := range keys {
		if _, ok := scriptFields[k]; !ok {
			return l, malformed("unknown field %q", truncateText(k, 64))
		}
		if seen[k] {
			return l, malformed("field %q is given twice", k)
		}
		seen[k] = true
	}
	if p := str("parent"); p != nil {
		id := messages.AgentID(*p)
		l.Parent = &id
	}
	if v, ok := obj["args"]; ok {
		l.Args = v // the tool judges its own arguments
	}
	num := func(name string) *int64 {
		v, ok := obj[name]
		if !ok {
			return nil
		}
		n, err := parseInt(name, v)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		return &n
	}
	l.MS, l.Wait, l.TimeoutMS = num("ms"), num("wait"), num("timeout_ms")
	if len(errs) > 0 {
		return l, errs[0]
	}
	return l, nil
}

// topLevelKeys returns the keys of the JSON object raw, in order, duplicates kept.
func topLevelKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// parseInt reads a JSON number that is a whole number. Values beyond int64 saturate
// (the range checks reject them with their own message); fractions are malformed.
func parseInt(name string, v json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(v))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, malformed("%s must be a number", name)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, malformed("%s must be a number", name)
	case f != math.Trunc(f):
		return 0, malformed("%s must be a whole number", name)
	case f >= math.MaxInt64:
		return math.MaxInt64, nil
	case f <= math.MinInt64:
		return math.MinInt64, nil
	}
	return int64(f), nil
}

// truncateText cuts s to at most n runes for an error line, marking the cut.
func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
