package tools

import "github.com/taskrt/taskrt/messages"

// SetOutputCallHook makes every task_output call report its task id to f once the
// call is under way (registered for the notice injector), so that a test can settle
// the task knowing the call started first. Set it before any call.
func SetOutputCallHook(t *TaskTools, f func(messages.TaskID)) { t.outputCallHook = f }

// SetAfterWaitHook makes every task_output call with wait report its task id to f
// once the wait returned and before the read, so that a test can drop the record in
// between. Set it before any call.
func SetAfterWaitHook(t *TaskTools, f func(messages.TaskID)) { t.afterWaitHook = f }

// BashArgs are the bash tool's arguments, for the tests that measure them.
type BashArgs = bashArgs

// The inbox's defaults, for its tests.
const (
	DefaultInboxCapacity = defaultInboxCapacity
	DefaultMaxAutoTurns  = defaultMaxAutoTurns
)
