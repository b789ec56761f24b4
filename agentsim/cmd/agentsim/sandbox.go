package main

import (
	"flag"

	"github.com/taskrt/taskrt/producers/bash"
)

// sandboxFlag declares -sandbox MODE on fs: the bash producer's sandbox for every
// command (off by default).
func sandboxFlag(fs *flag.FlagSet) *bash.Sandbox {
	var s bash.Sandbox
	fs.Func("sandbox", "run the commands in a bubblewrap sandbox of this `mode`: off (default), read-only or workspace-write", func(v string) (err error) {
		s.Mode, err = bash.ParseSandboxMode(v)
		return err
	})
	return &s
}
