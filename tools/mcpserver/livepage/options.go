package livepage

// defaultEventBuffer is how many runtime events one connection of the event
// stream may fall behind by before it misses some and resynchronises.
const defaultEventBuffer = 1024

// Option configures a Handler. Zero and negative values keep the default.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	eventBuffer int
}

func defaultConfig() config {
	return config{eventBuffer: defaultEventBuffer}
}

// WithEventBuffer sets how many runtime events one connection of the event stream
// holds for a browser that reads slower than they come (default
// defaultEventBuffer). Past it, the connection misses events, never holding up
// the runtime: the browser gets an overflow event saying how many, and a fresh
// snapshot. Values <= 0 keep the default.
func WithEventBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.eventBuffer = n
		}
	})
}
