package actors

// WithRegistryHook calls hook on the registry's goroutine before it handles each
// message: fault injection for the registry's own panic containment.
func WithRegistryHook(hook func(msg any)) Option {
	return optionFunc(func(c *config) { c.registryHook = hook })
}
