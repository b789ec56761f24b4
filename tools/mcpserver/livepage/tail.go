package livepage

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// tail serves TailPath: the task's output from an offset on, with observer reads
// (Tasks.Peek) as its owner, woken by the owner's events.
//
//  1. parse the request: the task, and the offset (Last-Event-ID first);
//  2. find the task's owner (404 when nobody has it);
//  3. subscribe to the owner's events before the first read, so that no growth
//     between a read and the wait goes unseen;
//  4. send the headers at once (the browser's open completes), then follow the
//     task until its tail ends (tailer.follow).
func (h *Handler) tail(w http.ResponseWriter, r *http.Request) {
	id, off, err := tailRequest(r)
	if err != nil {
		http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, done := h.streamContext(r)
	defer done()
	owner, snap, err := h.findTask(ctx, id)
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, messages.ErrTaskNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, "taskrt-mcp: "+err.Error(), code)
		return
	}
	sub, err := h.rt.Subscribe(ctx, actors.ForOwner(owner), actors.WithEventBuffer(tailEventBuffer))
	if err != nil {
		http.Error(w, "taskrt-mcp: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	out := newSSE(w)
	out.comment("tail of " + string(id))
	if out.flush() != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	t := &tailer{tasks: h.rt.Tasks(), id: id, owner: owner, snap: snap, off: off, out: out, events: sub.Events(), ping: ping.C}
	t.follow(ctx)
}

// tailRequest reads a tail's task id and its first offset: a reconnecting
// EventSource's Last-Event-ID, else the offset parameter, else 0.
func tailRequest(r *http.Request) (messages.TaskID, int64, error) {
	q := r.URL.Query()
	id := messages.TaskID(q.Get("task"))
	if id == "" {
		return "", 0, errors.New("want ?task=ID")
	}
	for _, v := range []string{r.Header.Get("Last-Event-ID"), q.Get("offset")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return "", 0, errors.New("the offset must be a byte offset (an integer >= 0)")
		}
		return id, n, nil
	}
	return id, 0, nil
}

// findTask finds the owner of task id among the owners the Source lists (and the
// unowned tasks), with its snapshot; ErrTaskNotFound when nobody has it. The page
// is the embedder's view: it reads any owner's task as that owner, without
// consuming anything.
func (h *Handler) findTask(ctx context.Context, id messages.TaskID) (messages.AgentID, messages.Snapshot, error) {
	if kind, _, ok := strings.Cut(string(id), "-"); !ok || !messages.KindPattern().MatchString(kind) {
		return "", messages.Snapshot{}, messages.ErrTaskNotFound
	}
	owners := h.src.Owners()
	candidates := make([]messages.AgentID, 0, len(owners)+1)
	for _, o := range owners {
		candidates = append(candidates, o.ID)
	}
	for _, owner := range append(candidates, "") {
		snap, err := h.rt.Tasks().Get(ctx, id, owner)
		switch {
		case err == nil && snap.Owner == owner:
			return owner, snap, nil
		case err != nil && !errors.Is(err, messages.ErrTaskNotFound):
			return "", messages.Snapshot{}, err
		}
	}
	return "", messages.Snapshot{}, messages.ErrTaskNotFound
}

// tailer is one tail stream: the task it follows, as whom, and how far it got.
// It belongs to the request's goroutine.
type tailer struct {
	tasks  *actors.Tasks
	id     messages.TaskID
	owner  messages.AgentID
	snap   messages.Snapshot // the task as last read
	off    int64             // the offset of the next byte to send
	out    *sse
	events <-chan messages.Event // the owner's
	ping   <-chan time.Time
}

// follow sends the task's output until its tail ends, in rounds:
//
//  1. catch up: send what is held from the offset on (catchUp);
//  2. end when the task settled: its output is complete, since the producer
//     settles at quiescence, after its last write;
//  3. wait for the task to change, or its owner to go (awaitChange).
//
// It returns without an "end" message when the request, the Source or the
// runtime ends first, or the browser stops reading.
func (t *tailer) follow(ctx context.Context) {
	for {
		reason, err := t.catchUp(ctx)
		switch {
		case err != nil:
			return
		case reason == "" && t.snap.Status.Terminal():
			reason = tailSettled
		}
		if reason != "" {
			t.end(reason)
			return
		}
		if !t.awaitChange(ctx) {
			return
		}
	}
}

// catchUp reads and sends until nothing new is held. It returns the reason the
// tail ends when the task cannot be read any more ("" when it can), or an error
// when the stream ended (the request, the runtime, or a write). A tombstone is
// never read: its answer would mark the task reported, as if the model had seen
// it.
func (t *tailer) catchUp(ctx context.Context) (reason string, err error) {
	for {
		if t.snap.Evicted {
			return tailEvicted, nil
		}
		res, err := t.tasks.Peek(ctx, t.id, t.owner, t.off, tailChunk)
		switch {
		case errors.Is(err, messages.ErrNoOutputStream):
			return tailNoOutput, nil
		case errors.Is(err, messages.ErrTaskNotFound):
			return tailGone, nil
		case err != nil:
			return "", err
		}
		t.snap = res.Snapshot
		if len(res.Data) == 0 && res.Missed == 0 {
			return "", nil
		}
		t.out.event("output", strconv.FormatInt(res.Next, 10), wireOutput{Offset: t.off, Next: res.Next, Missed: res.Missed, Data: res.Data})
		t.off = res.Next
		if err := t.out.flush(); err != nil {
			return "", err
		}
	}
}

// awaitChange waits for an event that may change what catchUp reads: one of the
// task's, an overflow (one may have been missed), or an owner's disposal (the
// task may be gone with it); it pings while it waits. An eviction's snapshot is
// kept, so that the next round ends the tail without reading the tombstone. It
// returns false when the stream ended.
func (t *tailer) awaitChange(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.ping:
			t.out.comment("ping")
			if t.out.flush() != nil {
				return false
			}
		case ev, ok := <-t.events:
			if !ok {
				return false // the runtime closed
			}
			if ev.Task.ID == t.id && ev.Task.Evicted {
				t.snap = ev.Task
			}
			if ev.Task.ID == t.id || ev.Kind == messages.EventOverflow || ev.Kind == messages.EventAgentDisposed {
				return true
			}
		}
	}
}

// end sends the tail's last message.
func (t *tailer) end(reason string) {
	t.out.event("end", "", wireEnd{Reason: reason, Status: t.snap.Status, Detail: t.snap.Detail, Next: t.off})
	_ = t.out.flush()
}
