package placement

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLease is a frontend's lease (WithLease): the same default as the owner
// nodes' and workers' of producers/remote.
const DefaultLease = 10 * time.Second

// defaultMaxForward bounds a forwarded call whose caller set no deadline: longer
// than the longest wait a task tool takes (task_output and task_wait cap theirs
// at 10 minutes).
const defaultMaxForward = 11 * time.Minute

// defaultLostRetention is how long a scope found lost is remembered as lost (and
// answered so) before its record is deleted and it reads as unknown.
const defaultLostRetention = 30 * time.Minute

// Errors of Locate and Forward.
var (
	// ErrNoLease: this frontend holds no lease right now (the store is
	// unreachable, or it fenced itself and is acquiring a new one), so it can
	// neither register a scope nor take one.
	ErrNoLease = errors.New("placement: this frontend holds no lease (the NATS store is unreachable or its lease lapsed)")
	// ErrUnreachable: the scope's home frontend did not answer (it has no
	// subscriber: it is stopping, or died and its lease has not lapsed yet).
	ErrUnreachable = errors.New("placement: the scope's home frontend is unreachable")
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
	// Lost means its home's lease ended (the frontend died, hung or was cut off). A
	// survivor took the scope's record by compare-and-set and marked it lost: its
	// state lived only in the dead home's memory, and its tasks died with that
	// home's owner lease.
	Lost
)

// Location is what Locate found.
type Location struct {
	Where Where
	// Home is the home frontend's id (Here, Elsewhere); for Lost, the home that
	// was lost.
	Home string
	// Epoch is the home's lease epoch the record names.
	Epoch uint64
	// Revision is the scope record's revision: the scope's own epoch, which
	// changes whenever its home does.
	Revision uint64
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
}

// Handler serves a forwarded request on the home. ctx carries the caller's
// deadline (the time it had left when it was forwarded) and ends if the caller
// gives up earlier.
type Handler func(ctx context.Context, req Request) Response

// Option configures a Placement.
type Option func(*config)

type config struct {
	id            string
	prefix        string
	lease         time.Duration
	replicas      int
	startTimeout  time.Duration
	maxForward    time.Duration
	lostRetention time.Duration
	log           *slog.Logger
}

// WithID sets the frontend's id (default: the host name and 8 random characters, new at every start): letters, digits, - and _
// only, unique among the live frontends.
func WithID(id string) Option { return func(c *config) { c.id = id } }

// WithPrefix sets the subjects' and the bucket's prefix (default "taskrt").
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithLease sets the frontend's lease (default DefaultLease).
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithReplicas sets the bucket's replicas when this frontend creates it (3 on a
// three-server JetStream cluster).
func WithReplicas(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.replicas = n
		}
	}
}

// WithStartTimeout bounds New (finding the bucket, the first lease).
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

// WithLostRetention sets how long a lost scope is answered as lost (default
// defaultLostRetention; a Server passes its idle timeout).
func WithLostRetention(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lostRetention = d
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

// defaultID is a new frontend id: the host name (characters a NATS subject token
// cannot hold become -) and 8 random characters, so that a restarted process
// never takes the id, nor the epoch, of its previous life.
func defaultID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "frontend"
	}
	return sanitize(host) + "-" + strings.ToLower(rand.Text()[:8])
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, s)
}

// record is the value of a scope's key.
type record struct {
	Home      string `json:"home"`
	Epoch     uint64 `json:"epoch"`          // the home's lease epoch
	Principal string `json:"principal"`      // sha256 of the principal the scope is bound to
	Lost      string `json:"lost,omitempty"` // the home that was lost, once a survivor took it
}

func principalHash(p string) string {
	sum := sha256.Sum256([]byte("taskrt-scope\x00" + p))
	return hex.EncodeToString(sum[:])
}

// A Placement is one frontend's part in the placement of scopes: its lease, the
// records of the scopes it homes, the forwarding of requests to other homes and
// the serving of those forwarded to it. See the package documentation.
type Placement struct {
	cfg    config
	nc     *nats.Conn
	kv     jetstream.KeyValue
	holder *holder
	watch  *watcher

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the holder, the watcher, served requests, lost-record timers

	mu       sync.Mutex                    // protects the fields below
	regs     map[string]uint64             // scopes registered here → their record's revision
	inflight map[string]context.CancelFunc // forwarded requests being served, by forward id
	lost     map[string]*time.Timer        // lost records this frontend took, until deleted
	subs     []*nats.Subscription
	onFence  func(epoch uint64)
	closed   bool

	closeOnce sync.Once
}

// New joins nc's cluster as a frontend: it finds or creates the bucket
// <prefix>_scopes, acquires the lease frontend.<id> and watches the other
// frontends' leases. Call Serve to answer forwarded requests, and Close after
// the server using it has closed.
func New(nc *nats.Conn, opts ...Option) (*Placement, error) {
	cfg := config{prefix: "taskrt", lease: DefaultLease, replicas: 1, startTimeout: 30 * time.Second,
		maxForward: defaultMaxForward, lostRetention: defaultLostRetention, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.id == "" {
		cfg.id = defaultID()
	}
	if sanitize(cfg.id) != cfg.id || cfg.id == "" {
		return nil, fmt.Errorf("placement: frontend id %q: want letters, digits, - and _ only", cfg.id)
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
	p := &Placement{cfg: cfg, nc: nc, kv: kv, regs: map[string]uint64{}, inflight: map[string]context.CancelFunc{}, lost: map[string]*time.Timer{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.watch = &watcher{kv: kv, log: cfg.log, tick: max(cfg.lease/8, 10*time.Millisecond), leases: map[string]*seen{}, ready: make(chan struct{})}
	kw, err := kv.Watch(p.ctx, "frontend.>")
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("placement: watching the frontends: %w", err)
	}
	p.wg.Go(func() { p.watch.run(p.ctx, kw) })
	select {
	case <-p.watch.ready:
	case <-sctx.Done():
		p.cancel()
		p.wg.Wait()
		return nil, fmt.Errorf("placement: watching the frontends: %w", sctx.Err())
	}
	p.holder = &holder{kv: kv, key: "frontend." + cfg.id, d: cfg.lease, log: cfg.log, fence: p.fenced,
		value: leaseValue{Frontend: cfg.id, DurationMS: cfg.lease.Milliseconds()}}
	if err := p.holder.acquire(sctx); err != nil {
		p.cancel()
		p.wg.Wait()
		return nil, err
	}
	p.wg.Go(func() { p.holder.run(p.ctx) })
	return p, nil
}

// ID is this frontend's id.
func (p *Placement) ID() string { return p.cfg.id }

// Epoch is this frontend's current lease epoch; false while it holds none.
func (p *Placement) Epoch() (uint64, bool) { return p.holder.current() }

// Lease is the frontend's lease duration.
func (p *Placement) Lease() time.Duration { return p.cfg.lease }

// OnFence sets what runs when this frontend loses its lease of epoch (it could
// not renew it for half a lease, or someone ended it): every scope registered
// under that epoch is no longer this frontend's to answer for. f runs on the
// lease's goroutine and must not block on the network.
func (p *Placement) OnFence(f func(epoch uint64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onFence = f
}

func (p *Placement) fenced(epoch uint64) {
	p.mu.Lock()
	f := p.onFence
	p.mu.Unlock()
	if f != nil {
		f(epoch)
	}
}

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

// Register records a scope minted here, homed here under the current epoch,
// bound to principal ("" for none): a Create, so an existing key is refused. It
// returns the epoch.
func (p *Placement) Register(ctx context.Context, scope, principal string) (uint64, error) {
	if !validScope(scope) {
		return 0, fmt.Errorf("placement: scope handle %q cannot be a key", scope)
	}
	epoch, held := p.holder.current()
	if !held {
		return 0, ErrNoLease
	}
	b, _ := json.Marshal(record{Home: p.cfg.id, Epoch: epoch, Principal: principalHash(principal)})
	rev, err := p.kv.Create(ctx, scopeKey(scope), b)
	if err != nil {
		return 0, fmt.Errorf("placement: registering scope: %w", err)
	}
	p.mu.Lock()
	p.regs[scope] = rev
	p.mu.Unlock()
	return epoch, nil
}

// Unregister deletes the record of a scope registered here that ended (closed,
// lapsed): a conditional Delete on the revision Register wrote, so a record a
// survivor took meanwhile stays.
func (p *Placement) Unregister(ctx context.Context, scope string) {
	p.mu.Lock()
	rev, ok := p.regs[scope]
	delete(p.regs, scope)
	p.mu.Unlock()
	if ok {
		_ = p.kv.Delete(ctx, scopeKey(scope), jetstream.LastRevision(rev))
	}
}

// Locate finds the home of scope for principal. A record whose home's lease
// ended is taken by this frontend with a compare-and-set (Update on the revision
// read) and marked lost; of concurrent takers exactly one succeeds, and the
// others then read the lost record. A lost scope is never homed again: its state
// is gone with its home.
func (p *Placement) Locate(ctx context.Context, scope, principal string) (Location, error) {
	if !validScope(scope) {
		return Location{}, nil
	}
	for try := 0; ; try++ {
		e, err := p.kv.Get(ctx, scopeKey(scope))
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return Location{}, nil
		}
		if err != nil {
			return Location{}, fmt.Errorf("placement: reading scope: %w", err)
		}
		var rec record
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return Location{}, fmt.Errorf("placement: malformed scope record: %w", err)
		}
		if rec.Principal != principalHash(principal) {
			return Location{}, nil
		}
		loc := Location{Home: rec.Home, Epoch: rec.Epoch, Revision: e.Revision()}
		if rec.Lost != "" {
			loc.Where, loc.Home = Lost, rec.Lost
			return loc, nil
		}
		live, err := p.homeLive(ctx, rec)
		if err != nil {
			return Location{}, err
		}
		if live {
			loc.Where = Elsewhere
			if rec.Home == p.cfg.id {
				loc.Where = Here
			}
			return loc, nil
		}
		epoch, held := p.holder.current()
		if !held {
			return Location{}, ErrNoLease
		}
		taken := rec
		taken.Home, taken.Epoch, taken.Lost = p.cfg.id, epoch, rec.Home
		b, _ := json.Marshal(taken)
		rev, err := p.kv.Update(ctx, scopeKey(scope), b, e.Revision())
		if err == nil {
			p.cfg.log.Warn("placement: took a scope whose home was lost", "home", rec.Home, "epoch", rec.Epoch)
			p.forgetLater(scope, rev)
			return Location{Where: Lost, Home: rec.Home, Epoch: epoch, Revision: rev}, nil
		}
		if try >= 3 || !(errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)) {
			return Location{}, fmt.Errorf("placement: taking scope: %w", err)
		}
		// Someone else changed it first: read again.
	}
}

// homeLive reports whether the record's home still holds the lease the record
// names.
func (p *Placement) homeLive(ctx context.Context, rec record) (bool, error) {
	if rec.Home == p.cfg.id {
		epoch, held := p.holder.current()
		return held && epoch == rec.Epoch, nil
	}
	key := "frontend." + rec.Home
	if live, known := p.watch.live(key, rec.Epoch); known {
		return live, nil
	}
	e, err := p.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("placement: reading the home's lease: %w", err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return false, fmt.Errorf("placement: malformed lease: %w", err)
	}
	epoch := v.Epoch
	if epoch == 0 {
		epoch = e.Revision()
	}
	return epoch == rec.Epoch, nil
}

// forgetLater deletes a lost record this frontend took after the lost retention.
func (p *Placement) forgetLater(scope string, rev uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if t := p.lost[scope]; t != nil {
		t.Stop()
	}
	p.lost[scope] = time.AfterFunc(p.cfg.lostRetention, func() {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		delete(p.lost, scope)
		p.wg.Add(1)
		p.mu.Unlock()
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		defer cancel()
		_ = p.kv.Delete(ctx, scopeKey(scope), jetstream.LastRevision(rev))
	})
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
// awaited), stops the lease and ends it (a conditional Delete): the scopes still
// registered here then read as lost to every other frontend. Call it after the
// server that uses the Placement has closed (its scopes ended and unregistered).
// It does not close the NATS connection.
func (p *Placement) Close(context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		subs := p.subs
		for _, t := range p.lost {
			t.Stop()
		}
		p.lost = map[string]*time.Timer{}
		p.mu.Unlock()
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		p.cancel()
		p.wg.Wait()
		rctx, cancel := context.WithTimeout(context.Background(), renewEvery(p.cfg.lease)+time.Second)
		defer cancel()
		p.holder.release(rctx)
	})
	return nil
}
