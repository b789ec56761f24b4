// Package proctest finds the OS processes a test started through the tools, by a
// marker the test puts in their environment: what the MCP tests use to prove that
// no process outlives its session.
package proctest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Marked returns script prefixed with an export of mark, so that every process the
// script starts carries mark in its environment.
func Marked(mark, script string) string {
	return "export MCPTEST_MARK=" + mark + "; " + script
}

// MarkedPIDs lists the live processes that carry mark in their command line or
// environment (zombies excluded: they are gone but for their exit status), other
// than the calling process.
func MarkedPIDs(mark string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if st, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && bytes.Contains(b, []byte(mark)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
