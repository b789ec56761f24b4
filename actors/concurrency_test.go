package actors_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// 1,000 goroutines issue random operations on random ids as random callers. No
// foreign operation may have an effect, every task settles exactly once, and the
// runtime returns to zero.
func TestRandomConcurrentOperations(t *testing.T) {
	const goroutines, opsEach = 1000, 10
	rt, err := actors.NewRuntime(actors.WithoutOwnerLimit())
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	agents := []messages.AgentID{"a0", "a1", "a2", "a3", "a4"}
	register(t, rt, agents...)
	callers := append([]messages.AgentID{"", "stranger"}, agents...)

	var settledMu sync.Mutex
	settled := map[messages.TaskID]int{}
	settledOne := make(chan struct{}, 1)
	stop := rt.Tasks().OnDone(func(s messages.Snapshot) {
		settledMu.Lock()
		settled[s.ID]++
		settledMu.Unlock()
		select {
		case settledOne <- struct{}{}:
		default:
		}
	})
	defer stop()

	var mu sync.Mutex // protects tasks, owners, fakes
	var tasks []messages.TaskID
	owners := map[messages.TaskID]messages.AgentID{}
	fakes := map[messages.TaskID]*fake{}
	pick := func(r *rand.Rand) (messages.TaskID, messages.AgentID, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(tasks) == 0 || r.IntN(10) == 0 {
			return messages.TaskID(fmt.Sprintf("bash-%d", 100000+r.IntN(10))), "", false
		}
		id := tasks[r.IntN(len(tasks))]
		return id, owners[id], true
	}
	allowed := func(owner, caller messages.AgentID) bool { return owner == "" || owner == caller }

	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 42))
			for i := 0; i < opsEach; i++ {
				caller := callers[r.IntN(len(callers))]
				id, owner, known := pick(r)
				switch op := r.IntN(8); op {
				case 0, 1: // start, owned by the caller (strangers start unowned tasks)
					o := caller
					if o == "stranger" {
						o = ""
					}
					f := newFake()
					if r.IntN(2) == 0 {
						f.Emit("hello")
					}
					nid, err := rt.Tasks().Start(bg, f.spec("bash", o, true))
					if err != nil {
						assert.ErrorIs(t, err, messages.ErrOwnerUnknown) // a disposal raced us
						continue
					}
					mu.Lock()
					tasks = append(tasks, nid)
					owners[nid] = o
					fakes[nid] = f
					mu.Unlock()
					if r.IntN(3) == 0 {
						f.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
					}
				case 2: // kill
					reason := "owner"
					if !known || !allowed(owner, caller) {
						reason = "foreign:" + string(caller)
					}
					_, _, err := rt.Tasks().Kill(bg, id, caller, reason)
					if !known || !allowed(owner, caller) {
						assert.ErrorIs(t, err, messages.ErrTaskNotFound)
					} else if err != nil {
						assert.ErrorIs(t, err, messages.ErrTaskNotFound) // the owner was disposed meanwhile
					}
				case 3: // read
					_, err := rt.Tasks().Read(bg, id, caller)
					if !known || !allowed(owner, caller) {
						assert.ErrorIs(t, err, messages.ErrTaskNotFound)
					}
				case 4: // wait, briefly
					_, err := rt.Tasks().Wait(bg, id, caller, time.Millisecond)
					if !known || !allowed(owner, caller) {
						assert.ErrorIs(t, err, messages.ErrTaskNotFound)
					}
				case 5: // get
					s, err := rt.Tasks().Get(bg, id, caller)
					if !known || !allowed(owner, caller) {
						assert.ErrorIs(t, err, messages.ErrTaskNotFound)
					} else if err == nil {
						assert.Equal(t, owner, s.Owner)
					}
				case 6: // list
					list, err := rt.Tasks().List(bg, caller)
					assert.NoError(t, err)
					for _, s := range list {
						assert.True(t, allowed(s.Owner, caller), "list leaked %s (owner %s) to %q", s.ID, s.Owner, caller)
					}
				case 7: // occasionally dispose an agent and register it again
					if r.IntN(20) != 0 || caller == "" || caller == "stranger" {
						continue
					}
					err := rt.Agents().Dispose(bg, caller)
					if err != nil && !errors.Is(err, messages.ErrOwnerUnknown) {
						assert.NoError(t, err)
					}
					err = rt.Agents().Register(bg, caller)
					if err != nil && !errors.Is(err, messages.ErrAgentExists) {
						assert.NoError(t, err)
					}
				}
			}
		}(uint64(g))
	}
	wg.Wait()
	// Listeners are silent from the moment Close begins, so every task is made to
	// settle before it: finish the work of those still running and wait until the
	// listener has seen every task.
	mu.Lock()
	for _, f := range fakes {
		f.Finish(messages.Outcome{Status: messages.Completed})
	}
	n := len(tasks)
	mu.Unlock()
	for {
		settledMu.Lock()
		seen := len(settled)
		settledMu.Unlock()
		if seen >= n {
			break
		}
		<-settledOne
	}
	require.NoError(t, rt.Close(bg))

	mu.Lock()
	defer mu.Unlock()
	settledMu.Lock()
	defer settledMu.Unlock()
	require.NotEmpty(t, tasks)
	for _, id := range tasks {
		assert.Equal(t, 1, settled[id], "task %s settled exactly once", id)
		f := fakes[id]
		close(f.Cancels)
		for reason := range f.Cancels {
			assert.False(t, strings.HasPrefix(reason, "foreign"), "task %s was cancelled by a foreign caller: %s", id, reason)
		}
	}
	assert.Equal(t, actors.Stats{}, rt.Stats())
	t.Logf("%d tasks started and settled by %d goroutines", len(tasks), goroutines)
}
