package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/taskrt/taskrt/producers/remote"
)

// defaultMaxForward bounds a forwarded call whose caller set no deadline: longer
// than the longest wait a task tool takes (task_output and task_wait cap theirs
// at 10 minutes).
const defaultMaxForward = 11 * time.Minute

// Errors of the Placement.
var (
	// ErrNoLease: this frontend holds no valid lease right now (the store is
	// unreachable, or it fenced itself and is acquiring a new one, or it was
	// paused past it), so it can neither answer for a scope nor take one.
	ErrNoLease = errors.New("placement: this frontend holds no lease (the NATS store is unreachable or its lease lapsed)")
	// ErrUnreachable: the scope's home frontend did not answer: it has no
	// subscriber (it is stopping, or died and its lease has not lapsed yet; then
	// the error is also ErrNotSent), or its lease ended before it answered.
	ErrUnreachable = errors.New("placement: the scope's home frontend is unreachable")
	// ErrNotSent: the request certainly did not reach the home (nobody
	// subscribes for it, or its lease had ended): sending it elsewhere cannot
	// run it twice.
	ErrNotSent = errors.New("placement: the request was not delivered")
	// ErrMoved: the scope's record is no longer this frontend's to write: another
	// frontend took the scope (this one was paused or cut off past its lease).
	ErrMoved = errors.New("placement: another frontend took the scope")
	// ErrHomeLive: Take found the scope's home alive; forward to it instead.
	ErrHomeLive = errors.New("placement: the scope's home is live")
)

// Where a scope lives, as Locate finds it.
type Where int

const (
	// Unknown means no record of the scope, or a record bound to another principal.
	// Answer as for any unknown scope.
	Unknown Where = iota
	// Here means this frontend is the scope's home under its current lease.
	Here
	// Elsewhere means another live frontend is its home; Forward the request there.
	Elsewhere
	// Orphaned means its home's lease ended (the frontend died, was paused or cut
	// off, or shut down): Take it.
	Orphaned
)

// Location is what Locate found.
type Location struct {
	Where Where
	// Home is the home frontend's id (for Orphaned, the home whose lease ended).
	Home string
	// Epoch is the home's lease epoch the record names.
	Epoch uint64
	// Gen is the scope's epoch: 1 at Register, one more at each Take.
	Gen uint64
}

// Request is a forwarded request: opaque to the placement, but for the header
// fields it adds (names starting with Taskrt-Forward-).
type Request struct {
	Header http.Header
	Body   []byte
}

// Response is the home's answer, returned to the forwarder unchanged.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Sent, if set by the home's Handler, is called on the home once the
	// forwarder acknowledged that the answer reached its caller (Delivered), and
	// never if no acknowledgement comes within ackWait: what must follow the
	// answer's delivery, such as marking the notices it carried delivered. Not
	// part of the answer.
	Sent func()
	// Delivered, set on the answer Forward returns, acknowledges to the home
	// that the answer reached the caller: call it once the answer was written.
	Delivered func()
}

// ackWait is how long a home waits for a forwarder's acknowledgement of an
// answer before it gives up on running the answer's Sent.
const ackWait = 30 * time.Second

// Handler serves a forwarded request on the home. ctx carries the caller's
// deadline (the time it had left when it was forwarded) and ends if the caller
// gives up earlier.
type Handler func(ctx context.Context, req Request) Response

// Option configures a Placement.
type Option func(*config)

type config struct {
	prefix       string
	replicas     int
	startTimeout time.Duration
	maxForward   time.Duration
	log          *slog.Logger
}

// WithPrefix sets the subjects' and the bucket's prefix (default "taskrt").
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithReplicas sets the bucket's replicas when this frontend creates it (3 on a
// three-server JetStream cluster).
func WithReplicas(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.replicas = n
		}
	}
}

// WithStartTimeout bounds New (finding the bucket).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.startTimeout = d
		}
	}
}

// WithMaxForward bounds a forwarded call whose context has no deadline (default
// defaultMaxForward).
func WithMaxForward(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxForward = d
		}
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// Task is what a scope's record keeps of one of its tasks: enough for the next
// home to make it a task again (actors.Tasks.Restore) under the id the model
// knows, and to find its command on the workers (Ref, remote.Adopted.Key).
type Task struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Label   string    `json:"label"`
	Ref     string    `json:"ref,omitempty"`
	Started time.Time `json:"started"`
	// Told: the model has had the task's end — a completion notice went out on a
	// result, or it read, waited on or killed the task at its end. The next home
	// sends no notice for it.
	Told bool `json:"told,omitempty"`
	// Ext: the task is also a protocol task of the tasks extension (tasks/get by
	// "<id>.<scope>"), kept TTLMS milliseconds after its end.
	Ext   bool  `json:"ext,omitempty"`
	TTLMS int64 `json:"ttl_ms,omitempty"`
}

// record is the value of a scope's key.
type record struct {
	Home      string `json:"home"`
	Epoch     uint64 `json:"epoch"` // the home's lease epoch
	Gen       uint64 `json:"gen"`   // the scope's epoch
	Principal string `json:"principal"`
	Tasks     []Task `json:"tasks,omitempty"`
}

// PrincipalHash is what a record keeps of the principal a scope is bound to (a
// SHA-256): compare a request's principal with Taken.Principal through it.
func PrincipalHash(p string) string {
	sum := sha256.Sum256([]byte("taskrt-scope\x00" + p))
	return hex.EncodeToString(sum[:])
}

// held is what this frontend holds of a scope it homes: the record as it wrote
// it last, and that write's revision (the next write is an Update on it).
type held struct {
	rev uint64
	rec record
}

// A Placement is one frontend's part in the placement of scopes: the records of
// the scopes it homes, their takeover when their home's lease ends, the
// forwarding of requests to other homes and the serving of those forwarded to
// it. The frontend's identity and lease are its remote.Producer's: one lease per
// process fences both its scopes and its commands. See the package
// documentation.
type Placement struct {
	cfg  config
	nc   *nats.Conn
	kv   jetstream.KeyValue
	node *remote.Producer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // served requests

	mu       sync.Mutex                                   // protects the fields below
	homed    map[string]*held                             // scopes homed here, by handle
	wmu      map[string]*sync.Mutex                       // one writer at a time per scope homed here
	inflight map[string]context.CancelFunc                // forwarded requests being served, by forward id
	forwards map[string]map[*byte]context.CancelCauseFunc // requests forwarded from here, by home
	awaiting map[string]map[chan struct{}]chan struct{}   // AwaitHomeEnd's waiters, by home
	acks     map[string]*time.Timer                       // answers sent, awaiting the forwarder's acknowledgement, by forward id
	onAck    map[string]func()                            // what each acknowledgement runs, by forward id
	subs     []*nats.Subscription
	closed   bool

	closeOnce sync.Once
}

// New joins nc's cluster as the frontend of node (an owner node of
// producers/remote, whose id and lease it shares): it finds or creates the bucket
// <prefix>_scopes. Call Serve to answer forwarded requests, and Close after the
// server using it has closed, before node.
func New(nc *nats.Conn, node *remote.Producer, opts ...Option) (*Placement, error) {
	cfg := config{prefix: "taskrt", replicas: 1, startTimeout: 30 * time.Second,
		maxForward: defaultMaxForward, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	if node == nil {
		return nil, errors.New("placement: no owner node")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), cfg.startTimeout)
	defer scancel()
	kv, err := ensureBucket(sctx, js, cfg.prefix+"_scopes", cfg.replicas)
	if err != nil {
		return nil, fmt.Errorf("placement: the scopes bucket: %w", err)
	}
	p := &Placement{cfg: cfg, nc: nc, kv: kv, node: node, homed: map[string]*held{}, wmu: map[string]*sync.Mutex{},
		inflight: map[string]context.CancelFunc{}, forwards: map[string]map[*byte]context.CancelCauseFunc{},
		awaiting: map[string]map[chan struct{}]chan struct{}{}, acks: map[string]*time.Timer{}, onAck: map[string]func(){}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	node.OnOwnerEnded(p.homeEnded)
	return p, nil
}

// ID is this frontend's id: its owner node's.
func (p *Placement) ID() string { return p.node.Node() }

// Node is the frontend's owner node.
func (p *Placement) Node() *remote.Producer { return p.node }

// Epoch is this frontend's current lease epoch; false while it holds no valid
// lease.
func (p *Placement) Epoch() (uint64, bool) {
	e, err := p.node.Epoch()
	return e, err == nil && p.node.Valid()
}

// Valid reports whether this frontend may answer for the scopes it homes now: its
// lease was renewed less than half a lease ago (a process resumed from a pause
// past its lease reads false at once, before its lease's goroutine runs).
func (p *Placement) Valid() bool { return p.node.Valid() }

// Lease is the frontend's lease duration.
func (p *Placement) Lease() time.Duration { return p.node.Lease() }

func scopeKey(scope string) string { return "scope." + scope }

// validScope reports whether a handle can be a key token at all (anything else
// is unknown without asking the store).
func validScope(scope string) bool {
	if scope == "" || len(scope) > 128 {
		return false
	}
	for _, r := range scope {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Register records a scope minted here, homed here under the current lease, bound
// to principal ("" for none), with no task and scope epoch 1: a Create, so an
// existing key is refused. It returns the lease epoch.
func (p *Placement) Register(ctx context.Context, scope, principal string) (uint64, error) {
	if !validScope(scope) {
		return 0, fmt.Errorf("placement: scope handle %q cannot be a key", scope)
	}
	epoch, ok := p.Epoch()
	if !ok {
		return 0, ErrNoLease
	}
	rec := record{Home: p.ID(), Epoch: epoch, Gen: 1, Principal: PrincipalHash(principal)}
	b, _ := json.Marshal(rec)
	rev, err := p.kv.Create(ctx, scopeKey(scope), b)
	if err != nil {
		return 0, fmt.Errorf("placement: registering scope: %w", err)
	}
	p.mu.Lock()
	p.homed[scope] = &held{rev: rev, rec: rec}
	p.mu.Unlock()
	return epoch, nil
}

// writer is the lock of one scope's writes here.
func (p *Placement) writer(scope string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.wmu[scope]
	if m == nil {
		m = &sync.Mutex{}
		p.wmu[scope] = m
	}
	return m
}

// Save writes the tasks of a scope homed here into its record: an Update on the
// revision this frontend wrote last, so that once another frontend took the
// scope, the stale home's writes all fail (ErrMoved, and the scope is no longer
// homed here). A Save that writes what the record holds already is not sent.
func (p *Placement) Save(ctx context.Context, scope string, tasks []Task) error {
	m := p.writer(scope)
	m.Lock()
	defer m.Unlock()
	p.mu.Lock()
	h := p.homed[scope]
	p.mu.Unlock()
	if h == nil {
		return ErrMoved
	}
	if slices.EqualFunc(h.rec.Tasks, tasks, sameTask) {
		return nil
	}
	if !p.Valid() {
		return ErrNoLease
	}
	rec := h.rec
	rec.Tasks = tasks
	b, _ := json.Marshal(rec)
	for try := 0; ; try++ {
		rev, err := p.kv.Update(ctx, scopeKey(scope), b, h.rev)
		switch {
		case err == nil:
			p.mu.Lock()
			p.homed[scope] = &held{rev: rev, rec: rec}
			p.mu.Unlock()
			return nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			// Another frontend took the scope — or an earlier write of this
			// home landed after its caller gave up waiting: the record then
			// still names this home, lease and scope epoch.
			cur, crev, ok, rerr := p.read(ctx, scope)
			if rerr == nil && ok && try < 2 && cur.Home == h.rec.Home && cur.Epoch == h.rec.Epoch && cur.Gen == h.rec.Gen {
				h = &held{rev: crev, rec: cur}
				continue
			}
			if rerr != nil {
				return fmt.Errorf("placement: saving scope: %w", rerr)
			}
			p.Abandon(scope)
			return ErrMoved
		default:
			return fmt.Errorf("placement: saving scope: %w", err)
		}
	}
}

func sameTask(a, b Task) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Label == b.Label && a.Ref == b.Ref && a.Started.Equal(b.Started) && a.Told == b.Told &&
		a.Ext == b.Ext && a.TTLMS == b.TTLMS
}

// Unregister deletes the record of a scope homed here that ended (closed,
// lapsed): a conditional Delete on the revision this frontend wrote last, so a
// record another frontend took meanwhile stays.
func (p *Placement) Unregister(ctx context.Context, scope string) {
	m := p.writer(scope)
	m.Lock()
	defer m.Unlock()
	p.mu.Lock()
	h := p.homed[scope]
	delete(p.homed, scope)
	delete(p.wmu, scope)
	p.mu.Unlock()
	if h != nil {
		_ = p.kv.Delete(ctx, scopeKey(scope), jetstream.LastRevision(h.rev))
	}
}

// Abandon forgets a scope homed here without a write: its record stays for the
// frontend that takes it (this frontend lost its lease, or is shutting down and
// hands its scopes on).
func (p *Placement) Abandon(scope string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.homed, scope)
	delete(p.wmu, scope)
}

// read reads a scope's record; ok false for none.
func (p *Placement) read(ctx context.Context, scope string) (record, uint64, bool, error) {
	e, err := p.kv.Get(ctx, scopeKey(scope))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return record{}, 0, false, nil
	}
	if err != nil {
		return record{}, 0, false, fmt.Errorf("placement: reading scope: %w", err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return record{}, 0, false, fmt.Errorf("placement: malformed scope record: %w", err)
	}
	return rec, e.Revision(), true, nil
}

// Locate finds the home of scope for principal.
func (p *Placement) Locate(ctx context.Context, scope, principal string) (Location, error) {
	if !validScope(scope) {
		return Location{}, nil
	}
	rec, _, ok, err := p.read(ctx, scope)
	if err != nil || !ok || rec.Principal != PrincipalHash(principal) {
		return Location{}, err
	}
	loc := Location{Home: rec.Home, Epoch: rec.Epoch, Gen: rec.Gen}
	live, err := p.node.OwnerLive(ctx, rec.Home, rec.Epoch)
	switch {
	case err != nil:
		return Location{}, err
	case !live:
		loc.Where = Orphaned
	case rec.Home == p.ID():
		loc.Where = Here
	default:
		loc.Where = Elsewhere
	}
	return loc, nil
}

// Taken is a scope this frontend took: its new epoch and what its record kept.
type Taken struct {
	Gen       uint64 // the scope's new epoch: adopt its commands under it
	Epoch     uint64 // this frontend's lease epoch it is homed under
	From      string // the home whose lease ended
	Principal string // PrincipalHash of the principal it is bound to
	Tasks     []Task
}

// Take makes this frontend the home of a scope whose home's lease ended: an
// Update on the revision read, naming this frontend, its lease epoch and the
// scope's next epoch, so that of concurrent takers exactly one wins (the others
// get ErrHomeLive, or ErrMoved when the winner's lease has not shown yet). Only
// an orphaned scope is taken: one whose home is live returns ErrHomeLive, an
// unknown one false.
func (p *Placement) Take(ctx context.Context, scope string) (Taken, bool, error) {
	if !validScope(scope) {
		return Taken{}, false, nil
	}
	epoch, ok := p.Epoch()
	if !ok {
		return Taken{}, false, ErrNoLease
	}
	rec, rev, found, err := p.read(ctx, scope)
	if err != nil || !found {
		return Taken{}, false, err
	}
	if rec.Home == p.ID() && rec.Epoch == epoch {
		return Taken{}, true, ErrHomeLive // homed here already
	}
	live, err := p.node.OwnerLive(ctx, rec.Home, rec.Epoch)
	if err != nil {
		return Taken{}, true, err
	}
	if live {
		return Taken{}, true, ErrHomeLive
	}
	from := rec.Home
	rec.Home, rec.Epoch, rec.Gen = p.ID(), epoch, rec.Gen+1
	b, _ := json.Marshal(rec)
	nrev, err := p.kv.Update(ctx, scopeKey(scope), b, rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		return Taken{}, true, ErrMoved
	case err != nil:
		return Taken{}, true, fmt.Errorf("placement: taking scope: %w", err)
	}
	p.mu.Lock()
	p.homed[scope] = &held{rev: nrev, rec: rec}
	p.mu.Unlock()
	p.cfg.log.Info("placement: took a scope whose home's lease ended", "from", from, "gen", rec.Gen)
	return Taken{Gen: rec.Gen, Epoch: epoch, From: from, Principal: rec.Principal, Tasks: rec.Tasks}, true, nil
}

// Orphans lists the scopes whose record names node under epoch as their home: a
// scan of the bucket's scope keys (one read per scope), for a frontend that saw
// that lease end and takes those scopes before the workers' orphan grace kills
// their commands.
func (p *Placement) Orphans(ctx context.Context, node string, epoch uint64) ([]string, error) {
	keys, err := p.kv.ListKeysFiltered(ctx, "scope.*")
	if err != nil {
		return nil, fmt.Errorf("placement: listing scopes: %w", err)
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, strings.TrimPrefix(k, "scope."))
	}
	var out []string
	for _, scope := range all {
		rec, _, ok, err := p.read(ctx, scope)
		if err != nil {
			return out, err
		}
		if ok && rec.Home == node && rec.Epoch == epoch {
			out = append(out, scope)
		}
	}
	return out, nil
}

// The headers a forward adds.
const (
	hdrID      = "Taskrt-Forward-Id"
	hdrTimeout = "Taskrt-Forward-Timeout" // the caller's time left, in ms: clocks need not agree
	hdrFrom    = "Taskrt-Forward-From"
	hdrStatus  = "Taskrt-Forward-Status"
	hdrError   = "Taskrt-Forward-Error"
)

// deadlineGrace is how long after the caller's deadline the home ends a
// forwarded call that no cancel reached.
const deadlineGrace = 250 * time.Millisecond

// Close stops serving forwarded requests (those being served are cancelled and
// awaited). The records of the scopes still homed here stay: once the owner
// node's lease ends (its Close), the other frontends take them. Call it after
// the server that uses the Placement has closed. It closes neither the NATS
// connection nor the owner node.
func (p *Placement) Close(context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		subs := p.subs
		for id, t := range p.acks {
			t.Stop()
			delete(p.acks, id)
			delete(p.onAck, id)
		}
		p.mu.Unlock()
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		p.cancel()
		p.wg.Wait()
	})
	return nil
}
