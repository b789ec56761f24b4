//go:build linux

package bash

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupfs primitives: reading and writing control files, killing, emptying and
// removing cgroup directories. They know nothing of tasks or producers.

// killCgroup kills every process in the cgroup v2 directory dir and its
// descendants, and waits until none is left.
func killCgroup(dir string, timeout time.Duration) error {
	if populated(dir) == 0 {
		return nil
	}
	if err := writeFile(filepath.Join(dir, "cgroup.kill"), "1"); err != nil {
		return err
	}
	if !waitFor(filepath.Join(dir, "cgroup.events"), timeout, func() bool { return populated(dir) == 0 }) {
		return fmt.Errorf("processes survived cgroup.kill for %s", timeout)
	}
	return nil
}

// killV1 sends SIGKILL to the processes left in a v1 cgroup tree (there is no
// cgroup.kill in v1). The tree is a leftover, so whatever runs in it is a task's.
func killV1(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		for _, pid := range readPids(filepath.Join(path, "cgroup.procs")) {
			_ = ignoreGone(unix.Kill(pid, unix.SIGKILL))
		}
		return nil
	})
}

// removeTree removes a cgroup directory and its descendants, deepest first (a
// cgroup directory holds files that cannot be unlinked, so os.RemoveAll cannot).
func removeTree(dir string) error {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil // the usual case: no nested cgroup
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		// A memory cgroup can stay busy for a moment after its last process exited.
		for i := 0; i < 50 && errors.Is(err, unix.EBUSY); i++ {
			pause(time.Millisecond)
			err = os.Remove(dir)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// populated reads "populated" from dir's cgroup.events: 1 while a process lives in
// dir or below, 0 after; -1 when the file cannot be read (dir is gone).
func populated(dir string) int {
	b, ok := readAt(unix.AT_FDCWD, dir+"/cgroup.events", make([]byte, 128))
	if !ok {
		return -1
	}
	v, ok := keyedValue(b, "populated")
	if !ok {
		return -1
	}
	return int(v)
}

// keyedValue finds "key N" in a flat-keyed cgroup file.
// It allocates nothing: a settle reads cgroup.events with it.
func keyedValue(b []byte, key string) (int64, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte(" "))
		if !ok || string(k) != key {
			continue
		}
		v = bytes.TrimSpace(v)
		neg := len(v) > 0 && v[0] == '-'
		if neg {
			v = v[1:]
		}
		n, ok := atou(v)
		if !ok || n > 1<<63-1 {
			return 0, false
		}
		if neg {
			return -int64(n), true
		}
		return int64(n), true
	}
	return 0, false
}

// readPids reads a file of whitespace-separated pids (cgroup.procs, a task's children).
func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// writeCtl writes a cgroup control file with three system calls (writeFile's
// os.OpenFile adds an fstat).
func writeCtl(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte(value))
	return errors.Join(err, unix.Close(fd))
}

// writeFile writes a cgroup control file.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}
