package actors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/taskrt/taskrt/messages"
)

// defaultEventBuffer is how many events a subscription holds for its reader.
const defaultEventBuffer = 1024

// Subscription is a stream of the runtime's events (Runtime.Subscribe). Read them
// from Events; Close ends the subscription. A subscription that falls behind misses
// events — never blocking the runtime, never silently: the next event it gets is an
// EventOverflow that says how many it missed (resynchronise with Tasks.List).
type Subscription struct {
	rt   *Runtime
	ch   chan messages.Event
	once sync.Once
}

// Events is the subscription's channel. The runtime closes it when the subscription
// is closed or the runtime has closed.
func (s *Subscription) Events() <-chan messages.Event { return s.ch }

// Close ends the subscription; its channel is closed soon after. Idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if !s.rt.closed.Load() {
			tellRegistry(s.rt.system.Root, s.rt, &unsubscribeEvents{sub: s})
		}
	})
}

// SubscribeOption configures a subscription.
type SubscribeOption interface{ applySub(*subscriber) }

type subscribeOptionFunc func(*subscriber)

func (f subscribeOptionFunc) applySub(s *subscriber) { f(s) }

// ForOwner scopes a subscription to one agent and its descendants (sub-agents): it
// sees their agent and task events and nothing else — no other owner's, no unowned
// task's. Without it, a subscription sees the whole runtime. Scoping is the
// embedder's decision; nothing a model does can widen it.
func ForOwner(id messages.AgentID) SubscribeOption {
	return subscribeOptionFunc(func(s *subscriber) { s.owner = id })
}

// WithEventBuffer sets how many events the subscription holds before it misses some
// (default 1024; n <= 0 keeps the default).
func WithEventBuffer(n int) SubscribeOption {
	return subscribeOptionFunc(func(s *subscriber) {
		if n > 0 {
			s.buffer = n
		}
	})
}

// Subscribe starts a stream of events: agents registered and disposed, tasks started,
// their output growing (byte counts, not bytes: use Tasks.Peek for the bytes),
// stopping, settled and evicted. The registry hands each event to every subscriber
// with a non-blocking send into the subscriber's bounded buffer, so a slow reader
// costs the runtime nothing but the events it misses (see Subscription). It fails
// with ErrClosed once the runtime is closing.
func (rt *Runtime) Subscribe(ctx context.Context, opts ...SubscribeOption) (*Subscription, error) {
	s := &subscriber{buffer: defaultEventBuffer}
	for _, o := range opts {
		o.applySub(s)
	}
	s.sub = &Subscription{rt: rt, ch: make(chan messages.Event, s.buffer)}
	m, err := rt.call(ctx, &subscribeEvents{s: s})
	if err != nil {
		return nil, rt.noActorErr(err)
	}
	if err := m.(*errReply).err; err != nil {
		return nil, err
	}
	return s.sub, nil
}

// subscriber is the registry's side of a Subscription.
type subscriber struct {
	sub    *Subscription
	owner  messages.AgentID // "" = the whole runtime
	buffer int
	missed int // events dropped since the last delivered one
}

// publish hands ev to every subscriber in scope, never blocking: a full buffer
// counts a missed event, and the subscriber's next delivered event is an overflow
// notice. Called on the registry's goroutine.
func (r *registry) publish(ev messages.Event) {
	if len(r.subscribers) == 0 {
		return
	}
	ev.Time = time.Now()
	for s := range r.subscribers {
		if s.owner != "" && (ev.Agent == "" || !r.descends(ev.Agent, s.owner)) {
			continue
		}
		if s.missed > 0 {
			select {
			case s.sub.ch <- messages.Event{Kind: messages.EventOverflow, Time: ev.Time, Missed: s.missed}:
				s.missed = 0
			default:
				s.missed++
				continue
			}
		}
		select {
		case s.sub.ch <- ev:
		default:
			s.missed++
		}
	}
}

func (r *registry) closeSubscribers() {
	for s := range r.subscribers {
		close(s.sub.ch)
		delete(r.subscribers, s)
	}
	r.rt.nSubscribers.Store(0)
}

// subscribe adds an event subscriber (none once the runtime closes).
func (r *registry) subscribe(ctx actor.Context, m *subscribeEvents) {
	if r.phase != runtimeOpen {
		ctx.Respond(&errReply{err: r.rt.closedErr()})
		return
	}
	r.subscribers[m.s] = struct{}{}
	r.rt.nSubscribers.Store(int64(len(r.subscribers)))
	ctx.Respond(&errReply{})
}

// unsubscribe ends a subscription: its channel is closed.
func (r *registry) unsubscribe(m *unsubscribeEvents) {
	for s := range r.subscribers {
		if s.sub == m.sub {
			delete(r.subscribers, s)
			close(s.sub.ch)
		}
	}
	r.rt.nSubscribers.Store(int64(len(r.subscribers)))
}

// taskOutput publishes a live task's output growth.
func (r *registry) taskOutput(m *taskOutput) {
	if e, ok := r.tasks[m.snap.ID]; ok && !e.tombstone() {
		r.publish(messages.Event{Kind: messages.EventTaskOutput, Agent: m.snap.Owner, Task: e.snap, Bytes: m.bytes})
	}
}
