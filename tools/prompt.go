package tools

// Section is one system-prompt section. Embedders sort their sections by Order and
// render each as a heading (Title) followed by its body (Text).
type Section struct {
	Order int
	Title string
	Text  string
}

// promptOrder is the order of the background-task section: 106, right after the bash
// tool's own section.
const promptOrder = 106

const promptText = `Some tools can run work in the background (run_in_background: true). Such a call returns at once with a task id (for example bash-1); the work goes on while you do other things.

- Track every task id you are given. task_list shows your tasks if you lose one.
- You are notified in this session when a background task finishes. Do not busy-poll task_output or sleep while you wait for one: keep working on steps that do not depend on it, and do not start a second task that duplicates the work of one that is still running.
- Do not produce a final answer while a task whose result matters is still running. Call task_output to collect it first — with wait: true when you are blocked on it, or task_wait when you fanned work out and need the first (mode any) or every (mode all) result of several tasks.
- When a background task waits for input (a command started with stdin "pipe" or "tty": a REPL, a prompt), answer it with task_input; its reply comes back in the same call.
- To react to particular lines of a running task while you keep working (a dev server's ERROR lines), call task_watch with a pattern instead of polling task_output: matching lines come to you as notices.
- Call task_kill on tasks that stopped mattering, so they do not run on for nothing.`

// PromptSection returns the system-prompt section that teaches the background-task
// habit the per-tool descriptions cannot: track ids, rely on the completion notice
// instead of polling, never duplicate running work, collect relevant results before
// answering, and kill what stopped mattering. Include it whenever the task tools are
// offered.
func PromptSection() Section {
	return Section{Order: promptOrder, Title: "Background tasks", Text: promptText}
}
