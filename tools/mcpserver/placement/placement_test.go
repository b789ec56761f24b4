package placement_test

import (
	"context"
	"errors"
	"net/http"
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

// join starts a frontend's placement on a connection of its own.
func join(t *testing.T, ns *remote.Server, id string) (*placement.Placement, *nats.Conn) {
	t.Helper()
	nc, err := remote.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := placement.New(nc, placement.WithID(id), placement.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, nc
}

func TestLocate(t *testing.T) {
	ns := natsServer(t)
	pa, _ := join(t, ns, "fe-a")
	pb, _ := join(t, ns, "fe-b")
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
		if c.want == placement.Elsewhere && (loc.Home != "fe-a" || loc.Epoch != epoch) {
			t.Errorf("Locate names home %s epoch %d, want fe-a epoch %d", loc.Home, loc.Epoch, epoch)
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

// TestLostIsTakenOnce: when a home's lease lapses, concurrent survivors all find
// its scope lost, and exactly one of them took it (every answer names the same
// record revision).
func TestLostIsTakenOnce(t *testing.T) {
	ns := natsServer(t)
	pa, nca := join(t, ns, "fe-a")
	ctx := context.Background()
	if _, err := pa.Register(ctx, "SCOPE2", ""); err != nil {
		t.Fatal(err)
	}
	var survivors []*placement.Placement
	for _, id := range []string{"fe-b", "fe-c", "fe-d"} {
		p, _ := join(t, ns, id)
		survivors = append(survivors, p)
	}
	nca.Close() // cut off: its lease lapses
	cut := time.Now()
	locs := make([]placement.Location, len(survivors))
	var wg sync.WaitGroup
	for i, p := range survivors {
		wg.Go(func() {
			for time.Since(cut) < time.Minute {
				loc, err := p.Locate(ctx, "SCOPE2", "")
				if err != nil {
					t.Errorf("%s: %v", p.ID(), err)
					return
				}
				if loc.Where == placement.Lost {
					locs[i] = loc
					return
				}
			}
		})
	}
	wg.Wait()
	for i, loc := range locs {
		if loc.Where != placement.Lost || loc.Home != "fe-a" || loc.Revision != locs[0].Revision {
			t.Errorf("%s found %+v, want lost fe-a at revision %d", survivors[i].ID(), loc, locs[0].Revision)
		}
	}
	t.Logf("lost after %s (lease %s)", time.Since(cut).Round(time.Millisecond), lease)
}

func TestForward(t *testing.T) {
	ns := natsServer(t)
	pa, _ := join(t, ns, "fe-a")
	pb, _ := join(t, ns, "fe-b")
	ended := make(chan time.Duration, 1)
	begun := make(chan struct{}, 1)
	if err := pb.Serve(func(ctx context.Context, req placement.Request) placement.Response {
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
	resp, err := pa.Forward(ctx, "fe-b", placement.Request{Header: hdr, Body: []byte("body")})
	if err != nil || resp.Status != http.StatusTeapot || string(resp.Body) != "hi:body" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("Forward = %+v, %v", resp, err)
	}

	// The caller's deadline goes with the request: the caller gets the deadline
	// error, and the home's context ends.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := pa.Forward(dctx, "fe-b", placement.Request{Body: []byte("wait")}); !errors.Is(err, context.DeadlineExceeded) {
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
		_, err := pa.Forward(cctx, "fe-b", placement.Request{Body: []byte("wait")})
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

	if _, err := pb.Forward(ctx, "fe-nobody", placement.Request{}); !errors.Is(err, placement.ErrUnreachable) {
		t.Errorf("Forward to a frontend that is not there: %v", err)
	}
}
