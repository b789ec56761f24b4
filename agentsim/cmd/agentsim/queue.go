package main

import (
	"errors"
	"flag"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/agentsim"
)

// queueFlags adds -queue N and -global-limit N (actors.WithQueue, WithGlobalLimit)
// to fs; the returned function checks them and gives the options they ask for.
func queueFlags(fs *flag.FlagSet) func() ([]agentsim.Option, error) {
	queue := fs.Int("queue", 0, "queue up to `N` starts per owner beyond the caps, with status queued (0: none)")
	global := fs.Int("global-limit", 0, "at most `N` running tasks across all agents, handed out round robin (0: none)")
	return func() ([]agentsim.Option, error) {
		if *queue < 0 || *global < 0 {
			return nil, errors.New("-queue and -global-limit must not be negative")
		}
		var rt []actors.Option
		if *queue > 0 {
			rt = append(rt, actors.WithQueue(*queue))
		}
		if *global > 0 {
			rt = append(rt, actors.WithGlobalLimit(*global))
		}
		return []agentsim.Option{agentsim.WithRuntimeOptions(rt...)}, nil
	}
}
