//go:build linux

package livepage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// source is a fake livepage.Source: the owners the test registered, in the order
// it registered them, and a shutdown the test triggers.
type source struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // protects the fields below
	owners  []livepage.Owner
	closing bool
}

func newSource() *source {
	ctx, cancel := context.WithCancel(bg)
	return &source{ctx: ctx, cancel: cancel}
}

func (s *source) Owners() []livepage.Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owners)
}

func (s *source) Closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *source) Context() context.Context { return s.ctx }

// shutDown is the embedder's Close as the page sees it: closing first, then its
// context ends.
func (s *source) shutDown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cancel()
}

// setup is what a test's page is made of; the zero value is a page over a default
// runtime, served as is.
type setup struct {
	runtime []actors.Option
	page    []livepage.Option
	// wrap, when not nil, wraps the page's handler.
	wrap func(http.Handler) http.Handler
}

// page is a runtime, the live page over it served over HTTP, and a bash producer
// for the tasks that need real processes.
type page struct {
	rt   *actors.Runtime
	src  *source
	hs   *httptest.Server
	hc   *http.Client
	bash *bash.Producer
}

// newPage starts a page as su says. At the end of the test the runtime is closed
// and must hold nothing; the streams the test opened are closed before.
func newPage(t *testing.T, su setup) *page {
	t.Helper()
	rt, err := actors.NewRuntime(su.runtime...)
	if err != nil {
		t.Fatal(err)
	}
	// A surface through which a model would see the tasks' notices: the runtime
	// refuses background tasks nobody can hear of.
	detach := rt.Tasks().AttachSurface("livepage test")
	p := &page{rt: rt, src: newSource(), bash: bash.New()}
	t.Cleanup(func() {
		defer detach()
		p.src.shutDown()
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("runtime Close: %v", err)
		}
		if got, want := rt.Stats(), (actors.Stats{}); got != want {
			t.Errorf("runtime Stats after Close = %+v, want %+v", got, want)
		}
		if err := p.bash.Close(); err != nil {
			t.Errorf("bash producer Close: %v", err)
		}
	})
	var h http.Handler = livepage.New(rt, p.src, su.page...)
	if su.wrap != nil {
		h = su.wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle(livepage.Path, h)
	p.hs = httptest.NewServer(mux)
	t.Cleanup(p.hs.Close)
	p.hc = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(p.hc.CloseIdleConnections)
	return p
}

// register registers an owner, listed by the Source from before its registration,
// as an embedder must.
func (p *page) register(t *testing.T, id messages.AgentID) {
	t.Helper()
	p.src.mu.Lock()
	p.src.owners = append(p.src.owners, livepage.Owner{ID: id, Began: time.Now()})
	p.src.mu.Unlock()
	if err := p.rt.Agents().Register(bg, id, actors.WithInjector(func(context.Context, string) error { return nil })); err != nil {
		t.Fatal(err)
	}
}

// dispose disposes of an owner, no longer listed from before its disposal.
func (p *page) dispose(t *testing.T, id messages.AgentID) {
	t.Helper()
	p.src.mu.Lock()
	p.src.owners = slices.DeleteFunc(p.src.owners, func(o livepage.Owner) bool { return o.ID == id })
	p.src.mu.Unlock()
	if err := p.rt.Agents().Dispose(bg, id); err != nil {
		t.Fatal(err)
	}
}

// startBash starts command as a background bash task of owner, in dir ("" for the
// current directory).
func (p *page) startBash(t *testing.T, owner messages.AgentID, command, dir string) messages.TaskID {
	t.Helper()
	id, err := p.rt.Tasks().Start(bg, p.bash.Spec(owner, bash.Command{Command: command, Dir: dir}))
	if err != nil {
		t.Fatalf("bash %q: %v", command, err)
	}
	return id
}

// kill kills task id as owner.
func (p *page) kill(t *testing.T, id messages.TaskID, owner messages.AgentID) {
	t.Helper()
	if _, _, err := p.rt.Tasks().Kill(bg, id, owner, "killed by the test"); err != nil {
		t.Fatal(err)
	}
}

// wait waits for task id to settle, as owner (which marks it reported).
func (p *page) wait(t *testing.T, id messages.TaskID, owner messages.AgentID) messages.Snapshot {
	t.Helper()
	snap, err := p.rt.Tasks().Wait(bg, id, owner, time.Minute)
	if err != nil || !snap.Status.Terminal() {
		t.Fatalf("waiting for %s: %+v (%v)", id, snap, err)
	}
	return snap
}

// fifo makes a named pipe in a temporary directory: a command that reads it blocks
// until the test writes, which lets a test hold a task running for as long as it
// needs.
func fifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// release writes line to the fifo (blocking until the command opens it).
func release(t *testing.T, path, line string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		_, err = f.WriteString(line + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing read the fifo within a minute")
	}
}
