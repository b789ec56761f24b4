//go:build linux

package bash

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup containment. The layout, under the cgroup v2 directory of this process
// (or WithCgroupRoot):
//
//	ROOT/taskrt-<pid>-<start>/            one per process: pid and start time (clock
//	                                      ticks after boot) of the process that owns it
//	ROOT/taskrt-<pid>-<start>/task-<p>-<n> one per task: producer p's n-th task
//
// and, when a limit needs a controller that cgroup v2 does not offer here (a hybrid
// mount whose controllers are bound to cgroup v1), the same names under this
// process's cgroup in that controller's v1 hierarchy. A directory named taskrt-…
// whose process is gone is a leftover of a process that died without cleaning up:
// every New kills what runs in it and removes it.

// controllers are the cgroup controllers limits use.
var controllers = []string{"pids", "memory", "cpu"}

// taskrtDirRE matches the per-process directory names.
var taskrtDirRE = regexp.MustCompile(`^taskrt-(\d+)-(\d+)$`)

// cgroupTree is this process's part of a cgroup v2 hierarchy: the per-process
// directory under one root, shared by every Producer that uses that root.
type cgroupTree struct {
	root   string // the cgroup v2 directory the per-process directory lives in
	parent string // root/taskrt-<pid>-<start>
	name   string // taskrt-<pid>-<start>
	lay    layout
	log    *slog.Logger

	homeOnce sync.Once  // sets home, homeErr
	home     *spawnHome // this process's v1 cgroups, where a spawning thread returns
	homeErr  error

	mu     sync.Mutex      // protects v2ctl and v1made
	v2ctl  map[string]bool // controller → usable in task directories (decided once)
	v1made map[string]bool // controller → the v1 per-process directory exists
}

// trees holds this process's cgroup trees by root; a tree lives as long as the
// process.
var trees struct {
	mu sync.Mutex // protects m
	m  map[string]*cgroupTree
}

// openCgroupTree returns the tree under root ("" = this process's cgroup v2
// directory), creating its per-process directory, after removing the leftovers of
// dead processes there. An error says why cgroup containment is not usable.
func openCgroupTree(root string, log *slog.Logger) (*cgroupTree, error) {
	lay, err := discover()
	if err != nil {
		return nil, fmt.Errorf("reading this process's cgroups: %w", err)
	}
	if root == "" {
		if lay.v2 == "" {
			return nil, errors.New("no cgroup v2 hierarchy is mounted")
		}
		root = lay.v2
	}
	root = filepath.Clean(root)
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("cgroup root %s: %w", root, err)
	}
	if st.Type != cgroup2Magic {
		return nil, fmt.Errorf("%s is not a cgroup v2 directory", root)
	}
	cleanLeftovers(root, lay, log)

	trees.mu.Lock()
	defer trees.mu.Unlock()
	if t, ok := trees.m[root]; ok {
		return t, nil
	}
	name := fmt.Sprintf("taskrt-%d-%d", selfPid, selfStart)
	t := &cgroupTree{
		root:   root,
		parent: filepath.Join(root, name),
		name:   name,
		lay:    lay,
		log:    log,
		v2ctl:  map[string]bool{},
		v1made: map[string]bool{},
	}
	if err := os.Mkdir(t.parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cannot create a cgroup in %s: %w", root, err)
	}
	if _, err := os.Stat(filepath.Join(t.parent, "cgroup.kill")); err != nil {
		_ = os.Remove(t.parent)
		return nil, fmt.Errorf("cgroup.kill is missing (it needs Linux 5.14): %w", err)
	}
	// Spawning into a cgroup needs write access to cgroup.procs of the target and of
	// the common ancestor of the source and the target.
	for _, f := range []string{filepath.Join(root, "cgroup.procs"), filepath.Join(t.parent, "cgroup.procs")} {
		if err := unix.Access(f, unix.W_OK); err != nil {
			_ = os.Remove(t.parent)
			return nil, fmt.Errorf("cannot move processes into cgroups under %s: %s: %w", root, f, err)
		}
	}
	if trees.m == nil {
		trees.m = map[string]*cgroupTree{}
	}
	trees.m[root] = t
	return t, nil
}

// cleanLeftovers kills the processes in, and removes, every per-process directory
// under root (and under this process's v1 cgroups) whose process is gone.
func cleanLeftovers(root string, lay layout, log *slog.Logger) {
	dirs := []string{root}
	for _, ctl := range controllers {
		if d := lay.v1Dir(ctl); d != "" {
			dirs = append(dirs, d)
		}
	}
	for i, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			m := taskrtDirRE.FindStringSubmatch(e.Name())
			if m == nil || !e.IsDir() {
				continue
			}
			pid, _ := strconv.Atoi(m[1])
			start, _ := strconv.ParseUint(m[2], 10, 64)
			if p, ok := readStat(pid); ok && p.start == start && !p.zombie {
				continue // its process lives (maybe this one)
			}
			path := filepath.Join(dir, e.Name())
			var err error
			if i == 0 {
				err = killCgroup(path, 5*time.Second)
			} else {
				err = killV1(path)
			}
			err = errors.Join(err, removeTree(path))
			if err != nil {
				log.Warn("bash: removing the leftover cgroup of a dead process", "cgroup", path, "err", err)
				continue
			}
			log.Info("bash: removed the leftover cgroup of a dead process", "cgroup", path)
		}
	}
}

// v2Controller reports whether ctl can be used in task directories, enabling it in
// the per-process directory (and, if needed and allowed, in the root) the first
// time. Decided once per tree.
func (t *cgroupTree) v2Controller(ctl string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok, decided := t.v2ctl[ctl]; decided {
		return ok
	}
	ok := t.enableV2(ctl)
	t.v2ctl[ctl] = ok
	return ok
}

func (t *cgroupTree) enableV2(ctl string) bool {
	has := func(dir, file string) bool {
		b, err := os.ReadFile(filepath.Join(dir, file))
		return err == nil && slices.Contains(strings.Fields(string(b)), ctl)
	}
	if !has(t.parent, "cgroup.controllers") {
		if !has(t.root, "cgroup.controllers") {
			return false // bound to a v1 hierarchy, or not delegated to us
		}
		// Fails (EBUSY) when the root is not the top of the hierarchy and holds
		// processes: the "no internal processes" rule.
		if err := writeFile(filepath.Join(t.root, "cgroup.subtree_control"), "+"+ctl); err != nil {
			t.log.Info("bash: cannot enable a cgroup v2 controller", "controller", ctl, "cgroup", t.root, "err", err)
			return false
		}
		t.log.Info("bash: enabled a cgroup v2 controller for task limits", "controller", ctl, "cgroup", t.root)
	}
	if err := writeFile(filepath.Join(t.parent, "cgroup.subtree_control"), "+"+ctl); err != nil {
		t.log.Info("bash: cannot enable a cgroup v2 controller", "controller", ctl, "cgroup", t.parent, "err", err)
		return false
	}
	return true
}

// v2Enabled lists the controllers enabled for task directories.
func (t *cgroupTree) v2Enabled() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var on []string
	for ctl, ok := range t.v2ctl {
		if ok {
			on = append(on, ctl)
		}
	}
	return on
}

// mkdir makes the task directory name.
func (t *cgroupTree) mkdir(name string) error {
	return unix.Mkdir(filepath.Join(t.parent, name), 0o755)
}

// openDir opens the task directory name with O_PATH, for CLONE_INTO_CGROUP.
func (t *cgroupTree) openDir(name string) (int, error) {
	return unix.Open(filepath.Join(t.parent, name), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// v1Parent returns the per-process directory in ctl's v1 hierarchy, creating it the
// first time; "" when that hierarchy is not available.
func (t *cgroupTree) v1Parent(ctl string) (string, error) {
	base := t.lay.v1Dir(ctl)
	if base == "" {
		return "", nil
	}
	dir := filepath.Join(base, t.name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.v1made[ctl] {
		return dir, nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	t.v1made[ctl] = true
	return dir, nil
}

// taskDirs lists the task directories whose names start with prefix ("task-" for
// all), in the v2 tree and in the v1 hierarchies.
func (t *cgroupTree) taskDirs(prefix string) []string {
	dirs := []string{t.parent}
	for _, ctl := range controllers {
		if base := t.lay.v1Dir(ctl); base != "" {
			dirs = append(dirs, filepath.Join(base, t.name))
		}
	}
	var found []string
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				found = append(found, filepath.Join(d, e.Name()))
			}
		}
	}
	return found
}

// cgroupLine is how /proc/PID/cgroup names the cgroup v2 directory dir, without
// the line's end: "0::/path", the path within the hierarchy as this process's
// cgroup namespace sees it, which is also how mountinfo gives a mount's root.
func (t *cgroupTree) cgroupLine(dir string) string {
	for _, m := range t.lay.v2mounts {
		if rel, err := filepath.Rel(m.point, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return "0::" + filepath.Join(m.root, rel)
		}
	}
	return "\x00" // not under a known mount: matches nothing
}

// live counts the processes in the task directories whose names start with prefix.
func (t *cgroupTree) live(prefix string, into map[int]bool) {
	for _, dir := range t.taskDirs(prefix) {
		if !strings.HasPrefix(dir, t.parent) {
			continue // v1 directories hold the same processes
		}
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				for _, pid := range readPids(filepath.Join(path, "cgroup.procs")) {
					into[pid] = true
				}
			}
			return nil
		})
	}
}

// allTrees returns this process's cgroup trees.
func allTrees() []*cgroupTree {
	trees.mu.Lock()
	defer trees.mu.Unlock()
	var ts []*cgroupTree
	for _, t := range trees.m {
		ts = append(ts, t)
	}
	return ts
}
