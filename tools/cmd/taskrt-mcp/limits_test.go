//go:build linux

package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskrt/taskrt/producers/bash"
)

// The limit flags cap every command, and a command that hits one ends with the
// limit named, in a foreground answer and in a background task's notice.
func TestLimitFlags(t *testing.T) {
	p := bash.New()
	if p.Containment() != bash.CgroupContainment {
		_ = p.Close()
		t.Skipf("cgroup containment is not available here (%s): the limits cannot be had", p.ContainmentDetail())
	}
	_ = p.Close()
	srv := start(t, nil, "-memory", "32M", "-max-processes", "64", "-cpus", "1")
	hog := `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo survived`
	limit := regexp.MustCompile(`memory limit 32 MiB exceeded \((oom kill|\d+ oom kills)\)\]$`)
	fg := srv.call(t, "bash", map[string]any{"command": hog})
	if len(fg) != 1 || !limit.MatchString(fg[0]) || strings.Contains(fg[0], "survived") {
		t.Errorf("a foreground hog = %q, want it ended by the memory limit, named", fg)
	}
	srv.call(t, "bash", map[string]any{"command": hog, "run_in_background": true})
	deadline := time.Now().Add(time.Minute)
	for {
		got := srv.call(t, "task_list", map[string]any{})
		if len(got) == 2 {
			if !strings.HasPrefix(got[1], "background task bash-1 ") || !strings.Contains(got[1], "memory limit 32 MiB exceeded") {
				t.Errorf("notice = %q, want the limit named", got[1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no notice within a minute")
		}
		<-time.After(20 * time.Millisecond) // a model's next call
	}
}
