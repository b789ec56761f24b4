//go:build linux

package bash

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal of cols×rows cells: master is this process's
// side (read for the output, written for the input), tty the command's.
//
// pty.Open's ioctls go through File.Fd, which leaves the master in blocking mode
// and off Go's poller: a read of it could then be stopped neither by a deadline nor
// by Close, and the drain could not be bounded. So the master is handed back as a
// new non-blocking descriptor on the poller.
func openTerminal(cols, rows int) (master, tty *os.File, err error) {
	m, t, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("bash: opening a pseudo-terminal: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		_ = m.Close()
		_ = t.Close()
		return nil, nil, err
	}
	if err := pty.Setsize(m, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fail(fmt.Errorf("bash: setting the terminal's size: %w", err))
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("bash: terminal master: %w", err))
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return fail(fmt.Errorf("bash: terminal master: %w", err))
	}
	_ = m.Close() // the duplicate keeps the terminal
	return os.NewFile(uintptr(fd), m.Name()), t, nil
}

// terminalEOF is the terminal's end-of-file character (VEOF) as its settings say now,
// or ^D when they cannot be read.
func terminalEOF(master *os.File) byte {
	c := byte(ctrlD)
	_ = control(master, func(fd int) error {
		tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil && tio.Cc[unix.VEOF] != 0 {
			c = tio.Cc[unix.VEOF]
		}
		return err
	})
	return c
}
