//go:build linux

package livepage_test

import (
	"encoding/base64"
	"maps"
	"strings"
	"testing"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/internal/fake"
	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
	"github.com/taskrt/taskrt/tools/mcpserver/livepage"
)

func TestPageTail(t *testing.T) {
	p := newPage(t, setup{})
	p.register(t, "a1")
	tasks := p.rt.Tasks()
	ft := fake.New(true)
	ft.Buffered()
	id, err := tasks.Start(bg, ft.Spec("fake", "a fake stream", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	ft.Emit("one\n")

	tail := openStream(t, p.hc, p.tailURL(id, 0))
	off := readTail(t, tail, 0, "one\n")
	ft.Emit("two\n")
	off = readTail(t, tail, off, "two\n")

	t.Run("the owner's read still returns everything", func(t *testing.T) {
		res, err := tasks.Read(bg, id, "a1")
		if err != nil || res.Output != "one\ntwo\n" {
			t.Errorf("Read = %q (%v), want the whole output one\\ntwo\\n", res.Output, err)
		}
	})
	t.Run("the owner's reads do not move the tail", func(t *testing.T) {
		ft.Emit("three\n")
		readTail(t, tail, off, "three\n")
	})
	t.Run("an offset starts the tail there", func(t *testing.T) {
		s := openStream(t, p.hc, p.tailURL(id, 4))
		readTail(t, s, 4, "two\nthree\n")
	})
	t.Run("a reconnecting EventSource resumes at its Last-Event-ID", func(t *testing.T) {
		s := openStream(t, p.hc, p.tailURL(id, 0), "Last-Event-ID", "8")
		readTail(t, s, 8, "three\n")
	})
	t.Run("a new page's snapshot marks a watched task with its live watches", func(t *testing.T) {
		testWatches(t, p, id)
	})
	t.Run("a settled task's tail ends with its status once its output was sent", func(t *testing.T) {
		ft.Emit("four\n")
		ft.Finish(messages.Outcome{Status: messages.Completed, Detail: "exit code: 0"})
		readTail(t, tail, off+6, "four\n")
		end := decode[wireEnd](t, tail.Next(t), "end")
		if want := (wireEnd{Reason: "settled", Status: "completed", Detail: "exit code: 0", Next: 19}); end != want {
			t.Errorf("end = %+v, want %+v", end, want)
		}
		tail.Ended(t)
		res, err := tasks.Read(bg, id, "a1")
		if err != nil || res.Output != "three\nfour\n" {
			t.Errorf("Read after the tail ended = %q (%v), want the rest, three\\nfour\\n", res.Output, err)
		}
	})
	t.Run("bytes no longer held are counted as missed", func(t *testing.T) {
		testTailMissed(t, p)
	})
	t.Run("a task without an output stream ends at once, saying so", func(t *testing.T) {
		ft := fake.New(false)
		id, err := tasks.Start(bg, ft.Spec("final", "a final answer", "a1"))
		if err != nil {
			t.Fatal(err)
		}
		s := openStream(t, p.hc, p.tailURL(id, 0))
		if end := decode[wireEnd](t, s.Next(t), "end"); end.Reason != "no-output" || end.Status != "running" {
			t.Errorf("end = %+v, want no-output while running", end)
		}
		s.Ended(t)
		ft.Finish(messages.Outcome{Status: messages.Completed, Output: "answer"})
	})
	t.Run("data is the raw bytes, base64 in JSON", func(t *testing.T) {
		ft := fake.New(true)
		ft.Buffered()
		id, err := tasks.Start(bg, ft.Spec("fake", "binary", "a1"))
		if err != nil {
			t.Fatal(err)
		}
		ft.Emit("\xff\x00<b>é\n")
		m := openStream(t, p.hc, p.tailURL(id, 0)).Next(t)
		if want := base64.StdEncoding.EncodeToString([]byte("\xff\x00<b>é\n")); !strings.Contains(m.Data, `"data":"`+want+`"`) || m.ID != "8" {
			t.Errorf("message %+v, want data %s and id 8", m, want)
		}
		ft.Finish(messages.Outcome{Status: messages.Completed})
	})
}

// testWatches checks that a snapshot counts the live watches of a1's task id, and
// of no other.
func testWatches(t *testing.T, p *page, id messages.TaskID) {
	tasks := p.rt.Tasks()
	other := fake.New(true)
	other.Buffered()
	otherID, err := tasks.Start(bg, other.Spec("fake", "not watched", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Finish(messages.Outcome{Status: messages.Completed})
	watches := func() map[string]int {
		t.Helper()
		got := map[string]int{}
		for _, task := range decode[wireSnapshot](t, p.open(t, livepage.EventsPath).Next(t), "snapshot").Tasks {
			got[task.ID] = task.Watches
		}
		return got
	}
	want := map[string]int{string(id): 0, string(otherID): 0}
	if got := watches(); !maps.Equal(got, want) {
		t.Errorf("watches before Watch = %v, want %v", got, want)
	}
	for n := 1; n <= 2; n++ {
		if err := tasks.Watch(bg, id, "a1", "ERROR", actors.WatchOptions{}); err != nil {
			t.Fatal(err)
		}
		want[string(id)] = n
		if got := watches(); !maps.Equal(got, want) {
			t.Errorf("watches after %d Watch calls = %v, want %v", n, got, want)
		}
	}
}

// testTailMissed checks that a tail counts the bytes a task no longer holds.
func testTailMissed(t *testing.T, p *page) {
	ft := fake.New(true)
	ft.Buffered(output.WithMemory(4, 4096), output.WithoutSpill())
	id, err := p.rt.Tasks().Start(bg, ft.Spec("fake", "a long stream", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	tailBytes := strings.Repeat("t", 4096)
	ft.Emit("headMIDDLE" + tailBytes)
	ft.Finish(messages.Outcome{Status: messages.Completed})
	s := openStream(t, p.hc, p.tailURL(id, 0))
	var got []wireOutput
	for {
		m := s.Next(t)
		if m.Event == "end" {
			break
		}
		got = append(got, decode[wireOutput](t, m, "output"))
	}
	want := []wireOutput{{Offset: 0, Next: 4, Data: []byte("head")}, {Offset: 4, Next: 4106, Missed: 6, Data: []byte(tailBytes)}}
	if len(got) != len(want) {
		t.Fatalf("outputs = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || got[i].Next != want[i].Next || got[i].Missed != want[i].Missed || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("output %d = offset %d next %d missed %d (%d bytes), want %d %d %d (%d bytes)", i,
				got[i].Offset, got[i].Next, got[i].Missed, len(got[i].Data), want[i].Offset, want[i].Next, want[i].Missed, len(want[i].Data))
		}
	}
}

func TestPageTailOfBash(t *testing.T) {
	p := newPage(t, setup{})
	p.register(t, "a1")
	// One fifo per line: a fifo written and closed twice could meet one open.
	first, second, hold := fifo(t), fifo(t), fifo(t)
	id := p.startBash(t, "a1", "read -r l < "+first+`; echo "$l"; read -r l < `+second+`; echo "$l"; read -r l < `+hold, "")
	tail := openStream(t, p.hc, p.tailURL(id, 0))
	release(t, first, "alpha")
	off := readTail(t, tail, 0, "alpha\n")
	release(t, second, "beta")
	off = readTail(t, tail, off, "beta\n")
	p.kill(t, id, "a1")
	end := decode[wireEnd](t, tail.Next(t), "end")
	if end.Reason != "settled" || end.Status != "killed" || end.Next != off {
		t.Errorf("end = %+v, want settled, killed, at %d", end, off)
	}
	res, err := p.rt.Tasks().Read(bg, id, "a1")
	if err != nil || res.Output != "alpha\nbeta\n" || res.Snapshot.Status != messages.Killed {
		t.Errorf("Read = %q %s (%v), want the whole output alpha\\nbeta\\n, killed", res.Output, res.Snapshot.Status, err)
	}
}

// A task in block mode whose command waits for a read is shown so, and no longer
// once its owner read; the page's own tail never holds it.
func TestPageShowsOutputFull(t *testing.T) {
	p := newPage(t, setup{})
	events := p.open(t, livepage.EventsPath)
	decode[wireSnapshot](t, events.Next(t), "snapshot")
	p.register(t, "a1")
	// seq 1 8000 writes 38,894 bytes: it fills a read's worth (32 KiB) and waits;
	// after one read what is left fits, so the task is full once, then not.
	id, err := p.rt.Tasks().Start(bg, p.bash.Spec("a1", bash.Command{Command: "seq 1 8000", BlockOutput: true}))
	if err != nil {
		t.Fatal(err)
	}
	openStream(t, p.hc, p.tailURL(id, 0)) // an observer nobody reads from
	want := []bool{true, false}
	for len(want) > 0 {
		ev := events.NextEvent(t)
		if ev.Kind != "task-output-full" {
			continue
		}
		if ev.Task == nil || ev.Task.ID != string(id) || ev.Task.Full != want[0] {
			t.Fatalf("task-output-full event %+v, want %s with output_full %v", ev.Task, id, want[0])
		}
		if want = want[1:]; len(want) == 1 {
			if _, err := p.rt.Tasks().Read(bg, id, "a1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.kill(t, id, "a1")
	p.wait(t, id, "a1")
}

func TestPageTailEnds(t *testing.T) {
	p := newPage(t, setup{runtime: []actors.Option{actors.WithRetention(1)}})
	p.register(t, "a1")
	tasks := p.rt.Tasks()
	t.Run("an evicted task's tail ends, saying so", func(t *testing.T) {
		events := p.open(t, livepage.EventsPath)
		decode[wireSnapshot](t, events.Next(t), "snapshot")
		ft := fake.New(true)
		ft.Buffered()
		id, err := tasks.Start(bg, ft.Spec("fake", "evicted soon", "a1"))
		if err != nil {
			t.Fatal(err)
		}
		tail := openStream(t, p.hc, p.tailURL(id, 0))
		ft.Finish(messages.Outcome{Status: messages.Completed})
		if end := decode[wireEnd](t, tail.Next(t), "end"); end.Reason != "settled" {
			t.Fatalf("end = %+v, want settled", end)
		}
		next := fake.New(true)
		if _, err := tasks.Start(bg, next.Spec("fake", "the next", "a1")); err != nil {
			t.Fatal(err)
		}
		next.Finish(messages.Outcome{Status: messages.Completed}) // retention 1: id is evicted
		for {
			if ev := events.NextEvent(t); ev.Kind == "task-evicted" && ev.Task.ID == string(id) {
				break
			}
		}
		s := openStream(t, p.hc, p.tailURL(id, 0))
		if end := decode[wireEnd](t, s.Next(t), "end"); end.Reason != "evicted" || end.Status != "completed" {
			t.Errorf("end = %+v, want evicted, completed", end)
		}
		s.Ended(t)
	})
	t.Run("a tail ends when its owner goes, its task gone with it", func(t *testing.T) {
		p.register(t, "a2")
		ft := fake.New(true)
		ft.Buffered()
		id, err := tasks.Start(bg, ft.Spec("fake", "of a2", "a2"))
		if err != nil {
			t.Fatal(err)
		}
		tail := openStream(t, p.hc, p.tailURL(id, 0))
		p.dispose(t, "a2")
		end := decode[wireEnd](t, tail.Next(t), "end")
		if end.Reason != "settled" && end.Reason != "gone" {
			t.Errorf("end = %+v, want settled or gone", end)
		}
		tail.Ended(t)
	})
}
