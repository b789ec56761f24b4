package bench

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The floor: bare protoactor doing the least the runtime must do for each figure.
// The runtime cannot be cheaper than this (it does this and more), so the distance
// to the floor is what taskrt's own code costs.

// floorSystem is an actor system with no output and a short dead-letter throttle
// (whose goroutine would otherwise outlive the measurement).
func floorSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
}

// ownerProps is an actor that, when started, spawns children idle actors and, when
// depth > 1, a nested ownerProps of depth-1 (the floor of an owner with tasks, or of
// a chain of owners). The innermost one closes ready (if not nil) once it started
// its children; this one closes done (if not nil) once stopped, which protoactor does
// after every descendant stopped.
func ownerProps(children, depth int, ready, done chan struct{}) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			for range children {
				c.Spawn(idleProps)
			}
			if depth > 1 {
				c.Spawn(ownerProps(0, depth-1, ready, nil))
			} else if ready != nil {
				close(ready)
			}
		case *actor.Stopped:
			if done != nil {
				close(done)
			}
		}
	})
}

// idleProps is an actor that does nothing: the floor of one live task.
var idleProps = actor.PropsFromFunc(func(actor.Context) {})

// echoProps answers every string request with "ok": the floor of a routed request.
var echoProps = actor.PropsFromFunc(func(c actor.Context) {
	if _, ok := c.Message().(string); ok {
		c.Respond("ok")
	}
})

// routerProps forwards every string request to target, which answers the original
// sender: the floor of a request routed through the registry to a task actor.
func routerProps(target *actor.PID) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			c.Forward(target)
		}
	})
}

// holderProps keeps the senders of "wait" requests and answers them all when it
// gets "settle"; "ping" is answered at once (a barrier). It is the floor of a wait
// woken by a settlement.
func holderProps() *actor.Props {
	var waiters []*actor.PID
	return actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message() {
		case "wait":
			waiters = append(waiters, c.Sender())
		case "ping":
			c.Respond("pong")
		case "settle":
			for _, w := range waiters {
				c.Send(w, "settled")
			}
			waiters = waiters[:0]
		}
	})
}

// stopAndWait stops pid and waits until its Stopped handler closed done.
func stopAndWait(sys *actor.ActorSystem, pid *actor.PID, done chan struct{}) {
	sys.Root.Stop(pid)
	<-done
}
