package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// killRun is what the random-kill run counted.
type killRun struct {
	kills        int
	took         time.Duration
	completed    int // completed, its notice came, its output read
	notCompleted int // ended otherwise (failed, killed) or never
	missing      int // completed, no notice
	twice        int // its notice came more than once
	ranTwice     int // a command whose file has more than one line
	unanswered   int // starts whose frontend died during the call
	readsLost    int // final reads whose answer was lost with their frontend
}

// fleet is the live frontends of the run.
type fleet struct {
	mu   sync.Mutex
	live []*frontend
}

func (f *fleet) pick() *frontend {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[rand.IntN(len(f.live))]
}

// scopeRun is one scope of the run.
type scopeRun struct {
	id, scope string
	notices   int
	status    string
	readLost  bool // a read's answer was lost with its frontend
}

// randomKills is the random-kill run (see the package documentation).
func (c *cluster) randomKills(n int) (killRun, error) {
	var r killRun
	runDir := filepath.Join(c.dir, "runs")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return r, err
	}
	fl := &fleet{}
	for range 3 {
		f, err := c.start(c.nats)
		if err != nil {
			return r, err
		}
		fl.live = append(fl.live, f)
	}
	defer func() {
		for _, f := range fl.live {
			f.kill()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	stop := make(chan struct{})
	killerDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				killerDone <- nil
				return
			case <-tick.C:
			}
			fl.mu.Lock()
			i := rand.IntN(len(fl.live))
			victim := fl.live[i]
			fl.live = append(fl.live[:i:i], fl.live[i+1:]...)
			fl.mu.Unlock()
			victim.kill()
			r.kills++
			f, err := c.start(c.nats)
			if err != nil {
				killerDone <- err
				return
			}
			fl.mu.Lock()
			fl.live = append(fl.live, f)
			fl.mu.Unlock()
		}
	}()
	runs := make([]scopeRun, n)
	var mu sync.Mutex // protects r's counters below
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				sr, unanswered := c.playOne(ctx, fl, runDir, i)
				mu.Lock()
				runs[i] = sr
				r.unanswered += unanswered
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(stop)
	if err := <-killerDone; err != nil {
		return r, err
	}
	r.took = time.Since(began)
	for _, sr := range runs {
		switch {
		case sr.status != "completed":
			r.notCompleted++
			fmt.Fprintf(os.Stderr, "  not completed: %s in %s: %s\n", sr.id, sr.scope, sr.status)
		case sr.notices == 0:
			r.missing++
		default:
			r.completed++
		}
		if sr.notices > 1 {
			r.twice++
		}
		if sr.readLost {
			r.readsLost++
		}
	}
	files, err := os.ReadDir(runDir)
	if err != nil {
		return r, err
	}
	for _, e := range files {
		b, err := os.ReadFile(filepath.Join(runDir, e.Name()))
		if err != nil {
			return r, err
		}
		if bytes.Count(b, []byte("\n")) > 1 {
			r.ranTwice++
		}
	}
	return r, nil
}

// playOne starts scope i's task through a random live frontend (a start whose
// frontend dies during the call is started again, as a new scope, with a new
// file), polls task_list through random live frontends until the task ended and
// its notice came (or a minute after its end), then reads it once.
func (c *cluster) playOne(ctx context.Context, fl *fleet, dir string, i int) (scopeRun, int) {
	var sr scopeRun
	unanswered := 0
	for attempt := 0; ; attempt++ {
		file := filepath.Join(dir, fmt.Sprintf("%d-%d", i, attempt))
		cmd := fmt.Sprintf("sleep %.2f; echo ran >> %s; echo done", rand.Float64()*8, file)
		id, scope, err := startScope(ctx, fl.pick(), cmd)
		if err == nil {
			sr.id, sr.scope = id, scope
			break
		}
		if ctx.Err() != nil {
			sr.status = "never started: " + err.Error()
			return sr, unanswered
		}
		if !strings.Contains(err.Error(), "start: ") {
			unanswered++ // the frontend died during the call
		}
	}
	var ended time.Time
	for ctx.Err() == nil {
		res, err := call(ctx, fl.pick().url, "task_list", map[string]any{"scope": sr.scope})
		if err != nil || res.RPCError != "" {
			time.Sleep(100 * time.Millisecond) // a figure, not a test: the home is being taken
			continue
		}
		for _, note := range res.Texts[min(1, len(res.Texts)):] {
			if strings.HasPrefix(note, "background task "+sr.id+" ") {
				sr.notices++
			}
		}
		line := res.Texts[0]
		if strings.HasPrefix(line, "scope not found") || strings.HasPrefix(line, "(no background tasks)") {
			sr.status = "scope gone: " + line
			return sr, unanswered
		}
		if !strings.HasPrefix(line, sr.id+" [bash] running") && ended.IsZero() {
			ended = time.Now()
		}
		if !ended.IsZero() && (sr.notices > 0 || time.Since(ended) > time.Minute) {
			break
		}
		time.Sleep(200 * time.Millisecond) // a figure, not a test: a client polling
	}
	for ctx.Err() == nil {
		res, err := call(ctx, fl.pick().url, "task_output", map[string]any{"scope": sr.scope, "task_id": sr.id})
		if err != nil {
			// The frontend died during the call: the read may have been served
			// (a read consumes what it returns), its answer lost.
			sr.readLost = true
			continue
		}
		if res.RPCError != "" {
			time.Sleep(100 * time.Millisecond) // a figure, not a test
			continue
		}
		text := strings.Join(res.Texts, "\n")
		for _, note := range res.Texts[min(1, len(res.Texts)):] {
			if strings.HasPrefix(note, "background task "+sr.id+" ") {
				sr.notices++
			}
		}
		if strings.HasPrefix(text, "done\n[status: completed, exit code: 0]") || sr.readLost && strings.HasPrefix(text, "[status: completed, exit code: 0]") {
			sr.status = "completed"
		} else {
			sr.status = text
		}
		_, _ = call(ctx, fl.pick().url, "scope_close", map[string]any{"scope": sr.scope})
		break
	}
	return sr, unanswered
}
