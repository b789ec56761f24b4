package actors

import (
	"errors"

	"github.com/taskrt/taskrt/messages"
)

// Tasks starts and controls background tasks. Every method that names a task takes
// the caller's agent id and applies the owner fence: a task owned by another agent,
// or owned at all when the caller is "", is reported exactly as an unknown id is.
type Tasks struct{ rt *Runtime }

// Agents registers and disposes the agents that own tasks.
type Agents struct{ rt *Runtime }

// noActorErr maps a request that reached no actor to ErrClosed.
func (rt *Runtime) noActorErr(err error) error {
	if errors.Is(err, errDeadLetter) {
		return rt.closedErr()
	}
	return err
}

// taskErr maps a task request that reached no actor to not-found: the task's record
// went away between the route and the answer.
func taskErr(id messages.TaskID, err error) error {
	if errors.Is(err, errDeadLetter) {
		return notFound(id)
	}
	return err
}
