package tools

import "github.com/taskrt/taskrt/messages"

// SetOutputCallHook makes every task_output call report its task id to f once the
// call is under way (registered for the notice injector), so that a test can settle
// the task knowing the call started first. Set it before any call.
func SetOutputCallHook(t *TaskTools, f func(messages.TaskID)) { t.outputCallHook = f }
