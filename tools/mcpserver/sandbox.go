package mcpserver

import "github.com/taskrt/taskrt/producers/bash"

// newProducer is the server's bash producer, once it is known that what its
// options promise can be had here: a sandbox (bash.WithSandbox) and default limits
// (bash.WithMaxProcesses, …). The bash tool's description then says what commands
// may write and whether the network is off.
func newProducer(opts []bash.Option) (*bash.Producer, error) {
	p := bash.New(opts...)
	err := p.CheckLimits()
	if err == nil && p.Sandbox().On() {
		err = p.CheckSandbox()
	}
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// Sandbox passes the producer's sandbox on to the bash tool, for its description.
func (r runner) Sandbox() bash.Sandbox { return r.p.Sandbox() }
