//go:build linux

package bash

import (
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileEvents tells waiters when a cgroup's cgroup.events file changes (the kernel
// signals every change of "populated" as a modification). One inotify instance
// serves the whole process, read through Go's netpoller, so a waiting task holds no
// OS thread and the per-user limit on inotify instances (often 128) is never in
// the way. Its reader goroutine runs while at least one file is watched.
//
// Ending an inotify instance takes the kernel an SRCU grace period (about 15 ms
// here, in close(2)), so the last unwatch does not wait for it: the instance is
// closed on a goroutine of its own, and a later watch starts a new one at once.
// Producer Close waits for such ends (quiesce), so that nothing of the producer is
// left running after it.
var fileEvents watcher

type watcher struct {
	mu      sync.Mutex              // protects every field
	f       *os.File                // the inotify instance; nil while nothing is watched
	waiters map[int32]chan struct{} // watch descriptor → its waiter's channel (buffered 1)
	stopped chan struct{}           // closed when the reader of f has returned
	ending  []chan struct{}         // the stopped channels of instances ended in the background
}

// watch starts watching path for modifications. changed receives (without
// blocking the reader; buffered 1) after each batch of events for it; stop ends the
// watch. Watching the same path twice at once is not supported.
func (w *watcher) watch(path string) (changed <-chan struct{}, stop func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return nil, nil, err
		}
		w.f = os.NewFile(uintptr(fd), "inotify")
		w.waiters = map[int32]chan struct{}{}
		w.stopped = make(chan struct{})
		go w.read(w.f, w.stopped)
	}
	f := w.f
	var wd int
	err = control(f, func(fd int) error {
		var aerr error
		wd, aerr = unix.InotifyAddWatch(fd, path, unix.IN_MODIFY)
		return aerr
	})
	if err != nil {
		if len(w.waiters) == 0 {
			w.closeLocked()
		}
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	w.waiters[int32(wd)] = ch
	return ch, func() { w.unwatch(f, int32(wd)) }, nil
}

func (w *watcher) unwatch(f *os.File, wd int32) {
	w.mu.Lock()
	if w.f != f {
		w.mu.Unlock()
		return
	}
	delete(w.waiters, wd)
	// EINVAL: the watch went with its file (the cgroup was removed).
	_ = control(f, func(fd int) error { _, err := unix.InotifyRmWatch(fd, uint32(wd)); return err })
	if len(w.waiters) == 0 {
		// Close waits for the reader's read to end and the kernel to end the
		// instance: on a goroutine of its own, done once the reader returned too.
		stopped, done := w.stopped, make(chan struct{})
		w.f, w.waiters, w.stopped = nil, nil, nil
		go func() {
			_ = f.Close()
			<-stopped
			close(done)
		}()
		w.ending = append(w.ending, done)
		live := w.ending[:0]
		for _, ch := range w.ending {
			select {
			case <-ch:
			default:
				live = append(live, ch)
			}
		}
		clear(w.ending[len(live):])
		w.ending = live
	}
	w.mu.Unlock()
}

// quiesce waits until every inotify instance ended in the background is gone.
func (w *watcher) quiesce() {
	w.mu.Lock()
	ending := w.ending
	w.ending = nil
	w.mu.Unlock()
	for _, ch := range ending {
		<-ch
	}
}

// closeLocked closes the instance; the caller waits for the returned channel
// after unlocking.
func (w *watcher) closeLocked() chan struct{} {
	_ = w.f.Close()
	stopped := w.stopped
	w.f, w.waiters, w.stopped = nil, nil, nil
	return stopped
}

// read delivers events until f is closed. An overflow of the event queue, or an
// unexpected error, wakes every waiter: each then looks at its file again.
func (w *watcher) read(f *os.File, stopped chan struct{}) {
	defer close(stopped)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+16))
	for {
		n, err := f.Read(buf)
		w.mu.Lock()
		if w.f != f {
			w.mu.Unlock()
			return
		}
		all := err != nil
		for off := 0; !all && off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				all = true
				break
			}
			if ch, ok := w.waiters[ev.Wd]; ok {
				notify(ch)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if all {
			for _, ch := range w.waiters {
				notify(ch)
			}
		}
		if err != nil {
			// Not closed by unwatch (checked above): the instance is broken. Drop it,
			// so that the next watch makes a new one; the current waiters were woken
			// and fall back to their slow timer.
			_ = f.Close()
			w.f, w.waiters, w.stopped = nil, nil, nil
		}
		w.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// control runs fn with f's descriptor.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// recheckEvery is how often a waiter looks at its file even without an event: a
// safety net for a lost event (an overflowed or broken inotify instance), not the
// way changes are noticed.
const recheckEvery = 250 * time.Millisecond

// waitFor waits until done(), re-evaluated whenever path changes, returns true, or
// until timeout. It reports whether done() became true.
func waitFor(path string, timeout time.Duration, done func() bool) bool {
	changed, stop, err := fileEvents.watch(path)
	if err != nil {
		changed = nil // no events: the slow timer alone
	} else {
		defer stop()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	// The kernel sends a cgroup file's events at most once per 20 ms (its
	// notification rate limit), so a change right after the last one, such as the
	// end of processes killed just after they started, is told up to 20 ms late.
	// What a kill ends usually ends within a millisecond or two: look a few times
	// in that time, then rely on the events.
	soon := time.NewTimer(soonFirst)
	defer soon.Stop()
	next := soonFirst
	for {
		if done() {
			return true
		}
		select {
		case <-changed:
		case <-soon.C:
			if next *= 2; next <= soonLast {
				soon.Reset(next)
			}
		case <-tick.C:
		case <-deadline.C:
			return done()
		}
	}
}

// The early looks of waitFor: after soonFirst, then at doubling intervals up to
// soonLast (0.1, 0.3, 0.7, 1.5, 3.1, 6.3 ms after the start).
const (
	soonFirst = 100 * time.Microsecond
	soonLast  = 3200 * time.Microsecond
)

// quiesceEvents waits for the inotify instances ended in the background (see
// watcher); Producer.Close calls it.
func quiesceEvents() { fileEvents.quiesce() }
