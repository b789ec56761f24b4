//go:build !linux

package bash

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The producer needs /proc, pidfds, prctl and cgroups; elsewhere Start fails with
// errors.ErrUnsupported and these stand-ins are never reached.

func supported() error {
	return fmt.Errorf("bash producer needs Linux: %w", errors.ErrUnsupported)
}

func enableSubreaper() error                            { return errors.ErrUnsupported }
func waitExited(int) error                              { return errors.ErrUnsupported }
func signalGroup(int, syscall.Signal) error             { return errors.ErrUnsupported }
func markedPids(func(string) bool) map[int]bool         { return map[int]bool{} }
func signalName(sig syscall.Signal) string              { return "signal " + strconv.Itoa(int(sig)) }
func spawn(*exec.Cmd, *taskCgroup, bool, bool) error    { return errors.ErrUnsupported }
func openTerminal(int, int) (*os.File, *os.File, error) { return nil, nil, errors.ErrUnsupported }
func terminalEOF(*os.File) byte                         { return ctrlD }
func scriptFile(string) (*os.File, error)               { return nil, errors.ErrUnsupported }
func hasControllingTerminal() bool                      { return false }
func outputPipe() (*os.File, *os.File, error)           { return os.Pipe() }
func populated(string) int                              { return -1 }
func growPipe(*os.File, int)                            {}
func waitFor(string, time.Duration, func() bool) bool   { return true }
func quiesceEvents()                                    {}

const sweepTimeout = 10 * time.Second

type cgroupTree struct{ parent string }

func openCgroupTree(string, *slog.Logger) (*cgroupTree, error) { return nil, errors.ErrUnsupported }
func (*cgroupTree) newTask(string, Limits, *slog.Logger) (*taskCgroup, error) {
	return nil, errors.ErrUnsupported
}
func (*cgroupTree) live(string, map[int]bool) {}
func allTrees() []*cgroupTree                 { return nil }

type taskCgroup struct{ dir string }

func (*taskCgroup) terminate(int) error     { return errors.ErrUnsupported }
func (*taskCgroup) kill(int) error          { return errors.ErrUnsupported }
func (*taskCgroup) settle(int) (int, error) { return 0, errors.ErrUnsupported }
func (*taskCgroup) limitHits() limitHits    { return limitHits{} }
func (*taskCgroup) release() error          { return nil }
func (*taskCgroup) reapOrphans(int) error   { return nil }
func (*taskCgroup) closeFD()                {}
func (*taskCgroup) populated() int          { return -1 }

type cgroupPool struct{}

func newCgroupPool(*cgroupTree, string) *cgroupPool { return nil }
func (*cgroupPool) get(*slog.Logger) (*taskCgroup, error) {
	return nil, errors.ErrUnsupported
}
func (*cgroupPool) close() error { return nil }

type sweeper struct{}

var sweeps sweeper

func (sweeper) run(int, string, bool, *slog.Logger) (int, error) { return 0, errors.ErrUnsupported }
func (sweeper) addLeader(int, string)                            {}
func (sweeper) removeLeader(int, string)                         {}
