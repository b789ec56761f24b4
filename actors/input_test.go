package actors_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	fakepkg "github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
)

func interactive(t *testing.T, rt *actors.Runtime, owner messages.AgentID) (messages.TaskID, *fake) {
	t.Helper()
	f := newFake()
	f.Interactive()
	id := start(t, rt, f.spec("bash", owner, true))
	t.Cleanup(func() { f.Finish(messages.Outcome{Status: messages.Completed}) })
	return id, f
}

func TestInput(t *testing.T) {
	t.Run("writes reach the producer in order, and eof closes the input", func(t *testing.T) {
		rt := newRT(t)
		id, f := interactive(t, rt, "")
		require.NoError(t, rt.Tasks().Input(bg, id, "", []byte("one\n"), false))
		require.NoError(t, rt.Tasks().Input(bg, id, "", []byte("\xff not utf-8\n"), false))
		require.NoError(t, rt.Tasks().Input(bg, id, "", nil, true))
		assert.Equal(t, fakepkg.Input{Data: "one\n"}, <-f.Inputs)
		assert.Equal(t, fakepkg.Input{Data: "\xff not utf-8\n"}, <-f.Inputs, "bytes pass through")
		assert.Equal(t, fakepkg.Input{EOF: true}, <-f.Inputs)
		err := rt.Tasks().Input(bg, id, "", []byte("late"), false)
		assert.ErrorIs(t, err, messages.ErrInputClosed)
	})
	t.Run("a producer without an input hook takes no input", func(t *testing.T) {
		rt := newRT(t)
		f := newFake()
		id := start(t, rt, f.spec("bash", "", true))
		defer f.Finish(messages.Outcome{Status: messages.Completed})
		assert.ErrorIs(t, rt.Tasks().Input(bg, id, "", []byte("x"), false), messages.ErrNoInput)
	})
	t.Run("input to a finished task names its status", func(t *testing.T) {
		rt := newRT(t)
		id, f := interactive(t, rt, "")
		f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		settleWait(t, rt, id, "")
		err := rt.Tasks().Input(bg, id, "", []byte("x"), false)
		require.ErrorIs(t, err, messages.ErrTaskEnded)
		assert.EqualError(t, err, "task has ended: "+string(id)+" is completed (exit code: 0)")
	})
	t.Run("more than the bound is refused, naming the bound", func(t *testing.T) {
		rt := newRT(t)
		id, f := interactive(t, rt, "")
		err := rt.Tasks().Input(bg, id, "", make([]byte, messages.MaxInput+1), false)
		assert.EqualError(t, err, "invalid argument: input of 65537 bytes is over the bound of 65536 bytes per call")
		assert.Empty(t, f.Inputs)
	})
}

func TestInputFence(t *testing.T) {
	rt := newRT(t)
	register(t, rt, "a1", "a2")
	require.NoError(t, rt.Agents().Register(bg, "a1/sub", actors.WithParent("a1")))
	id, f := interactive(t, rt, "a1/sub")
	for _, tc := range []struct {
		caller messages.AgentID
		ok     bool
	}{{"a1/sub", true}, {"a1", true}, {"a2", false}, {"", false}, {"stranger", false}} {
		err := rt.Tasks().Input(bg, id, tc.caller, []byte(string(tc.caller)), false)
		if tc.ok {
			assert.NoError(t, err, "%q", tc.caller)
			assert.Equal(t, string(tc.caller), (<-f.Inputs).Data)
		} else {
			assert.EqualError(t, err, "task not found: "+string(id), "%q reads like an unknown id", tc.caller)
		}
	}
	assert.Empty(t, f.Inputs)
}

// A write that blocks (a full pipe) holds neither the task actor nor the registry,
// and later writes queue behind it in order.
func TestABlockedInputBlocksNothingElse(t *testing.T) {
	rt := newRT(t)
	id, f := interactive(t, rt, "")
	f.BlockInput()
	f.Emit("still readable")
	first := make(chan error, 1)
	go func() { first <- rt.Tasks().Input(bg, id, "", []byte("1"), false) }()
	r, err := rt.Tasks().Read(bg, id, "")
	require.NoError(t, err)
	assert.Equal(t, "still readable", r.Output, "the task actor answers while a write blocks")
	_, err = rt.Tasks().List(bg, "")
	require.NoError(t, err, "so does the registry")
	second := make(chan error, 1)
	go func() { second <- rt.Tasks().Input(bg, id, "", []byte("2"), false) }()
	f.UnblockInput()
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	got := []string{(<-f.Inputs).Data, (<-f.Inputs).Data}
	assert.ElementsMatch(t, []string{"1", "2"}, got)
}

// Many concurrent writers: every call's data arrives whole (per-call atomicity), each
// writer's own calls in its order.
func TestManyWritersKeepPerCallAtomicity(t *testing.T) {
	rt := newRT(t)
	id, f := interactive(t, rt, "")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				assert.NoError(t, rt.Tasks().Input(bg, id, "", []byte(fmt.Sprintf("w%d-%d;", w, i)), false))
			}
		})
	}
	wg.Wait()
	next := map[int]int{}
	for range writers * each {
		in := <-f.Inputs
		var w, i int
		_, err := fmt.Sscanf(in.Data, "w%d-%d;", &w, &i)
		require.NoError(t, err, "a whole call: %q", in.Data)
		assert.Equal(t, next[w], i, "writer %d's calls in its order", w)
		next[w]++
	}
}

// Input racing a kill, and input once the owner's disposal began: the answer is the
// write (before the kill took effect) or ErrTaskEnded — never a broken pipe, never a
// hang.
func TestInputRacingTheEnd(t *testing.T) {
	for _, end := range []string{"kill", "dispose"} {
		t.Run(end, func(t *testing.T) {
			for range 20 {
				rt := newRT(t)
				register(t, rt, "a1")
				id, f := interactive(t, rt, "a1")
				f.BlockInput()
				results := make(chan error, 4)
				for i := range 4 {
					go func() { results <- rt.Tasks().Input(bg, id, "a1", []byte(fmt.Sprint(i)), false) }()
				}
				if end == "kill" {
					_, _, err := rt.Tasks().Kill(bg, id, "a1", "stop")
					require.NoError(t, err)
				} else {
					require.NoError(t, rt.Agents().Dispose(bg, "a1"))
				}
				for range 4 {
					select {
					case err := <-results:
						if err != nil && !strings.Contains(err.Error(), "task not found") {
							assert.ErrorIs(t, err, messages.ErrTaskEnded)
						}
					case <-time.After(time.Minute):
						t.Fatal("an input hung")
					}
				}
			}
		})
	}
}
