package tools

import (
	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// SetOutputCallHook makes every task_output call report its task id to f once the
// call is under way (registered for the notice injector), so that a test can settle
// the task knowing the call started first. Set it before any call.
func SetOutputCallHook(t *TaskTools, f func(messages.TaskID)) { t.outputCallHook = f }

// BashRunner is what the bash tool needs of a producer; tests substitute a fake.
type BashRunner = bashRunner

// NewBashWithRunner is NewBash with a fake producer.
func NewBashWithRunner(rt *actors.Runtime, r BashRunner, opts ...BashOption) *BashTool {
	return newBash(rt, r, opts...)
}
