package remote

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/taskrt/taskrt/producers/bash"
)

// defaultPrefix starts every subject and names the lease bucket (WithPrefix).
const defaultPrefix = "taskrt"

// subjects are the NATS subjects of one deployment (one prefix). See the package
// documentation for who publishes, who answers and what.
type subjects struct{ prefix string }

func (s subjects) start() string              { return s.prefix + ".start" }
func (s subjects) startQueue() string         { return s.prefix + "-workers" }
func (s subjects) kill(worker string) string  { return s.prefix + ".w." + worker + ".kill" }
func (s subjects) input(worker string) string { return s.prefix + ".w." + worker + ".input" }
func (s subjects) ack(worker string) string   { return s.prefix + ".w." + worker + ".ack" }
func (s subjects) release(worker string) string {
	return s.prefix + ".w." + worker + ".release"
}
func (s subjects) adopt() string           { return s.prefix + ".adopt" }
func (s subjects) out(node string) string  { return s.prefix + ".o." + node + ".out" }
func (s subjects) done(node string) string { return s.prefix + ".o." + node + ".done" }
func (s subjects) bucket() string          { return s.prefix + "_leases" }

// Lease keys in the bucket.
func ownerKey(node string) string  { return "owner." + node }
func workerKey(name string) string { return "worker." + name }
func keyName(key string) (kind, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// nameRE is what a worker name, a node id and a prefix must look like: one NATS
// subject token and one KV key part.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func checkName(what, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("remote: invalid %s %q: want 1 to 64 of A-Z a-z 0-9 _ -", what, name)
	}
	return nil
}

// leaseValue is the value of a lease key. Epoch is 0 in the entry that created the
// lease (its revision is the epoch) and the epoch in every renewal.
type leaseValue struct {
	Kind       string `json:"kind"` // "owner" or "worker"
	Name       string `json:"name"`
	Epoch      uint64 `json:"epoch,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// startReq asks a worker with a free slot to run a command (request on P.start,
// queue group P-workers).
type startReq struct {
	Task    string      `json:"task"`  // the owner node's key of the task, unique in the deployment
	Owner   string      `json:"owner"` // the owner node's id
	Epoch   uint64      `json:"epoch"` // the owner node's lease epoch
	Command string      `json:"command"`
	Dir     string      `json:"dir,omitempty"`
	Env     []string    `json:"env,omitempty"`
	Stdin   string      `json:"stdin,omitempty"`
	Limits  bash.Limits `json:"limits"`
	// Block asks for block mode (bash.Command.BlockOutput): the command waits
	// for its output to be read instead of losing any.
	Block bool `json:"block,omitempty"`
	// Grant is the first credit grant: the worker may send the task's output up
	// to this offset before a grant raises it (0: defaultOutputWindow).
	Grant int64 `json:"grant,omitempty"`
	// Scope, when set, makes the command belong to that scope rather than to the
	// owner node (WithScopes): it outlives the node's lease as an orphan, for
	// another node to adopt under a newer ScopeEpoch.
	Scope      string `json:"scope,omitempty"`
	ScopeEpoch uint64 `json:"scope_epoch,omitempty"`
}

// startReply answers a startReq. Full means the worker had no free slot after all
// (the owner tries another); Err, that the start failed and nothing runs.
type startReply struct {
	Worker string `json:"worker,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"` // the worker's lease epoch
	Full   bool   `json:"full,omitempty"`
	Err    string `json:"err,omitempty"`
}

// killReq asks the worker to cancel a task (request on P.w.<worker>.kill).
type killReq struct {
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Epoch  uint64 `json:"epoch"`
	Reason string `json:"reason"`
}

// inputReq writes to a task's input (request on P.w.<worker>.input); the reply
// comes once the write is done.
type inputReq struct {
	Task  string `json:"task"`
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	Data  []byte `json:"data,omitempty"`
	EOF   bool   `json:"eof,omitempty"`
}

// releaseReq tells the worker that the owner node dropped a scope-owned task's
// record: the worker frees what it kept of the command (request on
// P.w.<worker>.release, answered with a reply).
type releaseReq struct {
	Task  string `json:"task"`
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
}

// adoptReq asks every worker (P.adopt, plain subscription) to move the commands
// of Scope held under an older scope epoch to the node Owner, whose lease epoch is
// Epoch.
type adoptReq struct {
	Scope      string `json:"scope"`
	ScopeEpoch uint64 `json:"scope_epoch"`
	Owner      string `json:"owner"`
	Epoch      uint64 `json:"epoch"`
}

// adoptReply is one worker's answer to an adoptReq: the commands it moved.
type adoptReply struct {
	Worker string        `json:"worker"`
	Tasks  []adoptedTask `json:"tasks,omitempty"`
	Err    string        `json:"err,omitempty"`
}

// adoptedTask is one command a worker moved to the adopting node. Written and
// Cursor are worker-side offsets: the adopter's stream starts at Cursor.
type adoptedTask struct {
	Key         string `json:"key"`
	Worker      string `json:"worker"`
	WorkerEpoch uint64 `json:"worker_epoch"`
	Label       string `json:"label"`
	Exited      bool   `json:"exited,omitempty"`
	Status      string `json:"status,omitempty"`
	Detail      string `json:"detail,omitempty"`
	ExitCode    int    `json:"exit_code"`
	Written     int64  `json:"written"`
	Cursor      int64  `json:"cursor"`
	Block       bool   `json:"block,omitempty"` // block mode, as started
	Stdin       string `json:"stdin,omitempty"` // the stdin mode, as started
}

// reply answers a killReq, an inputReq, a releaseReq or a doneMsg.
type reply struct {
	Err     string `json:"err,omitempty"`
	Unknown bool   `json:"unknown,omitempty"` // no such task (any more)
	Ended   bool   `json:"ended,omitempty"`   // input: the command has exited
	Closed  bool   `json:"closed,omitempty"`  // input: eof was sent before
}

// doneMsg reports a task's outcome, once its processes are gone and every output
// byte was acknowledged (request on P.o.<node>.done; the owner's reply ends the
// worker's retries).
type doneMsg struct {
	Task     string `json:"task"`
	Worker   string `json:"worker"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
	Written  int64  `json:"written"`
	ExitCode int    `json:"exit_code"`
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("remote: encoding %T: %v", v, err)) // every wire type encodes
	}
	return b
}
