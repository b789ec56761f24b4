package bash

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/taskrt/taskrt/messages"
)

// Kind is the task kind of bash tasks: their ids are "bash-N".
const Kind = "bash"

// markerEnv is the environment variable carrying a task's marker,
// "<pid>.<producer>.<task>", which every descendant inherits unless it clears its
// environment.
const markerEnv = "TASKRT_BASH_TASK"

// ErrEmptyCommand is returned by Start and Run for a blank command.
var ErrEmptyCommand = errors.New("bash: empty command")

// Command is one shell command to run.
type Command struct {
	// Command is the script given to `bash -c`.
	Command string
	// Dir is the working directory; "" keeps the current one. A missing directory
	// makes Start fail.
	Dir string
	// Env holds extra KEY=VALUE entries added to (and overriding) the inherited
	// environment.
	Env []string
}

// Producer runs shell commands as taskrt tasks. Its zero value is not usable; call
// New. A Producer holds no resources of its own: each task's goroutines and
// processes end when that task's Done settles. It is safe for concurrent use.
type Producer struct {
	cfg    config
	prefix string        // marker prefix of this producer's tasks: "<pid>.<n>."
	seq    atomic.Uint64 // numbers this producer's tasks for their markers
}

// producers numbers the Producers of this process, for their marker prefixes.
var producers atomic.Uint64

// New returns a Producer. Unless WithSubreaper(false) is given, the first Start
// makes this process a child subreaper (see the package documentation).
func New(opts ...Option) *Producer {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	return &Producer{
		cfg:    cfg,
		prefix: fmt.Sprintf("%d.%d.", os.Getpid(), producers.Add(1)),
	}
}

// Start starts c now and returns the hooks the runtime uses to read, cancel and
// await it; it is what Spec uses as Spec.Run. An error (a blank command, a malformed
// Env entry, a missing directory, a shell that cannot be run) means nothing was
// started.
//
// The hooks: ReadOutput is a consuming delta read (see WithMaxRead); Cancel sends
// SIGTERM to the command's process group, then SIGKILL after the grace period, and
// never blocks; Done delivers the Outcome once every process of the task is gone and
// the output is drained; Release removes the spill file.
func (p *Producer) Start(c Command) (messages.Hooks, error) {
	t, err := p.start(c)
	if err != nil {
		return messages.Hooks{}, err
	}
	return t.hooks(), nil
}

// Spec declares c as a background task of owner: kind "bash", the command as its
// label (its first line, marked with " …" when there are more), and Start as Run.
func (p *Producer) Spec(owner messages.AgentID, c Command) messages.Spec {
	return messages.Spec{
		Kind:  Kind,
		Label: label(c.Command),
		Owner: owner,
		Run:   func() (messages.Hooks, error) { return p.Start(c) },
	}
}

func label(command string) string {
	command = strings.TrimSpace(command)
	if first, _, more := strings.Cut(command, "\n"); more {
		return strings.TrimSpace(first) + " …"
	}
	return command
}

// Live counts the processes of this producer's tasks that are running now: the
// shells and every descendant that still carries its task's marker. It scans /proc,
// so it costs about a millisecond per hundred processes on the machine.
func (p *Producer) Live() int {
	return countMarked(func(m string) bool { return strings.HasPrefix(m, p.prefix) })
}

// LiveProcesses counts the running processes of the bash tasks of every Producer in
// this process: the quiescence check for tests and simulators that hold more than one
// Producer. Tasks of other programs on the machine are not counted (see
// MachineLiveProcesses).
func LiveProcesses() int {
	prefix := fmt.Sprintf("%d.", os.Getpid())
	return countMarked(func(m string) bool { return strings.HasPrefix(m, prefix) })
}

// MachineLiveProcesses counts the running processes on this machine that carry any
// bash task marker, from any Producer in any process (this process itself excluded).
func MachineLiveProcesses() int {
	return countMarked(func(string) bool { return true })
}

// environ is the environment of a new task: this process's, minus any inherited
// marker, plus extra, plus the task's marker (last, so extra cannot override it).
func environ(extra []string, marker string) ([]string, error) {
	for _, kv := range extra {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("bash: malformed environment entry %q (want KEY=VALUE)", kv)
		}
	}
	base := os.Environ()
	env := make([]string, 0, len(base)+len(extra)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, markerEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, extra...)
	return append(env, markerEnv+"="+marker), nil
}
