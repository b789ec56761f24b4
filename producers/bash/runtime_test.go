//go:build linux

package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// Interactive bash tasks through the runtime: Tasks.Input reaches the command, and
// their output — a producers/output.Buffer handed over as Hooks.Output — answers
// ReadUntil and Peek.

// newRuntime is a runtime with a control surface, closed when the test ends.
func newRuntime(t *testing.T) *actors.Runtime {
	t.Helper()
	rt, err := actors.NewRuntime()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
		defer cancel()
		require.NoError(t, rt.Close(ctx))
	})
	t.Cleanup(rt.Tasks().AttachSurface("bash test"))
	return rt
}

// until is ReadUntil with the test's bound, requiring a match.
func until(t *testing.T, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID, pattern string) messages.UntilResult {
	t.Helper()
	r, err := rt.Tasks().ReadUntil(context.Background(), id, caller, pattern, settleLimit)
	require.NoError(t, err)
	require.Equal(t, messages.UntilMatched, r.Reason, "ReadUntil %q: got %q so far, status %s", pattern, r.Output, r.Snapshot.Status)
	return r
}

// settled waits for id to settle and returns its snapshot.
func settled(t *testing.T, rt *actors.Runtime, id messages.TaskID, caller messages.AgentID) messages.Snapshot {
	t.Helper()
	s, err := rt.Tasks().Wait(context.Background(), id, caller, settleLimit)
	require.NoError(t, err)
	require.True(t, s.Status.Terminal(), "task did not settle within %s", settleLimit)
	return s
}

func TestRuntimeReadsInteractiveTasksWithReadUntilAndPeek(t *testing.T) {
	ctx := context.Background()
	t.Run("pipe", func(t *testing.T) {
		p := newTestProducer(t)
		rt := newRuntime(t)
		id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: `while read -r l; do echo "got $l"; done`, Stdin: StdinPipe}))
		require.NoError(t, err)

		require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("one\n"), false))
		r := until(t, rt, id, "", `got \w+`)
		assert.Equal(t, "got one\n", r.Output)
		assert.Equal(t, "got one", r.Match)
		require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("two\nthree\n"), false))
		r = until(t, rt, id, "", `got three`)
		assert.Equal(t, "got two\ngot three\n", r.Output, "consumed through the matching line")

		pk, err := rt.Tasks().Peek(ctx, id, "", 0, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, "got one\ngot two\ngot three\n", string(pk.Data), "an observer read from offset 0 sees everything")
		assert.Equal(t, int64(len(pk.Data)), pk.Next)
		assert.Zero(t, pk.Missed)
		pk, err = rt.Tasks().Peek(ctx, id, "", 8, 7)
		require.NoError(t, err)
		assert.Equal(t, "got two", string(pk.Data), "from an offset, bounded")
		assert.Equal(t, int64(15), pk.Next)

		read, err := rt.Tasks().Read(ctx, id, "")
		require.NoError(t, err)
		assert.Empty(t, read.Output, "Peek consumed nothing and ReadUntil everything it returned")
		require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("four\n"), true))
		s := settled(t, rt, id, "")
		assert.Equal(t, "exit code: 0", s.Detail)
		read, err = rt.Tasks().Read(ctx, id, "")
		require.NoError(t, err)
		assert.Equal(t, "got four\n", read.Output)
	})
	t.Run("tty", func(t *testing.T) {
		p := newTestProducer(t)
		rt := newRuntime(t)
		id, err := rt.Tasks().Start(ctx, p.Spec("", Command{
			Command: `read -r -p "Name? " n; echo "hello $n"; read -r -p "Again? " m; echo "bye $m"`, Stdin: StdinTTY}))
		require.NoError(t, err)

		r := until(t, rt, id, "", `Name\? `)
		assert.Equal(t, "Name? ", r.Output, "a prompt matches before its line ends")
		require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("bob\n"), false))
		r = until(t, rt, id, "", `hello \w+`)
		assert.Equal(t, "bob\r\nhello bob\r\n", r.Output, "the terminal's echo, then the answer")
		until(t, rt, id, "", `Again\? `)

		pk, err := rt.Tasks().Peek(ctx, id, "", 0, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, "Name? bob\r\nhello bob\r\nAgain? ", string(pk.Data))
		require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("x\n"), false))
		assert.Equal(t, "exit code: 0", settled(t, rt, id, "").Detail)
		read, err := rt.Tasks().Read(ctx, id, "")
		require.NoError(t, err)
		assert.Equal(t, "x\r\nbye x\r\n", read.Output)
	})
}

func TestRuntimeInputErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("a task without stdin takes no input", func(t *testing.T) {
		p := newTestProducer(t)
		rt := newRuntime(t)
		id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: "echo ready; sleep 1000"}))
		require.NoError(t, err)
		assert.ErrorIs(t, rt.Tasks().Input(ctx, id, "", []byte("x"), false), messages.ErrNoInput)
		_, _, err = rt.Tasks().Kill(ctx, id, "", "done")
		require.NoError(t, err)
		settled(t, rt, id, "")
	})
	for _, mode := range interactiveModes {
		t.Run("input to an ended "+mode.String()+" task names its status", func(t *testing.T) {
			p := newTestProducer(t)
			rt := newRuntime(t)
			id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: "exit 3", Stdin: mode}))
			require.NoError(t, err)
			settled(t, rt, id, "")
			err = rt.Tasks().Input(ctx, id, "", []byte("late\n"), false)
			require.ErrorIs(t, err, messages.ErrTaskEnded)
			assert.EqualError(t, err, "task has ended: "+string(id)+" is completed (exit code: 3)")
		})
		t.Run("invalid UTF-8 reaches a "+mode.String()+" command as bytes", func(t *testing.T) {
			p := newTestProducer(t)
			rt := newRuntime(t)
			id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: `od -An -tx1 -v`, Stdin: mode}))
			require.NoError(t, err)
			require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("\xff\xfeA\xc3\n"), true))
			assert.Equal(t, "exit code: 0", settled(t, rt, id, "").Detail)
			pk, err := rt.Tasks().Peek(ctx, id, "", 0, 1<<20)
			require.NoError(t, err)
			assert.Contains(t, string(pk.Data), " ff fe 41 c3 0a")
		})
	}
	t.Run("input racing an exit reports the end, never a broken pipe", func(t *testing.T) {
		p := newTestProducer(t)
		rt := newRuntime(t)
		for range 20 {
			id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: `read -r l; echo "got $l"`, Stdin: StdinPipe}))
			require.NoError(t, err)
			require.NoError(t, rt.Tasks().Input(ctx, id, "", []byte("one\n"), false))
			for range 5 {
				if err := rt.Tasks().Input(ctx, id, "", []byte("more\n"), false); err != nil {
					require.ErrorIs(t, err, messages.ErrTaskEnded)
				}
			}
			assert.Equal(t, "exit code: 0", settled(t, rt, id, "").Detail)
		}
		requireQuiet(t, p)
	})
}

// Many inputs, each up to the bound, race a kill of a command that reads none of
// them: every input is written or fails with ErrTaskEnded, none hangs (a blocked
// write ends with the task), and nothing survives.
func TestRuntimeInputRacingAKill(t *testing.T) {
	ctx := context.Background()
	for _, mode := range interactiveModes {
		t.Run(mode.String(), func(t *testing.T) {
			p := newTestProducer(t, WithGrace(time.Second))
			rt := newRuntime(t)
			for round := range 5 {
				id, err := rt.Tasks().Start(ctx, p.Spec("", Command{Command: "echo ready; sleep 1000", Stdin: mode}))
				require.NoError(t, err)
				until(t, rt, id, "", "ready")
				line := fmt.Sprintf("round %d input\n", round)
				chunk := []byte(strings.Repeat(line, messages.MaxInput/len(line)+1)[:messages.MaxInput])
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for range cap(errs) {
					wg.Go(func() { errs <- rt.Tasks().Input(ctx, id, "", chunk, false) })
				}
				kill, _, err := rt.Tasks().Kill(ctx, id, "", "racing inputs")
				require.NoError(t, err)
				assert.Equal(t, messages.KillRequested, kill)
				wg.Wait()
				close(errs)
				written := 0
				for err := range errs {
					if err == nil {
						written++
						continue
					}
					require.ErrorIs(t, err, messages.ErrTaskEnded)
				}
				t.Logf("round %d: %d of %d inputs written before the kill", round, written, cap(errs))
				s := settled(t, rt, id, "")
				assert.Equal(t, messages.Killed, s.Status)
				assert.ErrorIs(t, rt.Tasks().Input(ctx, id, "", []byte("late"), false), messages.ErrTaskEnded)
				requireQuiet(t, p)
			}
		})
	}
}

// Once the owner's disposal has begun, its tasks are stopping: input is refused with
// ErrTaskEnded (the runtime never hands it to the producer), a write already blocked
// on the task ends with it, and the disposal leaves no process.
func TestRuntimeInputAfterTheOwnersDisposalStarted(t *testing.T) {
	ctx := context.Background()
	for _, mode := range interactiveModes {
		t.Run(mode.String(), func(t *testing.T) {
			p := newTestProducer(t, WithGrace(time.Minute))
			rt := newRuntime(t)
			require.NoError(t, rt.Agents().Register(ctx, "a1"))
			sub, err := rt.Subscribe(ctx, actors.ForOwner("a1"))
			require.NoError(t, err)
			defer sub.Close()

			// The command ignores SIGTERM and ends when the test writes the gate, so
			// the disposal stays under way until then.
			gate := filepath.Join(t.TempDir(), "gate")
			require.NoError(t, unix.Mkfifo(gate, 0o600))
			id, err := rt.Tasks().Start(ctx, p.Spec("a1", Command{
				Command: fmt.Sprintf(`trap '' TERM; echo ready; read -r _ < %q`, gate), Stdin: mode}))
			require.NoError(t, err)
			until(t, rt, id, "a1", "ready")
			// An input the command never reads, large enough to block a pipe.
			blocked := make(chan error, 1)
			go func() {
				var err error
				for err == nil {
					err = rt.Tasks().Input(ctx, id, "a1", make([]byte, messages.MaxInput), false)
				}
				blocked <- err
			}()

			disposed := make(chan error, 1)
			go func() { disposed <- rt.Agents().Dispose(ctx, "a1") }()
			awaitStopping(t, rt, sub, id, "a1")

			err = rt.Tasks().Input(ctx, id, "a1", []byte("after\n"), false)
			require.ErrorIs(t, err, messages.ErrTaskEnded)
			assert.EqualError(t, err, "task has ended: "+string(id)+" is stopping")

			g, err := os.OpenFile(gate, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = g.WriteString("go\n")
			require.NoError(t, err)
			require.NoError(t, g.Close())
			select {
			case err := <-disposed:
				require.NoError(t, err)
			case <-time.After(settleLimit):
				t.Fatal("the disposal did not end")
			}
			select {
			case err := <-blocked:
				// The blocked write ends with the task: refused as ended, or — when
				// the write itself went through as the terminal hung up — the loop's
				// next input reaches an owner already disposed (seen 1 in 150 runs, tty).
				if !errors.Is(err, messages.ErrTaskEnded) && !errors.Is(err, messages.ErrTaskNotFound) {
					t.Fatalf("the input loop ended with %v, want task has ended (or not found once disposed)", err)
				}
			case <-time.After(settleLimit):
				t.Fatal("the input loop did not end")
			}
			requireQuiet(t, p)
			err = rt.Tasks().Input(ctx, id, "a1", []byte("x"), false)
			assert.True(t, errors.Is(err, messages.ErrTaskNotFound), "the disposed owner's task is gone: %v", err)
		})
	}
}

// awaitStopping waits for the stopping event of task id. The echo of the inputs
// makes output events, which a slow reader may miss: after an overflow event it
// resynchronises with Get, as the subscription's contract says.
func awaitStopping(t *testing.T, rt *actors.Runtime, sub *actors.Subscription, id messages.TaskID, caller messages.AgentID) {
	t.Helper()
	deadline := time.After(settleLimit)
	for {
		select {
		case e, ok := <-sub.Events():
			require.True(t, ok, "the subscription ended")
			switch {
			case e.Kind == messages.EventTaskStopping && e.Task.ID == id:
				return
			case e.Kind == messages.EventOverflow:
				s, err := rt.Tasks().Get(context.Background(), id, caller)
				require.NoError(t, err)
				if s.Status != messages.Running {
					require.Equal(t, messages.Stopping, s.Status, "the disposal waits for the gate")
					return
				}
			}
		case <-deadline:
			t.Fatalf("no %s event for %s within %s", messages.EventTaskStopping, id, settleLimit)
		}
	}
}
