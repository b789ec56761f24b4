package mcpserver

import "github.com/taskrt/taskrt/producers/bash"

// WithSandbox runs every command in s (see bash.Sandbox; default: no sandbox). New
// fails when s is a sandbox this machine cannot provide (no bwrap, no user
// namespaces): a server asked to sandbox never runs a command without one. The
// bash tool's description then says what commands may write and whether the
// network is off.
func WithSandbox(s bash.Sandbox) Option {
	return optionFunc(func(c *config) { c.sandbox = s })
}

// newProducer is the server's bash producer; with a sandbox, only once it is known
// to work here.
func newProducer(cfg config, opts []bash.Option) (*bash.Producer, error) {
	p := bash.New(opts...)
	if cfg.sandbox.On() {
		if err := p.CheckSandbox(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Sandbox passes the producer's sandbox on to the bash tool, for its description.
func (r runner) Sandbox() bash.Sandbox { return r.p.Sandbox() }
