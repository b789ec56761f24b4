package bash

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/taskrt/taskrt/messages"
)

// input is a task's standard input as the runtime writes it (Hooks.Input): the write
// end of a pipe (StdinPipe) or the master of the task's terminal (StdinTTY).
type input struct {
	mode  Stdin
	w     *os.File    // pipe: the write end, closed by eof or end; tty: the master, closed by the monitor after the drain
	ended atomic.Bool // the shell exited: input goes nowhere any more

	mu      sync.Mutex // one write at a time, in the order of the calls; protects the fields below
	closed  bool       // eof was sent
	partial bool       // tty: the input so far ends mid-line
}

// errEnded is what input to a command whose shell exited fails with; the runtime
// reports such a failure as the task's terminal status.
func errEnded() error {
	return fmt.Errorf("bash: the command has exited: %w", messages.ErrTaskEnded)
}

// write is Hooks.Input: it writes data, then, with eof, closes the pipe or types the
// terminal's end-of-file character (see StdinTTY). It blocks while the pipe or the
// terminal's input queue is full, and returns once the task ended (end closes the
// pipe; the monitor closes the terminal's master after the drain).
func (in *input) write(data []byte, eof bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.ended.Load():
		return errEnded()
	case in.closed:
		return fmt.Errorf("bash: %w", messages.ErrInputClosed)
	}
	if len(data) > 0 {
		if _, err := in.w.Write(data); err != nil {
			return in.failed(err)
		}
		if in.mode == StdinTTY {
			last := data[len(data)-1]
			in.partial = last != '\n' && last != '\r' && last != ctrlD
		}
	}
	if !eof {
		return nil
	}
	in.closed = true
	if in.mode == StdinPipe {
		if err := in.w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return in.failed(err)
		}
		return nil
	}
	c := terminalEOF(in.w)
	eofs := []byte{c}
	if in.partial {
		eofs = append(eofs, c)
	}
	in.partial = false
	if _, err := in.w.Write(eofs); err != nil {
		return in.failed(err)
	}
	return nil
}

// ctrlD is the usual end-of-file character of a terminal (VEOF).
const ctrlD = 0x04

// failed turns a write's error into Input's: the command's end when the shell has
// exited (or the write was cut short by end), else the error itself.
func (in *input) failed(err error) error {
	if in.ended.Load() || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO) {
		return errEnded()
	}
	return fmt.Errorf("bash: writing the command's input: %w", err)
}

// end records that the shell exited: later input fails with ErrTaskEnded. A pipe is
// closed now, which also ends a write blocked on it; a terminal's master stays open
// for the drain of the output and is closed by the monitor after it. Idempotent; a
// nil input is fine.
func (in *input) end() {
	if in == nil {
		return
	}
	in.ended.Store(true)
	if in.mode == StdinPipe {
		_ = in.w.Close() // os.ErrClosed after eof: nothing to do
	}
}

// streams are a new task's standard streams: the shell's ends, closed in this
// process once the shell started, and this process's ends.
type streams struct {
	childIn  *os.File // the shell's stdin; nil for /dev/null
	childOut *os.File // the shell's stdout and stderr
	out      *os.File // where the output is read: the pipe's read end, or the terminal's master
	in       *input   // nil for StdinNone
	// term is the terminal (StdinTTY), which this process keeps open until every
	// process of the task is gone (task.releaseTerminal): the master reads EIO only
	// then, never while the flip buffer still holds what the shell wrote just
	// before it exited.
	term *os.File
}

// openStreams opens the streams of a command with stdin mode: an output pipe and,
// for StdinPipe, an input pipe; for StdinTTY, a terminal whose master is both the
// output and the input.
func (p *Producer) openStreams(mode Stdin) (*streams, error) {
	if mode == StdinTTY {
		master, tty, err := openTerminal(p.cfg.termCols, p.cfg.termRows)
		if err != nil {
			return nil, err
		}
		return &streams{childIn: tty, childOut: tty, out: master, in: &input{mode: mode, w: master}, term: tty}, nil
	}
	pr, pw, err := outputPipe()
	if err != nil {
		return nil, fmt.Errorf("bash: output pipe: %w", err)
	}
	st := &streams{childOut: pw, out: pr}
	if mode == StdinPipe {
		ir, iw, err := os.Pipe()
		if err != nil {
			_ = pr.Close()
			_ = pw.Close()
			return nil, fmt.Errorf("bash: input pipe: %w", err)
		}
		st.childIn, st.in = ir, &input{mode: mode, w: iw}
	}
	return st, nil
}

// closeChild closes this process's copies of the shell's ends, once the shell has
// them (or failed to start).
func (s *streams) closeChild() error {
	if s.term != nil {
		return nil // the terminal stays open: see term
	}
	err := s.childOut.Close()
	if s.childIn != nil && s.childIn != s.childOut {
		err = errors.Join(err, s.childIn.Close())
	}
	return err
}

// closeOurs closes this process's ends, when the shell did not start.
func (s *streams) closeOurs() {
	_ = s.out.Close()
	if s.term != nil {
		_ = s.term.Close()
	}
	if s.in != nil && s.in.w != s.out {
		_ = s.in.w.Close()
	}
}

// nullStdin is /dev/null opened once per Producer, the standard input of every
// StdinNone command (os/exec would open and close it at each start, seven system
// calls). Close closes it, once no start is using it.
type nullStdin struct {
	mu     sync.RWMutex // read-held by a start from acquire until its spawn returned; write-held by close
	once   sync.Once    // opens f
	f      *os.File     // nil when /dev/null cannot be opened
	closed bool
}

// acquire returns /dev/null for one start, or nil (os/exec then opens it), and
// the release to call once the shell has started or failed to.
func (n *nullStdin) acquire() (*os.File, func()) {
	n.mu.RLock()
	if n.closed {
		n.mu.RUnlock()
		return nil, func() {}
	}
	n.once.Do(func() {
		if f, err := os.Open(os.DevNull); err == nil {
			n.f = f
		}
	})
	return n.f, n.mu.RUnlock
}

func (n *nullStdin) close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.f == nil {
		return nil
	}
	err := n.f.Close()
	n.f = nil
	return err
}
