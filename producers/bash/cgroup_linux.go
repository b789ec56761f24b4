//go:build linux

package bash

import (
	"bufio"
	"bytes"
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
	"syscall"
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

const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC

// controllers are the cgroup controllers limits use.
var controllers = []string{"pids", "memory", "cpu"}

// taskrtDirRE matches the per-process directory names.
var taskrtDirRE = regexp.MustCompile(`^taskrt-(\d+)-(\d+)$`)

// mount is one cgroup mount from /proc/self/mountinfo.
type mount struct {
	root, point string // the mounted subtree's root within the hierarchy, and where it is
}

// layout is where this process's cgroups are.
type layout struct {
	v2       string           // this process's cgroup v2 directory, "" without one
	v2mounts []mount          // the cgroup v2 mounts
	v1       map[string]mount // controller → the mount of its v1 hierarchy
	v1Paths  map[string]string
}

// v1Dir is this process's directory in the v1 hierarchy of ctl, "" without one.
func (l layout) v1Dir(ctl string) string {
	m, ok := l.v1[ctl]
	p, pok := l.v1Paths[ctl]
	if !ok || !pok {
		return ""
	}
	rel, ok := relTo(p, m.root)
	if !ok {
		return ""
	}
	return filepath.Join(m.point, rel)
}

// discover reads /proc/self/mountinfo and /proc/self/cgroup.
func discover() (layout, error) {
	l := layout{v1: map[string]mount{}, v1Paths: map[string]string{}}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return l, err
	}
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			l.v2mounts = append(l.v2mounts, m)
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				if slices.Contains(controllers, opt) {
					if _, dup := l.v1[opt]; !dup {
						l.v1[opt] = m
					}
				}
			}
		}
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return l, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			for _, m := range l.v2mounts {
				if rel, ok := relTo(parts[2], m.root); ok {
					l.v2 = filepath.Join(m.point, rel)
					break
				}
			}
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if slices.Contains(controllers, ctl) {
				l.v1Paths[ctl] = parts[2]
			}
		}
	}
	return l, nil
}

// relTo returns path relative to a mount's root, or false when it is outside it.
func relTo(path, root string) (string, bool) {
	switch {
	case root == "/":
		return path, true
	case path == root:
		return "/", true
	case strings.HasPrefix(path, root+"/"):
		return path[len(root):], true
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupTree is this process's part of a cgroup v2 hierarchy: the per-process
// directory under one root, shared by every Producer that uses that root.
type cgroupTree struct {
	root   string // the cgroup v2 directory the per-process directory lives in
	parent string // root/taskrt-<pid>-<start>
	name   string // taskrt-<pid>-<start>
	lay    layout
	log    *slog.Logger

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
	err := os.Remove(dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
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
func keyedValue(b []byte, key string) (int64, bool) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(" "))
		if ok && string(k) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
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

// writeFile writes a cgroup control file.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
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

// taskCgroup is one task's cgroup: a jail.
type taskCgroup struct {
	tree   *cgroupTree
	dir    string            // the task's cgroup v2 directory
	fd     int               // dir opened with O_PATH, for CLONE_INTO_CGROUP; -1 once closed
	v1     map[string]string // controller → the task's v1 directory, for limits placed there
	limits Limits
	log    *slog.Logger
}

// newTask creates the cgroup of a task named name with limits lim. Each limit goes
// to cgroup v2 when its controller is available there, else to the controller's v1
// hierarchy (whose directory the spawning thread enters for the fork, see spawn);
// a limit with neither is an ErrLimitsUnavailable error.
func (t *cgroupTree) newTask(name string, lim Limits, log *slog.Logger) (_ *taskCgroup, err error) {
	c := &taskCgroup{tree: t, dir: filepath.Join(t.parent, name), fd: -1, v1: map[string]string{}, limits: lim, log: log}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bash: creating the task's cgroup: %w", err)
	}
	defer func() {
		if err != nil {
			c.closeFD()
			_ = c.release()
		}
	}()
	type setting struct{ file, value string }
	apply := func(ctl, what string, v2 []setting, v1 []setting) error {
		if t.v2Controller(ctl) {
			for _, s := range v2 {
				if err := writeFile(filepath.Join(c.dir, s.file), s.value); err != nil && !(errors.Is(err, os.ErrNotExist) && s.file == "memory.swap.max") {
					return fmt.Errorf("bash: setting the %s limit: %w", what, err)
				}
			}
			return nil
		}
		parent, err := t.v1Parent(ctl)
		if err != nil {
			return fmt.Errorf("bash: creating the %s cgroup (v1): %w", ctl, err)
		}
		if parent == "" {
			return fmt.Errorf("%w: no %s controller in cgroup v2 here and no cgroup v1 %s hierarchy", ErrLimitsUnavailable, ctl, ctl)
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("bash: creating the %s cgroup (v1): %w", ctl, err)
		}
		c.v1[ctl] = dir
		for _, s := range v1 {
			if err := writeFile(filepath.Join(dir, s.file), s.value); err != nil && !(errors.Is(err, os.ErrNotExist) && s.file == "memory.memsw.limit_in_bytes") {
				return fmt.Errorf("bash: setting the %s limit: %w", what, err)
			}
		}
		return nil
	}
	if lim.Processes > 0 {
		n := strconv.Itoa(lim.Processes)
		// In v1 the spawning thread sits in the cgroup during the fork: one more
		// until it leaves (see lowerAfterSpawn).
		if err := apply("pids", "process", []setting{{"pids.max", n}}, []setting{{"pids.max", strconv.Itoa(lim.Processes + 1)}}); err != nil {
			return nil, err
		}
	}
	if lim.Memory > 0 {
		n := strconv.FormatInt(lim.Memory, 10)
		if err := apply("memory", "memory",
			[]setting{{"memory.max", n}, {"memory.swap.max", "0"}},
			[]setting{{"memory.limit_in_bytes", n}, {"memory.memsw.limit_in_bytes", n}}); err != nil {
			return nil, err
		}
	}
	if lim.CPU > 0 {
		// In v1 the quota is set after the spawn, so the spawning thread is never
		// throttled by it.
		if err := apply("cpu", "cpu", []setting{{"cpu.max", fmt.Sprintf("%d %d", lim.cpuQuota(), cpuPeriod)}}, nil); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bash: opening the task's cgroup: %w", err)
	}
	c.fd = fd
	return c, nil
}

// lowerAfterSpawn is run by the spawning thread right after the fork, before it
// leaves the task's v1 cgroups: the process limit drops to its value (the thread no
// longer needs its slot once it leaves), and the CPU quota is set.
func (c *taskCgroup) lowerAfterSpawn() error {
	var errs []error
	if dir, ok := c.v1["pids"]; ok {
		errs = append(errs, writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(c.limits.Processes)))
	}
	return errors.Join(errs...)
}

// afterSpawn sets what v1 takes after the spawn: the CPU quota.
func (c *taskCgroup) afterSpawn() error {
	dir, ok := c.v1["cpu"]
	if !ok {
		return nil
	}
	return errors.Join(
		writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)),
		writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(c.limits.cpuQuota(), 10)))
}

func (c *taskCgroup) closeFD() {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
}

// terminate sends SIGTERM to the leader's process group and to every other process
// of the cgroup. A pid read from cgroup.procs is signalled through a pidfd, and only
// if a second read, after the pidfd was opened, still lists it: a process that
// exited in between and whose pid was reused outside the cgroup is never hit.
func (c *taskCgroup) terminate(leader int) error {
	err := signalGroup(leader, syscall.SIGTERM)
	procs := c.dir + "/cgroup.procs"
	fds := map[int]int{}
	for _, pid := range readPids(procs) {
		if pgid, perr := unix.Getpgid(pid); perr == nil && pgid == leader {
			continue // signalled with the group
		}
		if fd, ferr := unix.PidfdOpen(pid, 0); ferr == nil {
			fds[pid] = fd
		}
	}
	if len(fds) == 0 {
		return err
	}
	for _, pid := range readPids(procs) {
		if fd, ok := fds[pid]; ok {
			err = errors.Join(err, ignoreGone(unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)))
		}
	}
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
	return err
}

// kill sends SIGKILL to every process of the cgroup at once; a fork under way
// cannot escape it.
func (c *taskCgroup) kill(int) error {
	err := writeFile(c.dir+"/cgroup.kill", "1")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// settle runs once the leader has exited: when processes are left, it counts and
// kills them and waits for "populated 0". Then, if this process receives orphans
// at all, it reaps the task's zombies that became its children (see reaper).
func (c *taskCgroup) settle(leader int) (int, error) {
	leftovers := 0
	var err error
	if populated(c.dir) == 1 {
		leftovers = len(readPids(c.dir + "/cgroup.procs"))
		if err = c.kill(leader); err == nil {
			if !waitFor(c.dir+"/cgroup.events", sweepTimeout, func() bool { return populated(c.dir) != 1 }) {
				err = fmt.Errorf("processes survived cgroup.kill for %s", sweepTimeout)
			}
		}
		if leftovers > 0 {
			c.log.Info("bash task: killed leftover processes", "count", leftovers)
		}
	}
	if receivesOrphans() {
		err = errors.Join(err, reaps.run(c.tree.cgroupLine(c.dir)+"\n"))
	}
	return leftovers, err
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

// limitHits reads what the kernel recorded about the task's limits.
func (c *taskCgroup) limitHits() limitHits {
	h := limitHits{limits: c.limits}
	read := func(path, key string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		v, _ := keyedValue(b, key)
		return v
	}
	if c.limits.Memory > 0 {
		if dir, ok := c.v1["memory"]; ok {
			h.oomKills = read(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		} else {
			h.oomKills = read(filepath.Join(c.dir, "memory.events"), "oom_kill")
		}
	}
	if c.limits.Processes > 0 {
		dir := c.dir
		if d, ok := c.v1["pids"]; ok {
			dir = d
		}
		h.forksRefused = read(filepath.Join(dir, "pids.events"), "max")
	}
	return h
}

// release removes the task's cgroups. Every process has left them by now.
func (c *taskCgroup) release() error {
	c.closeFD()
	errs := []error{removeTree(c.dir)}
	for _, dir := range c.v1 {
		errs = append(errs, removeTree(dir))
	}
	return errors.Join(errs...)
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
