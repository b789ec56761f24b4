package actors_test

import (
	"bytes"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// syncBuffer is a log sink tests can read while the runtime writes to it.
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

// A request sent to Registry() without a sender (Root.Send instead of Request or
// RequestFuture) has nobody to answer. It is an embedder's mistake, and it must not
// become the task's: the runtime refuses it before anything happens, logs it, and
// sends the reply with the error to the actor system's dead letters (a
// DeadLetterEvent on its EventStream), where the embedder can see it. The task keeps
// running and settles as its work says.
func TestRequestWithoutSenderIsRefusedAndTheTaskKeepsRunning(t *testing.T) {
	var logs syncBuffer
	rt := newRT(t, actors.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	register(t, rt, "a1")
	f := newFake()
	f.Buffered()
	f.Interactive()
	id := start(t, rt, f.spec("bash", "a1", true))

	deadLetters := make(chan any, 64)
	sub := rt.ActorSystem().EventStream.Subscribe(func(ev any) {
		if d, ok := ev.(*actor.DeadLetterEvent); ok {
			deadLetters <- d.Message
		}
	})
	defer rt.ActorSystem().EventStream.Unsubscribe(sub)

	for _, tc := range []struct {
		rule  string
		msg   messages.Request
		reply any // a value of the reply type that carries the error
	}{
		{"a wait without a sender is refused", &messages.WaitTask{ID: id, Caller: "a1", Timeout: time.Minute}, &messages.WaitReply{}},
		{"a read without a sender is refused", &messages.ReadTask{ID: id, Caller: "a1"}, &messages.ReadReply{}},
		{"a kill without a sender is refused", &messages.KillTask{ID: id, Caller: "a1", Reason: "no"}, &messages.KillReply{}},
		{"a read-until without a sender is refused", &messages.ReadUntil{ID: id, Caller: "a1", Pattern: "x", Timeout: time.Minute}, &messages.ReadUntilReply{}},
		{"a peek without a sender is refused", &messages.PeekTask{ID: id, Caller: "a1", Max: 10}, &messages.PeekReply{}},
		{"an input without a sender is refused", &messages.InputTask{ID: id, Caller: "a1", Data: []byte("hi")}, &messages.InputReply{}},
		{"a set wait without a sender is refused", &messages.WaitTasks{IDs: []messages.TaskID{id}, Caller: "a1", Timeout: time.Minute}, &messages.WaitTasksReply{}},
		{"a get without a sender is refused", &messages.GetTask{ID: id, Caller: "a1"}, &messages.SnapshotReply{}},
		{"a list without a sender is refused", &messages.ListTasks{Caller: "a1"}, &messages.ListReply{}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			rt.ActorSystem().Root.Send(rt.Registry(), tc.msg)
			deadline := time.After(10 * time.Second)
			for {
				var m any
				select {
				case m = <-deadLetters:
				case <-deadline:
					t.Fatalf("no reply with an error reached the dead letters")
				}
				if reflect.TypeOf(m) != reflect.TypeOf(tc.reply) {
					continue // another dead letter
				}
				err, _ := reflect.ValueOf(m).Elem().FieldByName("Err").Interface().(error)
				require.ErrorIs(t, err, messages.ErrInvalidArgument)
				assert.Contains(t, err.Error(), "without a sender")
				break
			}
			s, err := rt.Tasks().Get(bg, id, "a1")
			require.NoError(t, err)
			assert.Equal(t, messages.Running, s.Status, "the task keeps running")
		})
	}

	assert.Contains(t, logs.String(), "request without a sender", "the refusal is logged")
	assert.Empty(t, f.Cancels, "no kill reached the work")
	assert.Empty(t, f.Inputs, "no input reached the work")
	f.Finish(messages.Outcome{Status: messages.Completed})
	s := settleWait(t, rt, id, "a1")
	assert.Equal(t, messages.Completed, s.Status, "the task settles as its work says")
}
