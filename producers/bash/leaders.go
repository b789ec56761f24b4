package bash

import (
	"maps"
	"sync"
)

// leaders holds the leaders of this process's tasks, from their spawn until os/exec
// has reaped them (so a registered pid cannot have been reused by another process
// of ours): the sweep reads their markers from here instead of their environment,
// and the orphan reaper never touches them.
var leaders leaderSet

type leaderSet struct {
	mu sync.Mutex     // protects m
	m  map[int]string // pid → marker
}

func (s *leaderSet) add(pid int, marker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int]string{}
	}
	s.m[pid] = marker
}

// remove forgets pid if it is still marker's leader.
func (s *leaderSet) remove(pid int, marker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[pid] == marker {
		delete(s.m, pid)
	}
}

// has reports whether pid is a registered leader.
func (s *leaderSet) has(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[pid]
	return ok
}

// snapshot returns a copy.
func (s *leaderSet) snapshot() map[int]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}
