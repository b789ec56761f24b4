//go:build !linux

package bash

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

// The producer needs /proc, pidfds and prctl; elsewhere Start fails with
// errors.ErrUnsupported and these stand-ins are never reached.

func supported() error {
	return fmt.Errorf("bash producer needs Linux: %w", errors.ErrUnsupported)
}

func enableSubreaper() error                { return errors.ErrUnsupported }
func sysProcAttr() *syscall.SysProcAttr     { return nil }
func waitExited(int) error                  { return errors.ErrUnsupported }
func signalGroup(int, syscall.Signal) error { return errors.ErrUnsupported }
func scanProcs() ([]procInfo, error)        { return nil, errors.ErrUnsupported }
func environMarker(int) (string, bool)      { return "", false }
func killProc(procInfo) error               { return errors.ErrUnsupported }
func reapOrphan(procInfo)                   {}
func countMarked(func(string) bool) int     { return 0 }
func signalName(sig syscall.Signal) string  { return "signal " + strconv.Itoa(int(sig)) }
