package tools

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

// This file holds every model-facing string the task tools build from runtime state.
// The strings are a contract with the prompts written against them; golden tests pin
// each one.

// StatusLine renders a snapshot's status as the line that ends every task_output
// response: "[status: running]", "[status: completed, exit code: 0]",
// "[status: killed, signal: SIGTERM]", "[status: failed, max-tokens]" — the generic
// status, then the producer's detail when it has one.
func StatusLine(s messages.Snapshot) string {
	if s.OutputFull {
		return statusLine(s.Status, joinDetail(outputFullNote, s.Detail))
	}
	return statusLine(s.Status, s.Detail)
}

// outputFullNote is how a task whose work waits for a read is shown: "[status:
// running, output full]", "bash-1 [bash] running, output full — …".
const outputFullNote = "output full"

// joinDetail joins two parts of a status detail, either of which may be empty.
func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ", " + b
}

// statusWord is a task's status as task_list shows it: "running", or "running,
// output full" while its work waits for a read.
func statusWord(s messages.Snapshot) string {
	if s.OutputFull {
		return string(s.Status) + ", " + outputFullNote
	}
	return string(s.Status)
}

func statusLine(st messages.Status, detail string) string {
	if d := oneLine(detail); d != "" {
		return fmt.Sprintf("[status: %s, %s]", st, d)
	}
	return fmt.Sprintf("[status: %s]", st)
}

// noticeText is the completion notice injected into the owning agent's session when
// an unreported task settles:
//
//	background task bash-1 (bash: make test) finished [status: completed, exit code: 0]. Read its output with task_output.
func noticeText(s messages.Snapshot) string {
	return fmt.Sprintf("background task %s (%s: %s) finished %s. Read its output with task_output.",
		s.ID, s.Kind, Label(s.Label), StatusLine(s))
}

// listLine is one task_list line: "<id> [<kind>] <status> — <label>", and for a
// task of one of the caller's sub-agents (a descendant agent) its owner:
// "bash-4 [bash] running — npm run dev (sub-agent a1/sub-1)".
func listLine(s messages.Snapshot, caller messages.AgentID) string {
	line := fmt.Sprintf("%s [%s] %s — %s", s.ID, s.Kind, statusWord(s), Label(s.Label))
	if s.Owner != "" && s.Owner != caller {
		line += fmt.Sprintf(" (sub-agent %s)", truncate(oneLine(string(s.Owner)), 128))
	}
	return line
}

// untilLine says why a task_output with until returned: "[matched: listening on
// :8080]", "[no match before the task ended]", "[no match within 30000 ms]", "[no
// match before the output filled: call again to read on]".
func untilLine(r messages.UntilResult, timeout time.Duration) string {
	switch r.Reason {
	case messages.UntilMatched:
		return "[matched: " + truncate(oneLine(r.Match), 200) + "]"
	case messages.UntilEnded:
		return "[no match before the task ended]"
	case messages.UntilFull:
		return "[no match before the output filled: the command waits for your reads; call again to read on]"
	default:
		return fmt.Sprintf("[no match within %d ms]", timeout.Milliseconds())
	}
}

// untilProblem is the one-line reason a pattern was refused.
func untilProblem(pattern string, err error) string {
	if pattern == "" {
		return "it is empty"
	}
	return truncate(oneLine(strings.TrimPrefix(err.Error(), "error parsing regexp: ")), 120)
}

// noTasks is task_list's answer when the caller sees no task.
const noTasks = "(no background tasks)"

// olderNotShownText is task_list's closing line counting the evicted tasks it left
// out: "(+212 older finished tasks not shown)".
func olderNotShownText(n int) string {
	if n == 1 {
		return "(+1 older finished task not shown)"
	}
	return fmt.Sprintf("(+%d older finished tasks not shown)", n)
}

// evictedText is task_output's line for an evicted task, before its status line.
func evictedText(retention int) string {
	if retention == 0 {
		return "(output no longer kept: finished tasks do not keep their output here)"
	}
	return fmt.Sprintf("(output no longer kept: only the %d most recent finished tasks keep their output)", retention)
}

// startedText is the readable half of a background start's result.
func startedText(id messages.TaskID, kind, label string) string {
	return fmt.Sprintf("started background task %s (%s: %s). You will be notified when it finishes; read its output with task_output.",
		id, kind, Label(label))
}

// duplicateText is a keyed start's answer when its key names a task already started.
func duplicateText(id messages.TaskID, key, status string) string {
	return fmt.Sprintf("background task %s was already started with key %q (status: %s); no new task was started. Read its output with task_output.",
		id, truncate(oneLine(key), 64), status)
}

// startedUnownedText is startedText for the no-agent caller: an unowned task has no
// session to notify, so the text promises no notice.
func startedUnownedText(id messages.TaskID, kind, label string) string {
	return fmt.Sprintf("started background task %s (%s: %s). No completion notice will follow; read its output with task_output.",
		id, kind, Label(label))
}

// killRequestedText is task_kill's answer when the cancellation was accepted.
func killRequestedText(id messages.TaskID) string {
	return fmt.Sprintf("requested cancellation of task %s", id)
}

// clampedText is the line task_output adds before the status line when it clamped
// the requested wait.
func clampedText(maxMS int64) string { return fmt.Sprintf("(timeout_ms clamped to %d)", maxMS) }

// notFoundText is the single answer for an unknown id and for a task the caller may
// not reach, in every tool: the two must be indistinguishable.
func notFoundText(id string) string { return "task not found: " + truncate(oneLine(id), 128) }

// maxLabel is the longest label, in runes, that the tools print; longer labels are
// cut and end with "…".
const maxLabel = 200

// Label renders a task label for one line of model-facing text: line breaks become
// spaces and labels longer than maxLabel runes are cut, so that a multi-line command
// never breaks the one-line-per-task shape of task_list or a notice.
func Label(l string) string { return truncate(oneLine(l), maxLabel) }

// oneLine replaces line breaks (CR, LF, CRLF) with single spaces and trims the ends.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return strings.TrimSpace(s)
	}
	s = strings.ReplaceAll(s, "\r\n", " ")
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	return strings.TrimSpace(s)
}

// truncate cuts s to at most n runes, marking a cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// joinLines joins the non-empty parts of a response, one per line. A part that
// already ends in a newline is not given a second one.
func joinLines(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		b.WriteString(p)
		if !strings.HasSuffix(p, "\n") {
			b.WriteByte('\n')
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// maxErrorText is the longest reason a tool error gives: one line of about 200
// characters, whatever the input it echoes (an id, a pattern, a command).
const maxErrorText = 200

// errResult is a tool error with a one-line reason of at most maxErrorText
// characters, Go's context errors put in the tools' words (see interrupt.go).
func errResult(err error) Result {
	return Result{Text: truncate(oneLine(inOwnWords(err.Error())), maxErrorText), IsError: true}
}

// contained runs a tool's call through contain.Call: a panic in it (a bug) becomes
// the tool error "<name> failed: internal error: <value>", never a crash of the
// embedder's agent loop.
func contained(name string, call func() Result) Result {
	res, err := contain.Value(name, func() (Result, error) { return call(), nil })
	var p *messages.PanicError
	if errors.As(err, &p) {
		return Result{Text: fmt.Sprintf("%s failed: internal error: %s", name, oneLine(fmt.Sprint(p.Value))), IsError: true}
	}
	return res
}

// startErrResult is the tool error of a background start that failed. The runtime's
// errors state facts; this is where they get the advice a model needs to get on:
//
//	background tasks unavailable: no control surface is attached (load the task tools)
//	background task limit reached for this owner (limit: 10); use task_kill to stop an unneeded task, wait for it to finish, then retry
//	background task limit reached for this owner (limit: 10; 2 stopping); the 2 stopping tasks free their slots when they exit: wait for them with task_output (wait: true), or use task_kill to stop another task, then retry
func startErrResult(err error) Result {
	var limit *messages.LimitError
	switch {
	case errors.Is(err, messages.ErrNoSurface):
		return Result{Text: messages.ErrNoSurface.Error() + " (load the task tools)", IsError: true}
	case errors.As(err, &limit) && limit.Stopping == 0:
		return Result{Text: limit.Error() + "; use task_kill to stop an unneeded task, wait for it to finish, then retry", IsError: true}
	case errors.As(err, &limit):
		which := "the stopping task frees its slot when it exits: wait for it"
		if limit.Stopping > 1 {
			which = fmt.Sprintf("the %d stopping tasks free their slots when they exit: wait for them", limit.Stopping)
		}
		return Result{Text: limit.Error() + "; " + which + " with task_output (wait: true), or use task_kill to stop another task, then retry", IsError: true}
	}
	return errResult(err)
}

// taskErrResult maps a runtime error about the task id to its tool error: the
// not-found line for unknown and foreign ids alike, the error's own text otherwise.
func taskErrResult(id string, err error) Result {
	if errors.Is(err, messages.ErrTaskNotFound) {
		return Result{Text: notFoundText(id), IsError: true}
	}
	return errResult(err)
}
