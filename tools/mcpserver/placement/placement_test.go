package placement_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/producers/remote"
	"github.com/taskrt/taskrt/tools/mcpserver/placement"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const lease = time.Second

func natsServer(t *testing.T) *remote.Server {
	t.Helper()
	ns, err := remote.StartServer(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}

// join starts a frontend — an owner node and its placement — on a connection of
// its own.
func join(t *testing.T, ns *remote.Server) (*placement.Placement, *nats.Conn) {
	t.Helper()
	nc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	node, err := remote.New(nc, remote.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	p, err := placement.New(nc, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, nc
}

func TestLocate(t *testing.T) {
	ns := natsServer(t)
	pa, _ := join(t, ns)
	pb, _ := join(t, ns)
	ctx := context.Background()
	epoch, err := pa.Register(ctx, "SCOPE1", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if cur, held := pa.Epoch(); !held || cur != epoch {
		t.Errorf("registered under epoch %d, the lease's is %d (held %v)", epoch, cur, held)
	}
	for _, c := range []struct {
		p         *placement.Placement
		scope, pr string
		want      placement.Where
	}{
		{pa, "SCOPE1", "alice", placement.Here},
		{pb, "SCOPE1", "alice", placement.Elsewhere},
		{pb, "SCOPE1", "bob", placement.Unknown},
		{pb, "SCOPE1", "", placement.Unknown},
		{pb, "NOSUCH", "alice", placement.Unknown},
		{pb, "not.a.key", "alice", placement.Unknown},
	} {
		loc, err := c.p.Locate(ctx, c.scope, c.pr)
		if err != nil || loc.Where != c.want {
			t.Errorf("%s: Locate(%s, %q) = %+v, %v; want where %d", c.p.ID(), c.scope, c.pr, loc, err, c.want)
		}
		if c.want == placement.Elsewhere && (loc.Home != pa.ID() || loc.Epoch != epoch || loc.Gen != 1) {
			t.Errorf("Locate names home %s epoch %d gen %d, want %s epoch %d gen 1", loc.Home, loc.Epoch, loc.Gen, pa.ID(), epoch)
		}
	}
	if _, err := pa.Register(ctx, "SCOPE1", "alice"); err == nil {
		t.Error("a second Register of the same scope succeeded")
	}
	pa.Unregister(ctx, "SCOPE1")
	if loc, err := pb.Locate(ctx, "SCOPE1", "alice"); err != nil || loc.Where != placement.Unknown {
		t.Errorf("after Unregister: %+v, %v", loc, err)
	}
}

// TestOrphanIsTakenOnce: when a home's lease lapses, its scope reads as
// orphaned; of concurrent survivors taking it, exactly one wins, with the scope's
// next epoch and the tasks its record kept, and the stale home can write nothing
// more.
func TestOrphanIsTakenOnce(t *testing.T) {
	ns := natsServer(t)
	pa, nca := join(t, ns)
	ctx := context.Background()
	if _, err := pa.Register(ctx, "SCOPE2", "alice"); err != nil {
		t.Fatal(err)
	}
	want := []placement.Task{{ID: "bash-7", Kind: "bash", Label: "sleep 600", Ref: "k1", Started: time.Unix(1700000000, 0).UTC()}}
	if err := pa.Save(ctx, "SCOPE2", want); err != nil {
		t.Fatal(err)
	}
	var survivors []*placement.Placement
	for range 3 {
		p, _ := join(t, ns)
		survivors = append(survivors, p)
	}
	for _, p := range survivors {
		if _, found, err := p.Take(ctx, "SCOPE2"); !found || !errors.Is(err, placement.ErrHomeLive) {
			t.Errorf("%s: Take while the home lives = %v, %v; want ErrHomeLive", p.ID(), found, err)
		}
	}
	home := pa.ID()
	epoch, _ := pa.Epoch()
	nca.Close() // cut off: its lease lapses
	cut := time.Now()
	for {
		loc, err := survivors[0].Locate(ctx, "SCOPE2", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if loc.Where == placement.Orphaned {
			break
		}
		if time.Since(cut) > time.Minute {
			t.Fatalf("not orphaned a minute after the cut: %+v", loc)
		}
	}
	t.Logf("orphaned after %s (lease %s)", time.Since(cut).Round(time.Millisecond), lease)
	if got, err := survivors[1].Orphans(ctx, home, epoch); err != nil || !slices.Equal(got, []string{"SCOPE2"}) {
		t.Errorf("Orphans(%s, %d) = %q, %v", home, epoch, got, err)
	}
	type result struct {
		taken placement.Taken
		err   error
	}
	results := make([]result, len(survivors))
	var wg sync.WaitGroup
	for i, p := range survivors {
		wg.Go(func() {
			tk, _, err := p.Take(ctx, "SCOPE2")
			results[i] = result{tk, err}
		})
	}
	wg.Wait()
	winners := 0
	for i, r := range results {
		switch {
		case r.err == nil:
			winners++
			if r.taken.Gen != 2 || r.taken.From != home || r.taken.Principal != placement.PrincipalHash("alice") || !slices.EqualFunc(r.taken.Tasks, want, func(a, b placement.Task) bool { return a == b }) {
				t.Errorf("%s took %+v, want gen 2 from %s with %+v", survivors[i].ID(), r.taken, home, want)
			}
		case errors.Is(r.err, placement.ErrMoved), errors.Is(r.err, placement.ErrHomeLive):
		default:
			t.Errorf("%s: Take: %v", survivors[i].ID(), r.err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d survivors took the scope, want exactly 1: %+v", winners, results)
	}
	if err := pa.Save(ctx, "SCOPE2", nil); !errors.Is(err, placement.ErrNoLease) && !errors.Is(err, placement.ErrMoved) {
		t.Errorf("a Save by the stale home = %v, want it refused", err)
	}
}

func TestForward(t *testing.T) {
	ns := natsServer(t)
	pa, _ := join(t, ns)
	pb, _ := join(t, ns)
	ended := make(chan time.Duration, 1)
	begun := make(chan struct{}, 1)
	sent := make(chan struct{})
	if err := pb.Serve(func(ctx context.Context, req placement.Request) placement.Response {
		if string(req.Body) == "ack" {
			return placement.Response{Status: http.StatusOK, Sent: func() { close(sent) }}
		}
		if string(req.Body) == "wait" {
			began := time.Now()
			begun <- struct{}{}
			<-ctx.Done()
			ended <- time.Since(began)
			return placement.Response{Status: http.StatusOK}
		}
		h := http.Header{}
		h.Set("Content-Type", "text/plain")
		return placement.Response{Status: http.StatusTeapot, Header: h, Body: append([]byte(req.Header.Get("X-Echo")+":"), req.Body...)}
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hdr := http.Header{}
	hdr.Set("X-Echo", "hi")
	resp, err := pa.Forward(ctx, pb.ID(), placement.Request{Header: hdr, Body: []byte("body")})
	if err != nil || resp.Status != http.StatusTeapot || string(resp.Body) != "hi:body" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("Forward = %+v, %v", resp, err)
	}

	// What the home does once its answer was delivered waits for the
	// forwarder's word that it was.
	acked, err := pa.Forward(ctx, pb.ID(), placement.Request{Body: []byte("ack")})
	if err != nil || acked.Delivered == nil {
		t.Fatalf("Forward = %+v, %v", acked, err)
	}
	select {
	case <-sent:
		t.Fatal("the home ran Sent before the forwarder said the answer was delivered")
	default:
	}
	acked.Delivered()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the home did not run Sent once the answer was delivered")
	}

	// The caller's deadline goes with the request: the caller gets the deadline
	// error, and the home's context ends.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := pa.Forward(dctx, pb.ID(), placement.Request{Body: []byte("wait")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Forward past its deadline: %v", err)
	}
	<-begun
	select {
	case d := <-ended:
		t.Logf("the home's call ended after %s", d.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the home's call did not end")
	}

	// A caller that gives up early ends the home's call too.
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := pa.Forward(cctx, pb.ID(), placement.Request{Body: []byte("wait")})
		done <- err
	}()
	<-begun // the home serves it: now the caller gives up
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Forward cancelled: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the home's call did not end when its caller gave up")
	}

	if _, err := pb.Forward(ctx, "fe-nobody", placement.Request{}); !errors.Is(err, placement.ErrUnreachable) || !errors.Is(err, placement.ErrNotSent) {
		t.Errorf("Forward to a frontend that is not there: %v, want ErrUnreachable and ErrNotSent", err)
	}
}

// TestAwaitHomeEnd: a wait for a live home's lease ends with ctx; one for a home
// cut off ends when its lease does; one for an ended lease returns at once.
func TestAwaitHomeEnd(t *testing.T) {
	ns := natsServer(t)
	pa, _ := join(t, ns)
	pb, ncb := join(t, ns)
	epoch, ok := pb.Epoch()
	if !ok {
		t.Fatal("B holds no lease")
	}
	short, cancel := context.WithTimeout(context.Background(), lease/4)
	defer cancel()
	if err := pa.AwaitHomeEnd(short, pb.ID(), epoch); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a live home: %v, want the deadline", err)
	}
	ncb.Close() // B is cut off
	cut := time.Now()
	if err := pa.AwaitHomeEnd(context.Background(), pb.ID(), epoch); err != nil {
		t.Fatalf("waiting for a cut-off home: %v", err)
	}
	t.Logf("B's lease ended %s after the cut (lease %s)", time.Since(cut).Round(time.Millisecond), lease)
	if live, err := pa.Node().OwnerLive(context.Background(), pb.ID(), epoch); err != nil || live {
		t.Errorf("after the wait B's lease is live = %v, %v", live, err)
	}
	again, stop := context.WithTimeout(context.Background(), lease/4)
	defer stop()
	if err := pa.AwaitHomeEnd(again, pb.ID(), epoch); err != nil {
		t.Errorf("waiting again for the ended lease: %v, want nil at once", err)
	}
}
