package actors_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// inbox is an injector that records what it is given; with a gate, each injection
// waits until the test lets it through (let).
type inbox struct {
	mu   sync.Mutex
	got  []string
	gate chan struct{} // nil: never blocks
}

func (in *inbox) inject(ctx context.Context, text string) error {
	if in.gate != nil {
		select {
		case <-in.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	in.mu.Lock()
	in.got = append(in.got, text)
	in.mu.Unlock()
	return nil
}

// let lets n injections through a gated inbox.
func (in *inbox) let(n int) {
	for range n {
		in.gate <- struct{}{}
	}
}

func (in *inbox) texts() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.got...)
}

// watched starts a buffered (output-stream) fake task owned by a1, whose notices go
// to the returned inbox.
func watched(t *testing.T, rt *actors.Runtime, gated bool) (*fake, messages.TaskID, *inbox) {
	t.Helper()
	in := &inbox{}
	if gated {
		in.gate = make(chan struct{})
	}
	require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(in.inject)))
	f := newFake()
	f.Buffered()
	return f, start(t, rt, f.spec("bash", "a1", true)), in
}

func matched(id messages.TaskID, pattern string, lines ...string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("task %s output matched %s: %s", id, pattern, l)
	}
	return strings.Join(out, "\n")
}

// Every test here runs on testing/synctest's virtual clock: synctest.Wait returns
// once every goroutine of the runtime is blocked, so "no notice came" is a fact, not
// a guess, and timeouts take no real time.
func TestWatch(t *testing.T) {
	t.Run("each new matching line becomes a notice; other lines do not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, false)
			f.Emit("ERROR before the watch\n")
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			f.Emit("booting\nERROR db down\nready\n")
			synctest.Wait()
			assert.Equal(t, []string{matched(id, "ERROR", "ERROR db down")}, in.texts())
			f.Emit("ERROR disk ")
			synctest.Wait()
			assert.Len(t, in.texts(), 1, "an unfinished line is matched once it ends")
			f.Emit("full\n")
			synctest.Wait()
			assert.Equal(t, matched(id, "ERROR", "ERROR disk full"), in.texts()[1])
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("output that went by unscanned is counted in the next notice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			in := &inbox{}
			require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(in.inject)))
			f := newFake()
			f.Buffered(output.WithoutSpill(), output.WithMemory(1024, 1024))
			id := start(t, rt, f.spec("bash", "a1", true))
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			// One write past the head and the tail: the middle is dropped before the
			// watch scans it.
			f.Emit("ERROR first\n" + strings.Repeat("filler line\n", 1000) + "ERROR last\n")
			synctest.Wait()
			require.Len(t, in.texts(), 1)
			got := in.texts()[0]
			assert.True(t, strings.HasPrefix(got, matched(id, "ERROR", "ERROR first", "ERROR last")+"\n("), got)
			assert.Regexp(t, `\(\d+ bytes of output went by unscanned: the output dropped them first\)$`, got)
			f.Emit("ERROR again\n")
			synctest.Wait()
			assert.Equal(t, matched(id, "ERROR", "ERROR again"), in.texts()[1], "the gap is told once")
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("the watch consumes nothing: the model's reads are unchanged", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, false)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			f.Emit("one\nERROR two\nthree\n")
			synctest.Wait()
			require.Len(t, in.texts(), 1)
			r, err := rt.Tasks().Read(bg, id, "a1")
			require.NoError(t, err)
			assert.Equal(t, "one\nERROR two\nthree\n", r.Output)
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("lines that match while a notice is being delivered go out together in the next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, true)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			f.Emit("ERROR 1\n")
			synctest.Wait() // the first notice is in the injector
			for i := 2; i <= 9; i++ {
				f.Emit(fmt.Sprintf("ERROR %d\n", i))
			}
			synctest.Wait()
			in.let(2)
			synctest.Wait()
			assert.Equal(t, []string{
				matched(id, "ERROR", "ERROR 1"),
				matched(id, "ERROR", "ERROR 2", "ERROR 3", "ERROR 4", "ERROR 5", "ERROR 6") +
					"\n(3 more matching lines; read them with task_output)",
			}, in.texts())
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("at most max notices, then one closing notice, then none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, false)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{MaxNotices: 2}))
			for i := 1; i <= 4; i++ {
				f.Emit(fmt.Sprintf("ERROR %d\n", i))
				synctest.Wait()
			}
			assert.Equal(t, []string{
				matched(id, "ERROR", "ERROR 1"),
				matched(id, "ERROR", "ERROR 2"),
				"task " + string(id) + " watch on ERROR stopped: it sent its 2 notices (max_notices)",
			}, in.texts())
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("the timeout ends the watch with a closing notice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, false)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{Timeout: 5 * time.Second}))
			f.Emit("ERROR early\n")
			<-time.After(6 * time.Second) // virtual time
			synctest.Wait()
			f.Emit("ERROR late\n")
			synctest.Wait()
			assert.Equal(t, []string{
				matched(id, "ERROR", "ERROR early"),
				"task " + string(id) + " watch on ERROR stopped: its timeout of 5000 ms passed",
			}, in.texts())
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("settlement ends the watch silently; its last notices come before the completion notice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			rec := record(rt)
			f, id, in := watched(t, rt, true)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			f.Emit("ERROR a\n")
			synctest.Wait() // "ERROR a" is in the injector
			f.Emit("ERROR b (no newline: the task ends here)")
			f.Finish(messages.Outcome{Status: messages.Completed})
			assert.Equal(t, id, rec.next(t).ID)
			notified := make(chan bool, 1)
			go func() {
				ok, err := rt.Tasks().Notify(bg, id, "DONE")
				assert.NoError(t, err)
				notified <- ok
			}()
			synctest.Wait()
			select {
			case <-notified:
				t.Fatal("the completion notice went out while a watch notice was still being delivered")
			default:
			}
			in.let(3) // ERROR a, ERROR b, DONE
			assert.True(t, <-notified)
			synctest.Wait()
			assert.Equal(t, []string{
				matched(id, "ERROR", "ERROR a"),
				matched(id, "ERROR", "ERROR b (no newline: the task ends here)"),
				"DONE",
			}, in.texts(), "no closing notice at settlement, nothing after the completion notice")
		})
	})
	t.Run("several watches on one task each notify", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			f, id, in := watched(t, rt, false)
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}))
			require.NoError(t, rt.Tasks().Watch(bg, id, "a1", `WARN|ERROR`, actors.WatchOptions{}))
			f.Emit("WARN slow\nERROR down\n")
			synctest.Wait()
			assert.ElementsMatch(t, []string{
				matched(id, "ERROR", "ERROR down"),
				matched(id, "WARN|ERROR", "WARN slow", "ERROR down"),
			}, in.texts())
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
	t.Run("an ancestor may watch a sub-agent's task; the notices go to the task's owner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newRT(t)
			parent, child := &inbox{}, &inbox{}
			require.NoError(t, rt.Agents().Register(bg, "p", actors.WithInjector(parent.inject)))
			require.NoError(t, rt.Agents().Register(bg, "c", actors.WithParent("p"), actors.WithInjector(child.inject)))
			f := newFake()
			f.Buffered()
			id := start(t, rt, f.spec("bash", "c", true))
			require.NoError(t, rt.Tasks().Watch(bg, id, "p", "ERROR", actors.WatchOptions{}))
			f.Emit("ERROR x\n")
			synctest.Wait()
			assert.Empty(t, parent.texts())
			assert.Equal(t, []string{matched(id, "ERROR", "ERROR x")}, child.texts())
			f.Finish(messages.Outcome{Status: messages.Completed})
		})
	})
}

func TestWatchRefusals(t *testing.T) {
	rt := newRT(t, actors.WithWatchLimit(2))
	fw, id, _ := watched(t, rt, false)
	register(t, rt, "other")
	final := newFake()
	finalID := start(t, rt, final.spec("job", "a1", false))
	unowned := newFake()
	unowned.Buffered()
	unownedID := start(t, rt, unowned.spec("bash", "", true))
	settled := newFake()
	settled.Buffered()
	settledID := start(t, rt, settled.spec("bash", "a1", true))
	settled.Finish(messages.Outcome{Status: messages.Completed})
	settleWait(t, rt, settledID, "a1")
	tests := []struct {
		name    string
		id      messages.TaskID
		caller  messages.AgentID
		pattern string
		opts    actors.WatchOptions
		want    error
	}{
		{"an unknown id is not found", "bash-99", "a1", "x", actors.WatchOptions{}, messages.ErrTaskNotFound},
		{"a foreign caller gets not-found", id, "other", "x", actors.WatchOptions{}, messages.ErrTaskNotFound},
		{"the no-agent caller gets not-found for an owned task", id, "", "x", actors.WatchOptions{}, messages.ErrTaskNotFound},
		{"an unowned task has no session to notify", unownedID, "", "x", actors.WatchOptions{}, messages.ErrInvalidArgument},
		{"a settled task has no new output", settledID, "a1", "x", actors.WatchOptions{}, messages.ErrTaskEnded},
		{"a final-output task has no output stream", finalID, "a1", "x", actors.WatchOptions{}, messages.ErrNoOutputStream},
		{"a pattern that does not compile", id, "a1", "(", actors.WatchOptions{}, messages.ErrInvalidArgument},
		{"an empty pattern", id, "a1", "", actors.WatchOptions{}, messages.ErrInvalidArgument},
		{"negative max notices", id, "a1", "x", actors.WatchOptions{MaxNotices: -1}, messages.ErrInvalidArgument},
		{"max notices over the bound", id, "a1", "x", actors.WatchOptions{MaxNotices: actors.MaxWatchNotices + 1}, messages.ErrInvalidArgument},
		{"a negative timeout", id, "a1", "x", actors.WatchOptions{Timeout: -time.Second}, messages.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := rt.Tasks().Watch(bg, tc.id, tc.caller, tc.pattern, tc.opts)
			require.ErrorIs(t, err, tc.want)
			if tc.want == messages.ErrTaskNotFound {
				assert.Equal(t, "task not found: "+string(tc.id), err.Error(), "no existence leak")
			}
		})
	}
	fw.Finish(messages.Outcome{Status: messages.Completed})
	final.Finish(messages.Outcome{Status: messages.Completed})
	unowned.Finish(messages.Outcome{Status: messages.Completed})
}

func TestWatchLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRT(t, actors.WithWatchLimit(2))
		f, id, _ := watched(t, rt, false)
		require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "a", actors.WatchOptions{}))
		require.NoError(t, rt.Tasks().Watch(bg, id, "a1", "b", actors.WatchOptions{}))
		g := newFake()
		g.Buffered()
		gid := start(t, rt, g.spec("bash", "a1", true))
		err := rt.Tasks().Watch(bg, gid, "a1", "c", actors.WatchOptions{})
		require.ErrorIs(t, err, messages.ErrWatchLimit, "the bound is per owner, across its tasks")
		assert.Equal(t, "watch limit reached for the owner of bash-2 (limit: 2)", err.Error())
		f.Finish(messages.Outcome{Status: messages.Completed})
		synctest.Wait() // the settled task's watches ended
		require.NoError(t, rt.Tasks().Watch(bg, gid, "a1", "c", actors.WatchOptions{}), "a settled task's watches free their slots")
		g.Finish(messages.Outcome{Status: messages.Completed})
	})
}
