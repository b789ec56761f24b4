//go:build linux

package bash

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Mount discovery: where this process's cgroups are, read from /proc/self/mountinfo
// and /proc/self/cgroup.

const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC

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
